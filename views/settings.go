package views

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
)

// secretState says whether a secret is configured, never what it is.
func secretState(secret string) string {
	if secret == "" {
		return "not set"
	}
	return "set (hidden)"
}

// dur prints a duration without trailing zero units: 10m, 4h, 1h30m.
func dur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func channelFacts(ch config.Channel) []Fact {
	sig := "none (unsigned)"
	var fs []Fact
	if s := ch.Signature; s != nil {
		sig = s.Scheme
		fs = append(fs, Fact{Label: "signature secret", Value: secretState(s.Secret)})
		if s.SecretEnv != "" {
			fs = append(fs, Fact{Label: "secret_env", Value: s.SecretEnv, Mono: true})
		}
		if s.Header != "" {
			fs = append(fs, Fact{Label: "header", Value: s.Header, Mono: true})
		}
		if s.Tolerance != 0 {
			fs = append(fs, Fact{Label: "tolerance", Value: dur(s.Tolerance)})
		}
	}
	return append([]Fact{
		{Label: "webhook", Value: "POST /hooks/" + ch.Name, Mono: true},
		{Label: "signature", Value: sig},
	}, append(fs,
		Fact{Label: "message_id", Value: strings.Join(ch.Fields.MessageID, ", "), Mono: true},
		Fact{Label: "conversation_id", Value: ch.Fields.ConversationID, Mono: true},
		Fact{Label: "contact", Value: ch.Fields.Contact, Mono: true},
		Fact{Label: "name", Value: ch.Fields.Name, Mono: true},
		Fact{Label: "text", Value: ch.Fields.Text, Mono: true},
		Fact{Label: "subject", Value: ch.Fields.Subject, Mono: true},
		Fact{Label: "provider", Value: ch.Provider},
		Fact{Label: "auto_approve", Value: yesNo(ch.AutoApprove)},
		Fact{Label: "max_body", Value: strconv.FormatInt(ch.MaxBody, 10) + " bytes"},
	)...)
}

func providerFacts(p config.Provider) []Fact {
	fs := []Fact{
		{Label: "kind", Value: p.Kind},
		{Label: "url", Value: p.URL, Mono: true},
		{Label: "lookup_url", Value: p.LookupURL, Mono: true},
		{Label: "supports_idempotency_key", Value: yesNo(p.SupportsIdempotencyKey)},
		{Label: "signing_secret_env", Value: p.SigningSecretEnv, Mono: true},
		{Label: "signing secret", Value: secretState(p.SigningSecret)},
		{Label: "timeout", Value: dur(p.Timeout)},
	}
	if p.Kind == "sandbox" {
		fs = append(fs,
			Fact{Label: "fail", Value: p.Fail},
			Fact{Label: "fail_first", Value: itoa(p.FailFirst)},
			Fact{Label: "timeout_after_accept", Value: yesNo(p.TimeoutAfterAccept)},
			Fact{Label: "lookup", Value: yesNo(!p.NoLookup)},
		)
	}
	// The kinds' own keys: only what is set, secrets by state, never value.
	for _, f := range []Fact{
		{Label: "api_base", Value: p.APIBase, Mono: true},
		{Label: "account_sid", Value: p.AccountSID, Mono: true},
		{Label: "from", Value: p.From},
		{Label: "phone_number_id", Value: p.PhoneNumberID, Mono: true},
		{Label: "graph_version", Value: p.GraphVersion, Mono: true},
		{Label: "host", Value: p.Host},
		{Label: "tls", Value: p.TLS},
		{Label: "auth_token_env", Value: p.AuthTokenEnv, Mono: true},
		{Label: "token_env", Value: p.TokenEnv, Mono: true},
		{Label: "url_env", Value: p.URLEnv, Mono: true},
		{Label: "auth_env", Value: p.AuthEnv, Mono: true},
		{Label: "username_env", Value: p.UsernameEnv, Mono: true},
		{Label: "password_env", Value: p.PasswordEnv, Mono: true},
	} {
		if f.Value != "" {
			fs = append(fs, f)
		}
	}
	if p.Rate > 0 {
		fs = append(fs, Fact{Label: "rate", Value: strconv.FormatFloat(p.Rate, 'g', 4, 64) + "/s, burst " + itoa(p.Burst)})
	}
	return fs
}

func drafterFacts(d config.Drafter) []Fact {
	fs := []Fact{
		{Label: "kind", Value: d.Kind},
		{Label: "prompt_version", Value: d.PromptVersion},
		{Label: "timeout", Value: dur(d.Timeout)},
	}
	if d.Kind == "openai" {
		fs = append(fs,
			Fact{Label: "base_url", Value: d.BaseURL, Mono: true},
			Fact{Label: "model", Value: d.Model},
			Fact{Label: "api_key_env", Value: d.APIKeyEnv, Mono: true},
			Fact{Label: "API key", Value: secretState(d.APIKey)},
		)
	}
	if d.Delay > 0 {
		fs = append(fs, Fact{Label: "delay", Value: dur(d.Delay)})
	}
	return fs
}

// ruleWhen writes a routing rule's conditions as they read in the file.
func ruleWhen(w config.When) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+": "+strconv.Quote(v))
		}
	}
	add("text_contains", w.TextContains)
	add("intent", w.Intent)
	add("channel", w.Channel)
	add("has", w.Has)
	return strings.Join(parts, ", ")
}

func operationFacts(c config.Config) []Fact {
	facts := []Fact{
		{Label: "retry.max_attempts", Value: itoa(c.Retry.MaxAttempts)},
		{Label: "retry.base_delay", Value: dur(c.Retry.BaseDelay)},
		{Label: "retry.max_delay", Value: dur(c.Retry.MaxDelay)},
		{Label: "stuck.received", Value: dur(c.Stuck.Received)},
		{Label: "stuck.matched", Value: dur(c.Stuck.Matched)},
		{Label: "stuck.owned", Value: dur(c.Stuck.Owned)},
		{Label: "backups.schedule", Value: c.Backups.Schedule, Mono: true},
		{Label: "backups.keep", Value: itoa(c.Backups.Keep)},
		{Label: "retention.events", Value: dur(c.Retention.Events)},
		{Label: "retention.keys", Value: dur(c.Retention.Keys)},
	}
	if t := c.Backups.Target; t != nil {
		endpoint := t.Endpoint
		if endpoint == "" {
			endpoint = "AWS S3"
		}
		facts = append(facts,
			Fact{Label: "backups.target", Value: t.URL(), Mono: true},
			Fact{Label: "backups.target_endpoint", Value: endpoint, Mono: true},
			Fact{Label: "backups.target_region", Value: t.Region, Mono: true},
			Fact{Label: "backups.target_keep", Value: itoa(t.Keep)},
			Fact{Label: "backups.target credentials", Value: t.AccessKeyEnv + " / " + t.SecretKeyEnv + " (values hidden)", Mono: true},
		)
	}
	return facts
}

// prefixes lists CIDR ranges, comma-separated; "none" for none.
func prefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none: the client address is the connection's"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ", ")
}

// proxyHeader is the header read from trusted proxies, or that none is.
func proxyHeader(c config.Config) string {
	if len(c.TrustedProxies) == 0 {
		return c.ProxyHeader + " (not read: no trusted proxies)"
	}
	return c.ProxyHeader
}
