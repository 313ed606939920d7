package views

import (
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
	return []Fact{
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
}
