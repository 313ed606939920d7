package kinds

import (
	"fmt"
	"net/mail"
)

// SMTP sends an email reply; mail comes in through a mail service's
// preset (sendgrid, mailgun, postmark), so it has none of its own.
var SMTP = Kind{
	Name: "smtp",
	Keys: []Key{
		{Name: "host", Need: "an smtp provider needs the mail server's host name"},
		{Name: "port"}, {Name: "username_env"}, {Name: "password_env"},
		{Name: "from", Need: "an smtp provider needs the From address", Check: func(p *Provider) string {
			if p.From == "" {
				return ""
			}
			if _, err := mail.ParseAddress(p.From); err != nil {
				return fmt.Sprintf("%q is not a mail address (e.g. \"Agency <hello@agency.example>\")", p.From)
			}
			return ""
		}},
		{Name: "tls"}, {Name: "lookup_url"},
	},
	Rules: func(p *Provider, has func(string) bool) []Problem {
		if has("username_env") != has("password_env") {
			return []Problem{{"password_env", "set username_env and password_env together"}}
		}
		return nil
	},
	Defaults: func(p *Provider, has func(string) bool) {
		if p.TLS == "" {
			p.TLS = "starttls"
		}
		if p.Port == 0 {
			p.Port = map[string]int{"starttls": 587, "tls": 465, "none": 25}[p.TLS]
		}
	},
	Recipient: Recipient{
		Hint: "an email address, e.g. approvers@example.com",
		Check: func(a string) string {
			if m, err := mail.ParseAddress(a); err != nil || m.Address != a {
				return "the address is not a bare email address"
			}
			return ""
		},
	},
	Row: Row{
		ResendSafe: "no (SMTP has no idempotency key)",
		Lookup:     "with `lookup_url`: a search by the `Message-ID` we derive from our reference (Mailpit's API shape)",
		Receipts:   "through the mail service's event webhook (Mailgun `message-id`), matched by `Message-ID`",
		Unknown:    "look it up by `Message-ID` (settle rule applies); without `lookup_url`, `needs_reconciliation`, which a receipt can settle",
	},
}
