package config

import (
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/hook"
)

// MailSurfaces are the approval surfaces of mail and push: email and ntfy
// (approvals.email, approvals.ntfy).
type MailSurfaces struct {
	Email *EmailSurface // nil: not configured
	Ntfy  *NtfySurface  // nil: not configured
}

// Any reports whether a mail or push surface is configured.
func (m MailSurfaces) Any() bool { return m.Email != nil || m.Ntfy != nil }

// EmailSurface is approvals.email: a draft is decided by a reply to its
// reply address, approvals+<draft id>.<MAC>@Domain (its MAC keyed by the
// app's secret key, auth.secret_key_env), which the digests carry and, for
// the clients in To, a mail of its own. The inbound provider (Postmark,
// Mailgun or SendGrid Inbound Parse) posts each reply to POST
// /surfaces/email.
type EmailSurface struct {
	// Domain (yaml domain, required) is the domain of the reply addresses:
	// one whose mail the inbound provider receives.
	Domain string
	// Local (yaml local) is the reply addresses' local part before "+";
	// default "approvals".
	Local string
	// Inbound (yaml inbound, required) is the provider that posts the
	// replies: postmark, mailgun or sendgrid (the hook presets' shapes).
	Inbound string
	// SecretEnv (yaml secret_env, required) names the variable with the
	// inbound provider's credentials: "user:password" of the basic auth in
	// the inbound URL (postmark, sendgrid), or Mailgun's webhook signing key.
	SecretEnv string
	Secret    string
	// Provider (yaml provider) is an smtp provider (under providers) that
	// sends the per-draft mails and the answers to refused replies; unset:
	// no per-draft mail, refusals only audited.
	Provider string
	// To (yaml to) mails each waiting draft of a client to that client's
	// address (client id -> address), from Provider.
	To map[string]string
	// EscalateTo (yaml escalate_to) mails each client's drafts that waited
	// approvals.escalate_after to a second address (client id -> address),
	// from Provider; a reply to it decides as a reply to any card does.
	EscalateTo map[string]string
}

// DefaultEmailLocal is approvals.email.local when unset.
const DefaultEmailLocal = "approvals"

// EmailInbounds are the presets approvals.email.inbound may name.
var EmailInbounds = []string{"postmark", "mailgun", "sendgrid"}

// NtfySurface is approvals.ntfy: each waiting draft is pushed to the ntfy
// topic of each person allowed on its client, with Approve and Reject
// buttons that POST a one-time token to /surfaces/ntfy/{token}.
type NtfySurface struct {
	// URL (yaml url) is the ntfy server; default DefaultNtfyURL.
	URL string
	// TokenEnv (yaml token_env) names the variable with an access token
	// (tk_…) for a server that requires one; unset: none sent.
	TokenEnv string
	Token    string
	// Topics (yaml topics, required) maps handoff user names to the topic
	// each one subscribes to: a push is a person's own (its buttons decide
	// as them), so pick topics no one guesses.
	Topics map[string]string
	// TokenTTL (yaml token_ttl) is how long a push's buttons work; default
	// DefaultNtfyTokenTTL, 1m to 24h.
	TokenTTL time.Duration
	// EscalateTo (yaml escalate_to) is the topic each client's drafts are
	// pushed to once they waited approvals.escalate_after (client id ->
	// topic). A topic is no person's, so its pushes open the draft in the
	// dashboard and carry no buttons that decide.
	EscalateTo map[string]string
}

// Defaults of approvals.ntfy.
const (
	DefaultNtfyURL      = "https://ntfy.sh"
	DefaultNtfyTokenTTL = 30 * time.Minute
)

var (
	mailDomain = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
	mailLocal  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,19}$`)
	ntfyTopic  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// mailSurfaces adds the keys of the mail and push surfaces to the handlers
// hs of the approvals mapping, decoding into m.
func (d *decoder) mailSurfaces(hs handlers, m *MailSurfaces, c *Config) {
	hs["email"] = func(p string, v *yaml.Node) { m.Email = d.emailSurface(p, v, c) }
	hs["ntfy"] = func(p string, v *yaml.Node) { m.Ntfy = d.ntfySurface(p, v, c) }
}

func (d *decoder) emailSurface(path string, n *yaml.Node, c *Config) *EmailSurface {
	e := &EmailSurface{Local: DefaultEmailLocal}
	set, ok := d.mapping(path, n, handlers{
		"domain": func(p string, v *yaml.Node) {
			if d.str(p, v, &e.Domain) && !mailDomain.MatchString(e.Domain) {
				d.fail(p, v, "%q is not a lowercase mail domain such as reply.example.com", e.Domain)
			}
		},
		"local": func(p string, v *yaml.Node) {
			if d.str(p, v, &e.Local) && !mailLocal.MatchString(e.Local) {
				d.fail(p, v, "%q is not a local part of 1 to 20 lowercase letters, digits, '.', '_' and '-'", e.Local)
			}
		},
		"inbound": func(p string, v *yaml.Node) {
			d.oneOf(p, v, &e.Inbound, "an inbound email provider", EmailInbounds...)
		},
		"secret_env":  d.secretKey(&e.SecretEnv, &e.Secret),
		"provider":    func(p string, v *yaml.Node) { d.text(p, v, &e.Provider) },
		"to":          func(p string, v *yaml.Node) { e.To = d.clientMap(p, v, c, mailAddress) },
		"escalate_to": func(p string, v *yaml.Node) { e.EscalateTo = d.clientMap(p, v, c, mailAddress) },
	})
	if !ok {
		return nil
	}
	for _, k := range []struct{ key, why string }{
		{"domain", "name the domain whose mail the inbound provider receives (the reply addresses' domain)"},
		{"inbound", "name the provider that posts the replies: postmark, mailgun or sendgrid"},
		{"secret_env", "name the variable holding the inbound provider's credentials (user:password, or Mailgun's signing key)"},
	} {
		if set[k.key] == nil {
			d.fail(joinPath(path, k.key), n, "missing; %s", k.why)
		}
	}
	if e.Inbound != "" && e.Inbound != "mailgun" && e.Secret != "" && !strings.Contains(e.Secret, ":") {
		d.fail(joinPath(path, "secret_env"), set["secret_env"], "%s must be user:password, the basic auth of the %s inbound URL", envLabel(e.SecretEnv), e.Inbound)
	}
	if set["to"] != nil && set["provider"] == nil {
		d.fail(joinPath(path, "provider"), n, "missing; approvals.email.to mails each draft, so name the smtp provider that sends them")
	} else if set["escalate_to"] != nil && set["provider"] == nil {
		d.fail(joinPath(path, "provider"), n, "missing; approvals.email.escalate_to mails the drafts escalated, so name the smtp provider that sends them")
	}
	if e.Provider != "" {
		p, pn := joinPath(path, "provider"), set["provider"]
		d.later(func() {
			for _, pr := range c.Providers {
				if pr.Name == e.Provider {
					if pr.Kind != "smtp" {
						d.fail(p, pn, "provider %q is of kind %s; the approval mails need an smtp provider", e.Provider, pr.Kind)
					}
					return
				}
			}
			d.fail(p, pn, "provider %q is not defined under providers", e.Provider)
		})
	}
	return e
}

// EmailScheme is the signature scheme of the email surface's inbound
// provider (its hook preset's).
func (e *EmailSurface) EmailScheme() string {
	if p, ok := hook.LookupPreset(e.Inbound); ok {
		return p.Scheme
	}
	return ""
}

func (d *decoder) ntfySurface(path string, n *yaml.Node, c *Config) *NtfySurface {
	s := &NtfySurface{URL: DefaultNtfyURL, TokenTTL: DefaultNtfyTokenTTL}
	set, ok := d.mapping(path, n, handlers{
		"url":       func(p string, v *yaml.Node) { d.url(p, v, &s.URL) },
		"token_env": d.secretKey(&s.TokenEnv, &s.Token),
		"token_ttl": func(p string, v *yaml.Node) {
			if d.duration(p, v, &s.TokenTTL, false) && (s.TokenTTL < time.Minute || s.TokenTTL > 24*time.Hour) {
				d.fail(p, v, "%s is outside 1m to 24h; it is how long a push's buttons work", v.Value)
			}
		},
		"escalate_to": func(p string, v *yaml.Node) {
			s.EscalateTo = d.clientMap(p, v, c, func(topic string) string {
				if ntfyTopic.MatchString(topic) {
					return ""
				}
				return "is not an ntfy topic (1 to 64 of A-Z, a-z, 0-9, _ and -)"
			})
		},
		"topics": func(p string, v *yaml.Node) {
			s.Topics = map[string]string{}
			seen := map[string]string{}
			d.stringMap(p, v, func(p string, k, v *yaml.Node) {
				switch {
				case !ntfyTopic.MatchString(v.Value):
					d.fail(p, v, "is not an ntfy topic (1 to 64 of A-Z, a-z, 0-9, _ and -)")
				case seen[v.Value] != "":
					d.fail(p, v, "is the topic of %s too; each person needs a topic of their own", seen[v.Value])
				default:
					seen[v.Value] = k.Value
					s.Topics[k.Value] = v.Value
				}
			})
		},
	})
	if !ok {
		return nil
	}
	if set["topics"] == nil {
		d.fail(joinPath(path, "topics"), n, "missing; map each approver's handoff user name to the ntfy topic they subscribe to")
	}
	return s
}
