package config

import (
	"net/mail"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ProviderKindNames are the provider kinds a config may name.
var ProviderKindNames = []string{"http", "sandbox", "twilio", "whatsapp", "telegram", "slack", "smtp"}

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

	// whatsapp, telegram, slack
	PhoneNumberID string // yaml phone_number_id (whatsapp)
	TokenEnv      string // yaml token_env
	Token         string // resolved; never printed

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

// providerKindHandlers adds the kinds' keys to the provider handlers hs.
func (d *decoder) providerKindHandlers(p *Provider, hs handlers) handlers {
	secret := func(name *string, value *string) func(string, *yaml.Node) {
		return func(k string, v *yaml.Node) {
			if !d.envName(k, v, name) {
				return
			}
			if s, ok := d.secretFromEnv(k, v, *name); ok {
				*value = s
			}
		}
	}
	hs["api_base"] = func(k string, v *yaml.Node) { d.url(k, v, &p.APIBase) }
	hs["account_sid"] = func(k string, v *yaml.Node) {
		if d.str(k, v, &p.AccountSID) && (!strings.HasPrefix(p.AccountSID, "AC") || len(p.AccountSID) != 34) {
			d.fail(k, v, "%q is not a Twilio account SID (AC followed by 32 hex digits)", p.AccountSID)
		}
	}
	hs["auth_token_env"] = secret(&p.AuthTokenEnv, &p.AuthToken)
	hs["from"] = func(k string, v *yaml.Node) { d.str(k, v, &p.From) }
	hs["status_callback"] = func(k string, v *yaml.Node) { d.url(k, v, &p.StatusCallback) }
	hs["phone_number_id"] = func(k string, v *yaml.Node) {
		if d.str(k, v, &p.PhoneNumberID) {
			if _, err := strconv.ParseUint(p.PhoneNumberID, 10, 64); err != nil {
				d.fail(k, v, "%q is not a WhatsApp phone number id (digits only; quote it in YAML)", p.PhoneNumberID)
			}
		}
	}
	hs["token_env"] = secret(&p.TokenEnv, &p.Token)
	hs["host"] = func(k string, v *yaml.Node) { d.str(k, v, &p.Host) }
	hs["port"] = func(k string, v *yaml.Node) { d.intIn(k, v, &p.Port, 1, 65535) }
	hs["username_env"] = secret(&p.UsernameEnv, &p.Username)
	hs["password_env"] = secret(&p.PasswordEnv, &p.Password)
	hs["tls"] = func(k string, v *yaml.Node) { d.oneOf(k, v, &p.TLS, "a TLS mode", "starttls", "tls", "none") }
	hs["url_env"] = func(k string, v *yaml.Node) {
		if !d.envName(k, v, &p.URLEnv) {
			return
		}
		s, ok := d.secretFromEnv(k, v, p.URLEnv)
		if !ok {
			return
		}
		if err := checkHTTPURL(s); err != nil {
			d.fail(k, v, "the value of %s is not an absolute http or https URL", envLabel(p.URLEnv))
			return
		}
		p.URL = strings.TrimRight(s, "/")
	}
	hs["auth_env"] = secret(&p.AuthEnv, &p.Auth)
	hs["body"] = func(k string, v *yaml.Node) { d.oneOf(k, v, &p.Body, "a body encoding", "json", "form") }
	hs["fields"] = func(k string, v *yaml.Node) {
		p.Fields = map[string]string{}
		ours := map[string]bool{"to": true, "text": true, "client_ref": true, "conversation_id": true, "correlation_id": true}
		d.mapping(k, v, handlers{}.with(ours, func(name string) func(string, *yaml.Node) {
			return func(k string, v *yaml.Node) {
				var s string
				if d.str(k, v, &s) {
					p.Fields[name] = s
				}
			}
		}))
	}
	hs["answer_id"] = func(k string, v *yaml.Node) {
		if d.str(k, v, &p.AnswerID) && !strings.HasPrefix(p.AnswerID, "/") {
			d.fail(k, v, "%q is not a JSON pointer (it starts with /, e.g. /messages/0/id)", p.AnswerID)
		}
	}
	hs["success"] = func(k string, v *yaml.Node) {
		var s string
		if !d.str(k, v, &s) {
			return
		}
		ptr, val, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(ptr, "/") {
			d.fail(k, v, "%q is not a rule of the form /pointer=value (e.g. /ok=true)", s)
			return
		}
		p.SuccessPointer, p.SuccessValue = ptr, val
	}
	hs["rate"] = func(k string, v *yaml.Node) {
		var s string
		if !d.str(k, v, &s) {
			return
		}
		r, ok := parseRate(s)
		if !ok {
			d.fail(k, v, "%q is not a rate (use N/s, N/m or N/h, e.g. 1/s)", s)
			return
		}
		p.Rate = r
	}
	hs["burst"] = func(k string, v *yaml.Node) { d.intIn(k, v, &p.Burst, 1, 10000) }
	return hs
}

// with adds a handler built by mk for each name.
func (hs handlers) with(names map[string]bool, mk func(string) func(string, *yaml.Node)) handlers {
	out := handlers{}
	for k, f := range hs {
		out[k] = f
	}
	for n := range names {
		out[n] = mk(n)
	}
	return out
}

// parseRate reads N/s, N/m or N/h as sends per second.
func parseRate(s string) (float64, bool) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || n > 1e6 {
		return 0, false
	}
	switch unit {
	case "s":
		return n, true
	case "m":
		return n / 60, true
	case "h":
		return n / 3600, true
	}
	return 0, false
}

// kindKeys lists the keys each kind takes beyond name, kind, timeout,
// lookup_settle, api_base, rate and burst.
var kindKeys = map[string][]string{
	"http":     {"url", "url_env", "signing_secret_env", "supports_idempotency_key", "lookup_url", "auth_env", "body", "fields", "answer_id", "success"},
	"sandbox":  {"url", "lookup_url", "supports_idempotency_key", "fail", "fail_first", "timeout_after_accept", "delay", "lookup"},
	"twilio":   {"account_sid", "auth_token_env", "from", "status_callback"},
	"whatsapp": {"phone_number_id", "token_env"},
	"telegram": {"token_env"},
	"slack":    {"token_env"},
	"smtp":     {"host", "port", "username_env", "password_env", "from", "tls", "lookup_url"},
}

// checkProviderKind refuses keys the kind does not take and requires the
// ones it needs.
func (d *decoder) checkProviderKind(path string, n *yaml.Node, p *Provider, set map[string]*yaml.Node) {
	own, ok := kindKeys[p.Kind]
	if !ok {
		return
	}
	common := map[string]bool{"name": true, "kind": true, "timeout": true, "lookup_settle": true, "api_base": true, "rate": true, "burst": true}
	for k, v := range set {
		if common[k] || containsStr(own, k) {
			continue
		}
		if containsStr([]string{"fail", "fail_first", "timeout_after_accept", "delay", "lookup"}, k) {
			continue // the sandbox's knobs are refused on other kinds by providers
		}
		d.fail(joinPath(path, k), v, "a %s provider does not take %s (it takes %s)", p.Kind, k, strings.Join(own, ", "))
	}
	need := func(key, why string) {
		if set[key] == nil {
			d.fail(joinPath(path, key), n, "missing; %s", why)
		}
	}
	if p.Rate > 0 && p.Burst == 0 {
		p.Burst = 1
	}
	switch p.Kind {
	case "http":
		if set["url"] == nil && set["url_env"] == nil {
			d.fail(joinPath(path, "url"), n, "missing; an http provider needs the URL replies are posted to (url, or url_env when it holds a token)")
		}
		if set["url"] != nil && set["url_env"] != nil {
			d.fail(joinPath(path, "url_env"), set["url_env"], "set url or url_env, not both")
		}
	case "twilio":
		need("account_sid", "a twilio provider needs the account SID (AC…)")
		need("auth_token_env", "a twilio provider needs the variable holding its auth token")
		need("from", "a twilio provider needs the number (or messaging service) it sends from")
	case "whatsapp":
		need("phone_number_id", "a whatsapp provider needs the phone number id it sends from")
		need("token_env", "a whatsapp provider needs the variable holding its access token")
	case "telegram":
		need("token_env", "a telegram provider needs the variable holding its bot token")
	case "slack":
		need("token_env", "a slack provider needs the variable holding its bot token (xoxb-…)")
	case "smtp":
		need("host", "an smtp provider needs the mail server's host name")
		need("from", "an smtp provider needs the From address")
		if p.From != "" {
			if _, err := mail.ParseAddress(p.From); err != nil {
				d.fail(joinPath(path, "from"), set["from"], "%q is not a mail address (e.g. \"Agency <hello@agency.example>\")", p.From)
			}
		}
		if p.TLS == "" {
			p.TLS = "starttls"
		}
		if p.Port == 0 {
			p.Port = map[string]int{"starttls": 587, "tls": 465, "none": 25}[p.TLS]
		}
		if (set["username_env"] == nil) != (set["password_env"] == nil) {
			d.fail(joinPath(path, "password_env"), n, "set username_env and password_env together")
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
