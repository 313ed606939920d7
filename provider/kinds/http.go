package kinds

import "fmt"

// HTTP posts each reply to a URL of the operator's (the spec's outbound
// call), signed, with our reference as its idempotency key when the
// receiver honours one.
var HTTP = Kind{
	Name: "http",
	Keys: []Key{
		{Name: "url"}, {Name: "url_env"}, {Name: "signing_secret_env"}, {Name: "supports_idempotency_key"},
		{Name: "lookup_url"}, {Name: "auth_env"}, {Name: "body"}, {Name: "fields"}, {Name: "answer_id"}, {Name: "success"},
	},
	Rules: func(p *Provider, has func(string) bool) []Problem {
		switch {
		case !has("url") && !has("url_env"):
			return []Problem{{"url", "missing; an http provider needs the URL replies are posted to (url, or url_env when it holds a token)"}}
		case has("url") && has("url_env"):
			return []Problem{{"url_env", "set url or url_env, not both"}}
		}
		return nil
	},
	Warn: func(at string, p *Provider) []string {
		var ws []string
		if p.SigningSecretEnv == "" {
			ws = append(ws, fmt.Sprintf("provider %q has no signing_secret_env: its requests are not signed", p.Name))
		}
		if !p.SupportsIdempotencyKey && p.LookupURL == "" {
			ws = append(ws, fmt.Sprintf("provider %q has neither supports_idempotency_key nor lookup_url: every ambiguous send (timeout, 5xx) waits for a person to reconcile it", p.Name))
		}
		return ws
	},
	Recipient: Recipient{Optional: true},
	Row: Row{
		ResendSafe: "with `supports_idempotency_key: true` (our reference as `Idempotency-Key`)",
		Lookup:     "with `lookup_url`",
		Receipts:   "no",
		Unknown:    "resend with the key, or look it up; with neither, `needs_reconciliation`",
	},
}
