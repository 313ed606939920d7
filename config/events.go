package config

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/webhook"
)

// The outbound event types (package outbound): each is posted once per
// business key to every subscriber that takes it.
const (
	EventLeadStatusChanged = "lead.status_changed" // a lead moved: once per status of a cycle (and per return to it)
	EventDraftApproved     = "draft.approved"      // a draft approved into its reply: once per draft
	EventReplySent         = "reply.sent"          // a reply the provider accepted: once per outbox row
	EventReplyFailed       = "reply.failed"        // a reply that failed for good: once per outbox row
	EventDeadLetterAdded   = "dead_letter.added"   // an item joined the dead-letter list: once per item and return to it
)

// EventTypes lists the event types in the order the docs name them.
var EventTypes = []string{EventLeadStatusChanged, EventDraftApproved, EventReplySent, EventReplyFailed, EventDeadLetterAdded}

// Subscriber is one receiver of outbound events (yaml events[]): Standard
// Webhooks-signed JSON posted to URL, one outbox row per event.
type Subscriber struct {
	// Name (yaml name) names it in the rows' ids and provider,
	// "events:<name>"; default "default" when it is the only one. Renaming
	// it makes the events not yet sent go nowhere: keep it.
	Name string
	// Client (yaml client), when set, limits it to the events of that
	// client's channels; "" takes every client's, and the events of no
	// client (a dead letter of a job that has no lead).
	Client string
	URL    string
	// SecretEnv (yaml secret_env) names the variable that holds the
	// Standard Webhooks secret (whsec_…) the requests are signed with.
	SecretEnv, Secret string
	// Types (yaml types) are the event types it takes; empty: every type.
	Types []string
	// Timeout bounds one post (default 5s, at most 30s).
	Timeout time.Duration
}

// ProviderName is the name its events' outbox rows carry as their
// provider: "events:<name>".
func (s Subscriber) ProviderName() string { return "events:" + s.Name }

// Takes reports whether s takes events of type typ about client ("" for
// an event of no client).
func (s Subscriber) Takes(typ, client string) bool {
	if s.Client != "" && s.Client != client {
		return false
	}
	return len(s.Types) == 0 || slices.Contains(s.Types, typ)
}

const defaultEventTimeout = 5 * time.Second

// events decodes the events list: names unique, secrets from the
// environment, types known.
func (d *decoder) events(path string, n *yaml.Node, c *Config) {
	names := map[string]bool{}
	d.list(path, n, func(p string, item *yaml.Node) {
		s := Subscriber{Timeout: defaultEventTimeout}
		set, ok := d.mapping(p, item, handlers{
			"name": func(p string, v *yaml.Node) {
				if !d.str(p, v, &s.Name) {
					return
				}
				switch {
				case !validName(s.Name):
					d.fail(p, v, "%q is not a valid subscriber name (use 1 to 64 lowercase letters, digits and -)", s.Name)
					s.Name = ""
				case names[s.Name]:
					d.fail(p, v, "duplicate subscriber name %q", s.Name)
				}
				names[s.Name] = true
			},
			"client": func(p string, v *yaml.Node) { d.text(p, v, &s.Client) },
			"url":    func(p string, v *yaml.Node) { d.url(p, v, &s.URL) },
			"secret_env": func(p string, v *yaml.Node) {
				if !d.envName(p, v, &s.SecretEnv) {
					return
				}
				secret, ok := d.secretFromEnv(p, v, s.SecretEnv)
				if !ok {
					return
				}
				if err := webhook.ValidateSecret(secret); err != nil {
					d.fail(p, v, "the value of %s is not usable: %v", envLabel(s.SecretEnv), err)
					return
				}
				s.Secret = secret
			},
			"types": func(p string, v *yaml.Node) { s.Types = d.eventTypes(p, v) },
			"timeout": func(p string, v *yaml.Node) {
				if d.duration(p, v, &s.Timeout, false) && s.Timeout > 30*time.Second {
					d.fail(p, v, "%s is longer than 30s; a subscriber that slow holds an events worker for as long on every attempt", v.Value)
				}
			},
		})
		if !ok {
			return
		}
		for _, r := range [][2]string{{"url", "the address the signed JSON is posted to"}, {"secret_env", "the variable holding the whsec_ secret the requests are signed with"}} {
			if set[r[0]] == nil {
				d.fail(joinPath(p, r[0]), item, "missing; an events subscriber needs %s", r[1])
			}
		}
		i := len(c.Events)
		c.Events = append(c.Events, s)
		d.later(func() { d.checkSubscriber(p, set, item, c, i) })
	})
}

// eventTypes decodes a list of event types, each known and listed once.
func (d *decoder) eventTypes(path string, n *yaml.Node) []string {
	var out []string
	d.list(path, n, func(p string, v *yaml.Node) {
		var t string
		switch {
		case !d.str(p, v, &t):
		case !slices.Contains(EventTypes, t):
			d.fail(p, v, "%q is not an event type (the types are %s)", t, strings.Join(EventTypes, ", "))
		case slices.Contains(out, t):
			d.fail(p, v, "%q is listed twice", t)
		default:
			out = append(out, t)
		}
	})
	if len(out) == 0 && n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		d.fail(path, n, "is empty; list the event types to post, or leave types out for every type")
	}
	return out
}

// checkSubscriber checks, once the file is read, a subscriber's name
// (given when there are several) and client (defined).
func (d *decoder) checkSubscriber(p string, set map[string]*yaml.Node, item *yaml.Node, c *Config, i int) {
	s := &c.Events[i]
	if set["name"] == nil {
		if len(c.Events) > 1 {
			d.fail(joinPath(p, "name"), item, "missing; with several events subscribers each needs a name (it is part of its events' ids)")
			return
		}
		s.Name = "default"
	}
	if s.Client != "" {
		if _, ok := c.Client(s.Client); !ok {
			d.fail(joinPath(p, "client"), set["client"], "client %q is not defined under clients (the clients are %s)", s.Client, clientIDs(c))
		}
	}
}
