// Package config reads handoff's YAML configuration file once, validates all of
// it, and hands the result to the rest of the program as a plain struct.
//
// Nothing here is global: Load and Parse return a fresh *Config and the caller
// passes it on explicitly. Secrets named by *_env keys are resolved at load
// time through the getenv function the caller supplies, so tests never touch
// the process environment.
package config

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/provider/kinds"
)

// Config is the whole validated configuration of one handoff process.
type Config struct {
	Addr    string // default "127.0.0.1:8080"
	DataDir string // default "./data"
	// DatabaseURL (yaml database_url, env HANDOFF_DATABASE_URL), when set,
	// is a PostgreSQL database serve keeps its records in instead of
	// data_dir's file (experimental, issue 33). It may hold a password:
	// never logged or shown.
	DatabaseURL string
	BaseURL     string    // optional; absolute http(s) URL, stored without a trailing slash
	Workers     int       // default 4; 1..256
	Channels    []Channel // never empty: the demo channel when the file lists none
	Drafter     Drafter
	Routing     Routing
	Providers   []Provider // "sandbox" is always available built-in and need not be listed
	Retry       Retry
	Stuck       Stuck
	Backups     Backups
	Retention   Retention
	Auth        Auth

	// TrustedProxies (yaml trusted_proxies) are the reverse proxies whose
	// ProxyHeader names the client; a request from any other peer is
	// taken to come from that peer.
	TrustedProxies []netip.Prefix
	ProxyHeader    string // yaml proxy_header: HeaderXForwardedFor (default) or HeaderForwarded
	// MetricsAddr (yaml metrics_addr), when set, is a second listener that
	// serves GET /metrics alone, without a token; keep it private.
	MetricsAddr string

	// DraftWorkers (yaml draft_workers, 1..256) is how many draft jobs run
	// at once; 0 (unset) means DraftConcurrency's default.
	DraftWorkers int

	// Clients (yaml clients) are the businesses the channels belong to;
	// empty when the file lists none, which is DefaultClient (ClientList).
	Clients []Client

	// UndoWindow (yaml undo_window) is how long a person's approval holds
	// its reply before the delivery job may send it, so that Undo can take
	// it back; default 10s, 0 sends at once (no undo). An auto-approval
	// is never held: nobody is there to undo it.
	UndoWindow time.Duration

	// Digests (yaml digests) tell approvers that drafts wait (digests.go).
	Digests []Digest
	// CRM (yaml crm) is where each client's leads are written, one
	// write per status move (crm.go, package crm).
	CRM []CRM
	// Events (yaml events) are the subscribers of the outbound events,
	// each posted once per business key (events.go, package outbound).
	Events []Subscriber

	// Limits (yaml limits) bound the memory one process holds (limits.go).
	Limits Limits

	// Approvals (yaml approvals) are the surfaces besides the dashboard
	// where a person decides a draft (surfaces.go).
	Approvals Approvals

	// Review (yaml review) tunes how drafts wait for a person (reminders.go).
	Review Review
}

// DefaultUndoWindow is undo_window when the file sets none; MaxUndoWindow
// is the longest it may be (a reply held longer is a reply late).
const (
	DefaultUndoWindow = 10 * time.Second
	MaxUndoWindow     = 10 * time.Minute
)

// Auth holds the dashboard's login rules.
type Auth struct {
	// RequireTOTPForAdmins (yaml auth.require_totp_for_admins) makes an
	// admin without a second factor enrol one before any other page.
	RequireTOTPForAdmins bool
	// SecretKeyEnv (yaml auth.secret_key_env) names the variable holding
	// the key that encrypts second-factor secrets at rest; unset:
	// DefaultSecretKeyEnv. SecretKey is its value, resolved once (empty:
	// no key, secrets are stored as they are).
	SecretKeyEnv string
	SecretKey    string
}

// DefaultSecretKeyEnv is the variable read for the secret key when
// auth.secret_key_env names none.
const DefaultSecretKeyEnv = "HANDOFF_SECRET_KEY"

// ResolveSecretKey reads the secret key from the variable auth names (or
// DefaultSecretKeyEnv, which may be unset), unless a key is set already.
func (a *Auth) ResolveSecretKey(getenv func(string) string) {
	if a.SecretKey != "" {
		return
	}
	name := a.SecretKeyEnv
	if name == "" {
		name = DefaultSecretKeyEnv
	}
	a.SecretKey = getenv(name)
}

// Channel is one inbound webhook source, served at POST /hooks/{name}.
type Channel struct {
	Name        string     // [a-z0-9-]+, unique
	Client      string     // yaml client: the client it belongs to; the only client when unset (ClientOf)
	Signature   *Signature // nil: unsigned (allowed; Warnings() mentions it)
	Fields      Fields
	Provider    string // default "sandbox"; names a defined provider or "sandbox"
	AutoApprove bool
	MaxBody     int64 // yaml key max_body, bytes; default 1 MiB (1<<20)
	// Coalesce is the quiet period of a conversation turn: a lead's draft is
	// written once it has sent nothing for this long, so a burst of messages
	// costs one draft. Default 10s; 0 drafts at once.
	Coalesce time.Duration

	// Inbound shape, from the preset (hook.LookupPreset) unless set.
	Preset    string        // yaml preset; "" is generic
	Messages  hook.Messages // yaml messages: items, when, unless
	Receipts  hook.Receipts // yaml receipts: items, id, status
	Handshake string        // yaml handshake: "" (none), meta or slack
	Answer    string        // yaml answer: json (default), ok or twiml
	// VerifyToken answers Meta's subscription handshake (yaml verify_token
	// or verify_token_env); never printed.
	VerifyToken    string
	VerifyTokenEnv string
}

// Signature says how a channel's requests are authenticated.
type Signature struct {
	Scheme string // one of hook.Schemes; a preset's when not set
	// Secret is the first of Secrets, kept for code that names one.
	Secret string
	// Secrets are every secret any of which verifies (yaml secret,
	// secret_env, secrets, secrets_env, in that order): list the new one
	// beside the old while rotating. Never printed.
	Secrets    []string
	SecretEnv  string        // yaml secret_env
	SecretsEnv []string      // yaml secrets_env
	Header     string        // hmac-sha256 and token, required there (a preset may give it)
	Encoding   string        // hmac-sha256: hex (default) or base64
	Prefix     string        // hmac-sha256: what the header value starts with, e.g. sha256=
	Tolerance  time.Duration // standard-webhooks, slack and stripe; default 5m
}

// Verifying is the hook package's view of the signature.
func (s *Signature) Verifying() hook.Signing {
	secrets := s.Secrets
	if len(secrets) == 0 && s.Secret != "" {
		secrets = []string{s.Secret} // built in code with one secret
	}
	return hook.Signing{Scheme: s.Scheme, Secrets: secrets, Header: s.Header, Encoding: s.Encoding, Prefix: s.Prefix, Tolerance: s.Tolerance}
}

// Mapping is where the channel's messages, their fields and its receipts
// are in a payload, for hook's ReadAll.
func (ch *Channel) Mapping() hook.Mapping {
	f := ch.Fields
	return hook.Mapping{MessageID: f.MessageID, ConversationID: f.ConversationID, Contact: f.Contact, Name: f.Name, Text: f.Text, Subject: f.Subject,
		Messages: ch.Messages, Receipts: ch.Receipts}
}

// Fields are the sources an event's fields are read from: RFC 6901 JSON
// pointers into the body, or "header:Name" for a request header. An empty
// source (set explicitly with "") means the field is not read.
type Fields struct {
	MessageID      []string // yaml message_id: a string or a list of strings; required
	ConversationID string   // optional; empty: the contact, else the message id
	Contact        string   // default "/from"
	Name           string   // default "/name"
	Text           string   // default "/text"
	Subject        string   // optional: an email's subject, which its reply answers with "Re: "
}

// Drafter configures how reply drafts are written.
type Drafter struct {
	Kind          string        // "template" (default) | "openai"
	BaseURL       string        // openai: required, absolute URL, stored without a trailing slash
	Model         string        // openai: required
	APIKeyEnv     string        // yaml api_key_env
	APIKey        string        // resolved from APIKeyEnv at load (may be empty for local servers); never printed
	PromptVersion string        // default "v1"
	SystemPrompt  string        // yaml system_prompt
	Template      string        // default "Hi {{.Name}}, thanks for your message. We will get back to you shortly."; a text/template that names only the drafter's fields (drafter.CheckTemplate)
	Timeout       time.Duration // default 30s
	Delay         time.Duration // optional: an artificial delay before each template draft, for drills and crash tests
	// Structured (yaml structured) is how the answer's shape is asked for:
	// "json_schema" (default), "json_object" or "none".
	Structured string
	// ChannelPrompts (yaml channel_prompts) replace SystemPrompt on the channels they name.
	ChannelPrompts map[string]string
	// FactsFile (yaml facts_file) is read into Facts at load: the facts of
	// every client that has no clients[].facts_file (FactsFileOf), which
	// seed its facts versions at start (facts.Seed).
	FactsFile, Facts string
	// Price (yaml price: {input, output, currency}) is per million tokens.
	Price Price
	// DailyBudget (yaml daily_budget) is the most a client may spend on
	// drafting in a UTC day, in Price.Currency, unless clients[].daily_budget
	// says otherwise; 0: no budget.
	DailyBudget float64
	// ContextTokens (yaml context_tokens, default 1000) bounds the earlier
	// conversation given to the model.
	ContextTokens int
	// Canary (yaml canary), when set, drafts a share of new turns with a
	// candidate version (canary.go).
	Canary *Canary
}

// Price is what a model's tokens cost, per million.
type Price struct {
	Input, Output float64
	Currency      string // default "USD"
}

// Routing assigns an owner to each lead: the first matching rule wins, else DefaultOwner.
type Routing struct {
	Version      string // default "r1"
	DefaultOwner string // default "sales"
	Rules        []Rule
}

// Rule routes the leads that match When to Owner.
type Rule struct {
	When  When
	Owner string // required
}

// When holds a rule's conditions; every condition that is set must match, and at least one is set.
type When struct {
	TextContains string // yaml text_contains (case-insensitive match at run time)
	Intent       string
	Channel      string // names a defined channel
	Has          string // a field that must be present: name, email, phone or contact
}

// Provider is an outbound destination for approved replies: its kind's
// declaration (provider/kinds) says which keys it takes and requires.
type Provider = kinds.Provider

// ProviderKinds holds the keys of the provider kinds beyond the generic
// http call (see kinds.ProviderKinds).
type ProviderKinds = kinds.ProviderKinds

// Retry bounds the retries of a failing job.
type Retry struct {
	MaxAttempts int           // yaml max_attempts; default 8; 1..100
	BaseDelay   time.Duration // yaml base_delay; default 2s: the first retry waits about this long, doubling each attempt, with jitter
	MaxDelay    time.Duration // yaml max_delay; default 1h; >= BaseDelay
}

// Stuck holds how long a lead may stay in each status before it alerts.
type Stuck struct {
	Received time.Duration // default 10m
	Matched  time.Duration // default 30m
	Owned    time.Duration // default 4h
	Alert    string        // optional: the provider that announces each newly stuck lead once
}

// Retention holds how long records are kept.
type Retention struct {
	Events time.Duration // default 720h: the dedup window
	Keys   time.Duration // default 72h: completed idempotency keys of the key API
}

// defaultTemplate is the reply template of the built-in template drafter.
// defaultTemplate names no owner: an owner is a team's name in the
// routing rules ("sales", "billing"), which read as a person's name in
// "sales will get back to you".
const defaultTemplate = "Hi {{.Name}}, thanks for your message. We will get back to you shortly."

// sandboxProvider is the name of the built-in provider that is always available.
const sandboxProvider = "sandbox"

const (
	defaultMaxBody  = 1 << 20
	defaultCoalesce = 10 * time.Second
	providerTimeout = 10 * time.Second
	redactedValue   = "[redacted]"
)

// DefaultAddr and DefaultDataDir are the listen address and data folder
// when the file sets none; the commands that take --addr or --data without
// reading the file (user, health) default to them too.
const (
	DefaultAddr    = "127.0.0.1:8080"
	DefaultDataDir = "./data"
)

// defaults returns every default except the channels, which depend on
// whether the file lists any.
func defaults() *Config {
	return &Config{
		Addr:    DefaultAddr,
		DataDir: DefaultDataDir,
		Workers: 4,
		Drafter: Drafter{
			Kind:          "template",
			PromptVersion: "v1",
			Template:      defaultTemplate,
			Timeout:       30 * time.Second,
			Structured:    "json_schema",
			ContextTokens: 1000,
			Price:         Price{Currency: "USD"},
		},
		Routing:   Routing{Version: "r1", DefaultOwner: "sales"},
		Retry:     Retry{MaxAttempts: 8, BaseDelay: 2 * time.Second, MaxDelay: time.Hour},
		Stuck:     Stuck{Received: 10 * time.Minute, Matched: 30 * time.Minute, Owned: 4 * time.Hour},
		Backups:   Backups{Schedule: "0 * * * *", Keep: 24},
		Retention: Retention{Events: 720 * time.Hour, Keys: 72 * time.Hour},

		ProxyHeader: HeaderXForwardedFor,
		UndoWindow:  DefaultUndoWindow,
		Limits:      defaultLimits(),
	}
}

// newChannel returns a channel with every per-channel default filled in
// except the message id, which a configured channel must name itself.
func newChannel() Channel {
	return Channel{
		Provider: sandboxProvider,
		MaxBody:  defaultMaxBody,
		Coalesce: defaultCoalesce,
		Fields:   Fields{Contact: "/from", Name: "/name", Text: "/text"},
	}
}

func demoChannel() Channel {
	ch := newChannel()
	ch.Name = "demo"
	ch.Fields.MessageID = []string{"/id"}
	ch.Fields.ConversationID = "/conversation_id"
	return ch
}

// Default returns the zero-config demo: one unsigned channel "demo", the
// template drafter, the sandbox provider and every default.
func Default() *Config {
	c := defaults()
	c.Channels = []Channel{demoChannel()}
	return c
}

// Load reads and validates the file at path; path "" returns Default().
func Load(path string, getenv func(string) string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, getenv)
}

// Channel finds a channel by name.
func (c *Config) Channel(name string) (*Channel, bool) {
	for i := range c.Channels {
		if c.Channels[i].Name == name {
			return &c.Channels[i], true
		}
	}
	return nil, false
}

// Provider finds a provider listed under providers by name; the built-in
// sandbox, when the file does not list it, is not found.
func (c *Config) Provider(name string) (*Provider, bool) {
	for i := range c.Providers {
		if c.Providers[i].Name == name {
			return &c.Providers[i], true
		}
	}
	return nil, false
}

// DefaultLookupSettle is lookup_settle when the file sets none: a provider
// that answered too late for our timeout is given several timeouts more,
// and never less than a minute, to store what it accepted before its
// "not found" is believed.
func DefaultLookupSettle(timeout time.Duration) time.Duration {
	return max(6*timeout, time.Minute)
}
