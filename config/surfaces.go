package config

import (
	"regexp"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Approvals (yaml approvals) are the surfaces besides the dashboard where a
// person decides a draft: Slack, Telegram (this file) and email and ntfy
// (surfaces_mail.go). Every surface decides through review, as the
// dashboard does (package approvals).
type Approvals struct {
	// Sweep (yaml approvals.sweep) is how often the posted cards are
	// compared with their drafts, so that a card follows a decision made
	// elsewhere (the dashboard, another surface, a newer message); default
	// DefaultSweep, 1s to 1m.
	Sweep time.Duration
	// Reminders are remind_after and escalate_after (reminders.go).
	Reminders Reminders
	Slack     *SlackSurface    // nil: not configured
	Telegram  *TelegramSurface // nil: not configured
	Mail      MailSurfaces     // email and ntfy (surfaces_mail.go)
}

// DefaultSweep is approvals.sweep when the file sets none.
const DefaultSweep = 2 * time.Second

// Any reports whether any surface is configured.
func (a Approvals) Any() bool { return a.Slack != nil || a.Telegram != nil || a.Mail.Any() }

// SlackSurface is approvals.slack: a Slack app whose bot posts the cards
// and whose interactivity Request URL is POST /surfaces/slack.
type SlackSurface struct {
	BotTokenEnv      string // yaml bot_token_env (required): the bot's xoxb- token
	BotToken         string
	SigningSecretEnv string // yaml signing_secret_env (required): the app's signing secret
	SigningSecret    string
	// APIURL (yaml api_url) is Slack's Web API; default
	// https://slack.com/api (tests point it at a stand-in).
	APIURL string
	// Channels (yaml channels) is where each client's drafts are announced:
	// client id -> Slack channel id (C…, G…). A client not listed is not
	// announced on Slack.
	Channels map[string]string
	// Users (yaml users) maps Slack member ids (U…, W…) to handoff user
	// names; a member not listed is matched by the email of their Slack
	// profile (store.User.Email).
	Users map[string]string
	// EscalateTo (yaml escalate_to) is where each client's drafts are
	// escalated once they waited approvals.escalate_after: client id ->
	// Slack channel id.
	EscalateTo map[string]string
}

// TelegramSurface is approvals.telegram: a bot that posts the cards in an
// approvers' chat and whose webhook is POST /surfaces/telegram.
type TelegramSurface struct {
	BotTokenEnv      string // yaml bot_token_env (required)
	BotToken         string
	WebhookSecretEnv string // yaml webhook_secret_env (required): setWebhook's secret_token
	WebhookSecret    string
	APIURL           string            // yaml api_url; default https://api.telegram.org
	Chats            map[string]string // yaml chats: client id -> chat id (a number, or @channel)
	Users            map[string]string // yaml users (required: Telegram has no email): user id -> handoff user name
	EscalateTo       map[string]string // yaml escalate_to: client id -> the chat its drafts are escalated to
}

// Default API addresses of the surfaces.
const (
	DefaultSlackAPI    = "https://slack.com/api"
	DefaultTelegramAPI = "https://api.telegram.org"
)

var (
	slackChannelID        = regexp.MustCompile(`^[CGD][A-Z0-9]{2,20}$`)
	slackMemberID         = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)
	telegramChat          = regexp.MustCompile(`^(-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31})$`)
	telegramWebhookSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
)

func slackChannel(id string) string {
	if slackChannelID.MatchString(id) {
		return ""
	}
	return "is not a Slack channel id (C…, G… as in the channel's details, not its #name)"
}

func telegramChatID(id string) string {
	if telegramChat.MatchString(id) {
		return ""
	}
	return "is not a Telegram chat id (a number such as -1001234567890, or @channelname)"
}

// approvals decodes the approvals mapping; the clients its maps name are
// checked once the file is read.
func (d *decoder) approvals(path string, n *yaml.Node, c *Config) {
	a := &c.Approvals
	hs := handlers{
		"sweep": func(p string, v *yaml.Node) {
			if d.duration(p, v, &a.Sweep, false) && (a.Sweep < time.Second || a.Sweep > time.Minute) {
				d.fail(p, v, "%s is outside 1s to 1m; it is how often the posted cards are compared with their drafts", v.Value)
			}
		},
		"slack":    func(p string, v *yaml.Node) { a.Slack = d.slackSurface(p, v, c) },
		"telegram": func(p string, v *yaml.Node) { a.Telegram = d.telegramSurface(p, v, c) },
	}
	d.mailSurfaces(hs, &a.Mail, c)
	d.reminderKeys(hs, &a.Reminders)
	before := len(d.errs)
	// The thresholds and the escalation places are checked together, once
	// nothing under approvals failed: a place refused is one sentence, not
	// also "no place".
	if set, ok := d.mapping(path, n, hs); ok && len(d.errs) == before {
		d.checkReminders(path, n, set, a)
	}
}

// secretKey is the handler of a *_env key whose variable holds a secret.
func (d *decoder) secretKey(name, value *string) func(string, *yaml.Node) {
	return func(p string, v *yaml.Node) {
		if d.envName(p, v, name) {
			*value, _ = d.secretFromEnv(p, v, *name)
		}
	}
}

func (d *decoder) slackSurface(path string, n *yaml.Node, c *Config) *SlackSurface {
	s := &SlackSurface{APIURL: DefaultSlackAPI}
	set, ok := d.mapping(path, n, handlers{
		"bot_token_env":      d.secretKey(&s.BotTokenEnv, &s.BotToken),
		"signing_secret_env": d.secretKey(&s.SigningSecretEnv, &s.SigningSecret),
		"api_url":            func(p string, v *yaml.Node) { d.url(p, v, &s.APIURL) },
		"channels":           func(p string, v *yaml.Node) { s.Channels = d.clientMap(p, v, c, slackChannel) },
		"escalate_to":        func(p string, v *yaml.Node) { s.EscalateTo = d.clientMap(p, v, c, slackChannel) },
		"users": func(p string, v *yaml.Node) {
			s.Users = d.userMap(p, v, func(id string) string {
				if slackMemberID.MatchString(id) {
					return ""
				}
				return "is not a Slack member id (U… or W…, from the member's profile: Copy member ID)"
			})
		},
	})
	if !ok {
		return nil
	}
	for _, k := range []struct{ key, why string }{
		{"bot_token_env", "name the variable holding the bot's xoxb- token"},
		{"signing_secret_env", "name the variable holding the app's signing secret (Basic Information)"},
		{"channels", "map each client to the Slack channel its drafts are announced in"},
	} {
		if set[k.key] == nil {
			d.fail(joinPath(path, k.key), n, "missing; %s", k.why)
		}
	}
	return s
}

func (d *decoder) telegramSurface(path string, n *yaml.Node, c *Config) *TelegramSurface {
	t := &TelegramSurface{APIURL: DefaultTelegramAPI}
	set, ok := d.mapping(path, n, handlers{
		"bot_token_env": d.secretKey(&t.BotTokenEnv, &t.BotToken),
		"webhook_secret_env": func(p string, v *yaml.Node) {
			d.secretKey(&t.WebhookSecretEnv, &t.WebhookSecret)(p, v)
			if t.WebhookSecret != "" && !telegramWebhookSecret.MatchString(t.WebhookSecret) {
				d.fail(p, v, "%s must be 1 to 256 of A-Z, a-z, 0-9, _ and - (Telegram's secret_token)", envLabel(t.WebhookSecretEnv))
			}
		},
		"api_url":     func(p string, v *yaml.Node) { d.url(p, v, &t.APIURL) },
		"chats":       func(p string, v *yaml.Node) { t.Chats = d.clientMap(p, v, c, telegramChatID) },
		"escalate_to": func(p string, v *yaml.Node) { t.EscalateTo = d.clientMap(p, v, c, telegramChatID) },
		"users": func(p string, v *yaml.Node) {
			t.Users = d.userMap(p, v, func(id string) string {
				if n, err := strconv.ParseInt(id, 10, 64); err == nil && n > 0 {
					return ""
				}
				return "is not a Telegram user id (a positive number)"
			})
		},
	})
	if !ok {
		return nil
	}
	for _, k := range []struct{ key, why string }{
		{"bot_token_env", "name the variable holding the bot's token (from @BotFather)"},
		{"webhook_secret_env", "name the variable holding the secret_token given to setWebhook"},
		{"chats", "map each client to the chat its drafts are announced in"},
		{"users", "map each approver's Telegram user id to their handoff user name (Telegram shows no email)"},
	} {
		if set[k.key] == nil {
			d.fail(joinPath(path, k.key), n, "missing; %s", k.why)
		}
	}
	return t
}

// stringMap walks a mapping of scalar keys to scalar values.
func (d *decoder) stringMap(path string, n *yaml.Node, each func(p string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "must be a mapping, not %s", describe(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		p := joinPath(path, k.Value)
		switch {
		case k.Kind != yaml.ScalarNode:
			d.fail(path, k, "keys must be plain names, not %s (line %d)", describe(k), k.Line)
		case seen[k.Value]:
			d.fail(path, k, "key %q appears twice (line %d)", k.Value, k.Line)
		case v.Kind != yaml.ScalarNode || v.Value == "":
			d.fail(p, v, "must be a non-empty string, not %s", describe(v))
		default:
			seen[k.Value] = true
			each(p, k, v)
		}
	}
}

// clientMap decodes client id -> a surface's place (checked by bad, which
// says what is wrong with a value, "" when nothing is); the clients are
// checked against clients once the file is read.
func (d *decoder) clientMap(path string, n *yaml.Node, c *Config, bad func(string) string) map[string]string {
	out := map[string]string{}
	d.stringMap(path, n, func(p string, k, v *yaml.Node) {
		if why := bad(v.Value); why != "" {
			d.fail(p, v, "%q %s", v.Value, why)
			return
		}
		out[k.Value] = v.Value
		id := k.Value
		d.later(func() {
			if _, ok := c.Client(id); !ok {
				d.fail(p, k, "client %q is not defined (one of: %s)", id, clientIDList(c))
			}
		})
	})
	return out
}

// userMap decodes a surface's user id -> handoff user name (checked by bad).
// The names are not checked here: users live in the database, and a name
// that matches nobody is refused when that person acts.
func (d *decoder) userMap(path string, n *yaml.Node, bad func(string) string) map[string]string {
	out := map[string]string{}
	d.stringMap(path, n, func(p string, k, v *yaml.Node) {
		if why := bad(k.Value); why != "" {
			d.fail(p, k, "%q %s", k.Value, why)
			return
		}
		out[k.Value] = v.Value
	})
	return out
}

// clientIDList names the configured clients for an error.
func clientIDList(c *Config) string {
	var ids []string
	for _, cl := range c.ClientList() {
		ids = append(ids, cl.ID)
	}
	slices.Sort(ids)
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += id
	}
	return s
}

// SweepEvery is approvals.sweep, or DefaultSweep when unset.
func (a Approvals) SweepEvery() time.Duration {
	if a.Sweep == 0 {
		return DefaultSweep
	}
	return a.Sweep
}
