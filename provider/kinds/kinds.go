// Package kinds declares each provider kind in one place: the config keys
// it takes and requires (each check one sentence at the key it names), the
// inbound preset its provider's webhooks are read with, and what it can
// prove after an unknown outcome (the README's table). It is a leaf: config
// reads it to validate a provider's entry, provider builds each kind from
// it, and their tests tie the hook presets and the README to it. It holds
// data and checks only; sending lives in package provider.
package kinds

import (
	"slices"
	"strings"
	"time"
)

// Kind is one provider kind's declaration.
type Kind struct {
	Name string
	// Keys are the keys the kind takes beyond the ones every provider
	// has (Common), in the order the "it takes" sentence lists them.
	Keys []Key
	// Rules are the checks that span keys (one of two, both or neither);
	// has says whether the file set a key. Nil: none.
	Rules func(p *Provider, has func(key string) bool) []Problem
	// Defaults fills what the kind defaults once its keys are read; nil:
	// none.
	Defaults func(p *Provider, has func(key string) bool)
	// Warn returns the sentences `handoff check` and the log warn about a
	// valid entry at (e.g. providers[0]); nil: none.
	Warn func(at string, p *Provider) []string
	// Preset is the hook preset that reads this provider's webhooks (its
	// messages and receipts), "" when it has none of its own.
	Preset string
	// Presets are the presets of a kind that answers more than one (meta:
	// messenger and instagram); Preset is then "". See PresetNames.
	Presets []string
	// MaxText is the longest text the provider takes, counted as it
	// counts (see TextLength); 0: no limit declared. Approval refuses a
	// longer reply.
	MaxText int
	// Recipient is what a digest's address looks like to this kind.
	Recipient Recipient
	// Window is how long after the customer's last message the provider
	// takes a free-form reply; zero: no window (any time).
	Window Window
	Row    Row
}

// Window is a kind's customer-service window: the provider takes a
// free-form reply only within Reply of the customer's last message on the
// lead (WhatsApp: 24 hours). Tagged is a longer window a tagged message may
// use when the provider's entry enables it (meta: 7 days with the
// HUMAN_AGENT tag, yaml human_agent: true); 0: none.
type Window struct {
	Reply  time.Duration
	Tagged time.Duration
}

// ReplyWindow is how long after the customer's last message p, a provider
// of kind k, takes a reply: its tagged window when p enables it, else its
// free-form one; 0 when the kind declares none (any time).
func (k Kind) ReplyWindow(p Provider) time.Duration {
	if p.HumanAgent && k.Window.Tagged > 0 {
		return k.Window.Tagged
	}
	return k.Window.Reply
}

// NeedsTag reports whether a reply to a customer who last wrote elapsed
// ago goes past k's free-form window into the tagged one p enables: the
// meta kind then sends it with the HUMAN_AGENT tag.
func (k Kind) NeedsTag(p Provider, elapsed time.Duration) bool {
	return p.HumanAgent && k.Window.Tagged > 0 && k.Window.Reply > 0 && elapsed >= k.Window.Reply
}

// Key is one key a kind takes.
type Key struct {
	Name string
	// Need, when set, makes the key required: the sentence after
	// "missing; " (e.g. "a telegram provider needs the variable holding
	// its bot token").
	Need string
	// Check, when set, says in one sentence what is wrong with the value
	// the file gave (read into p), "" when it is fine. It runs only when
	// the value was read.
	Check func(p *Provider) string
	// Only, when set, marks a key no other kind takes: another kind that
	// sets it is told "only a <kind> provider takes <key> (<Only>)".
	Only string
}

// Problem is one thing wrong with an entry: the sentence and the key it is
// about (the entry itself when the key is not set).
type Problem struct {
	Key  string
	Text string
}

// Row is what a kind can prove, as the README's table publishes it.
type Row struct {
	ResendSafe string // does a resend with our reference deliver once?
	Lookup     string // can a send be found by our reference?
	Receipts   string // does the provider report delivery, naming what?
	Unknown    string // what handoff does with an unknown outcome
}

// Recipient is what a digest's address looks like to a kind.
type Recipient struct {
	// Hint says it with an example; "" is "the recipient as the provider
	// names it".
	Hint string
	// Default is the address a digest gets when it sets none; "" with
	// Optional false makes the address required.
	Default string
	// Optional: a digest may set no address (the kind's URL is the
	// recipient).
	Optional bool
	// Check says in a phrase what is wrong with an address, "" when it is
	// fine; nil: any address without spaces or line breaks.
	Check func(address string) string
}

// Template is one of a WhatsApp Business account's approved message
// templates, as the Cloud API's template message names it.
type Template struct {
	Name     string // as approved in WhatsApp Manager: [a-z0-9_]+
	Language string // its language code, e.g. en_US
	// Parameters fill the body's {{1}}, {{2}}… in order: each is literal
	// text, or {name} for the lead's name.
	Parameters []string
}

// NameParameter in a template's parameters stands for the lead's name.
const NameParameter = "{name}"

// TemplateParameterProblem says in a sentence what the Cloud API would
// refuse in template parameter s (error 132018: no line breaks, tabs or
// more than four spaces in a row), or a placeholder handoff does not fill
// in; "" when it is fine.
func TemplateParameterProblem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "a template parameter must not be empty (WhatsApp refuses an empty one)"
	case strings.ContainsAny(s, "\n\t"):
		return "a template parameter must not hold line breaks or tabs (WhatsApp refuses them)"
	case strings.Contains(s, "     "):
		return "a template parameter must not hold more than four spaces in a row (WhatsApp refuses them)"
	case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && s != NameParameter:
		return s + " is not a parameter handoff fills in (use " + NameParameter + " for the lead's name, or literal text)"
	}
	return ""
}

// Template returns p's template called name.
func (p Provider) Template(name string) (Template, bool) {
	for _, t := range p.Templates {
		if t.Name == name {
			return t, true
		}
	}
	return Template{}, false
}

// Common are the keys every provider has.
var Common = []string{"name", "kind", "timeout", "lookup_settle", "api_base", "rate", "burst"}

// all is every kind, in the order messages list them.
var all = []Kind{HTTP, Sandbox, Twilio, WhatsApp, Meta, Telegram, Slack, SMTP}

// All returns every kind's declaration, in the order messages list them.
func All() []Kind { return slices.Clone(all) }

// Names lists the kinds' names, in the order messages list them.
func Names() []string {
	out := make([]string, len(all))
	for i, k := range all {
		out[i] = k.Name
	}
	return out
}

// Lookup returns the kind called name.
func Lookup(name string) (Kind, bool) {
	for _, k := range all {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// KeyNames lists the keys k takes beyond Common.
func (k Kind) KeyNames() []string {
	out := make([]string, len(k.Keys))
	for i, key := range k.Keys {
		out[i] = key.Name
	}
	return out
}

// PresetNames lists the presets that read k's webhooks: Preset, or
// Presets; none when it has none of its own.
func (k Kind) PresetNames() []string {
	if k.Preset != "" {
		return append([]string{k.Preset}, k.Presets...)
	}
	return slices.Clone(k.Presets)
}

// TextLength is the length of text as the providers count a message's
// characters against MaxText: in UTF-16 code units, as Twilio counts its
// Body (an emoji outside the Basic Multilingual Plane is two).
func TextLength(text string) int {
	n := 0
	for _, r := range text {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// Key returns k's key called name.
func (k Kind) Key(name string) (Key, bool) {
	for _, key := range k.Keys {
		if key.Name == name {
			return key, true
		}
	}
	return Key{}, false
}

// Provider is an outbound destination for approved replies, as the config
// file defines it and its kind reads it.
type Provider struct {
	Name                   string        // [a-z0-9-]+, unique, not "sandbox"
	Kind                   string        // one of Names()
	URL                    string        // http: required absolute http(s) URL
	SigningSecretEnv       string        // yaml signing_secret_env
	SigningSecret          string        // resolved from SigningSecretEnv at load; never printed
	SupportsIdempotencyKey bool          // yaml supports_idempotency_key
	LookupURL              string        // yaml lookup_url; optional; contains "{ref}"
	Timeout                time.Duration // default 10s
	// LookupSettle is how long after a send that may have reached the
	// provider ended a lookup's "not found" starts to count as "not sent"
	// (yaml lookup_settle). Default: the larger of 6 × Timeout and 1m for
	// http; 0 for the sandbox, whose lookup reads what its send wrote.
	LookupSettle time.Duration
	// Sandbox-only knobs, for tests and drills.
	Fail               string        // "" | "permanent" | "ambiguous": how a send fails
	FailFirst          int           // yaml fail_first: only the first N sends of each reference fail (0: all, when Fail is set)
	TimeoutAfterAccept bool          // yaml timeout_after_accept: record the message, then answer as a timeout would
	Delay              time.Duration // every send takes this long
	NoLookup           bool          // yaml lookup: false turns the sandbox's lookup off
	ProviderKinds                    // the API kinds' own keys
}

// ProviderKinds holds the keys of the provider kinds beyond the generic
// http call. Every secret comes from an environment variable (the *_env
// keys); the resolved value is never printed.
type ProviderKinds struct {
	// APIBase is where the kind's API is reached (yaml api_base), default
	// the provider's public API, so a proxy or a test stand-in can sit in
	// front.
	APIBase string

	// twilio
	AccountSID     string // yaml account_sid
	AuthTokenEnv   string // yaml auth_token_env
	AuthToken      string // resolved; never printed
	From           string // twilio: the sending number; smtp: the From address
	StatusCallback string // yaml status_callback: the hook URL Twilio reports to; ?ref=<outbox id> is added

	// whatsapp, meta, telegram, slack
	PhoneNumberID string // yaml phone_number_id (whatsapp)
	// Templates (yaml templates, whatsapp) are the account's approved
	// message templates a person may send once a lead's reply window has
	// closed, by name.
	Templates    []Template
	GraphVersion string // yaml graph_version (meta): the Graph API version, default the whatsapp kind's
	// HumanAgent (yaml human_agent, meta) says the page has the Human
	// Agent permission: a reply 24 hours to 7 days after the customer's
	// last message goes out tagged HUMAN_AGENT (Kind.Window.Tagged).
	HumanAgent bool
	TokenEnv   string // yaml token_env
	Token      string // resolved; never printed

	// smtp
	Host        string
	Port        int
	UsernameEnv string // yaml username_env
	Username    string // resolved; never printed
	PasswordEnv string // yaml password_env
	Password    string // resolved; never printed
	TLS         string // yaml tls: starttls (default), tls, none

	// http, extended
	URLEnv   string            // yaml url_env: the URL (a hook with a token in it) from the environment
	AuthEnv  string            // yaml auth_env: the whole Authorization header value from the environment
	Auth     string            // resolved; never printed
	Body     string            // yaml body: json (default) or form
	Fields   map[string]string // yaml fields: our field (to, text, client_ref, conversation_id, correlation_id) → the name the receiver wants
	AnswerID string            // yaml answer_id: a JSON pointer to the id in a 2xx answer (default /id)
	// Success is a rule a 2xx answer must meet to count as sent, for APIs
	// that answer 200 with an error (yaml success: "/ok=true"): a JSON
	// pointer and the value it must hold.
	SuccessPointer string
	SuccessValue   string

	// Rate is the sends per second the queue holds this provider to (yaml
	// rate: 1/s, 30/m); 0 is no limit. Burst is how many may go at once
	// (default 1).
	Rate  float64
	Burst int
}
