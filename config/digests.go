package config

import (
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/handoff/handoff/provider/kinds"
)

// Digest tells approvers where they are that drafts are waiting: a list
// of the waiting drafts, with links that open each one, sent through a
// provider on a schedule and when the oldest has waited too long.
type Digest struct {
	Name string // [a-z0-9-]+, unique: names the digest's sends and its memory in the store
	// To names the provider that sends it (a defined provider or "sandbox").
	To string
	// Address is the recipient in the provider's terms: an email address
	// (smtp), a channel (slack), a chat id (telegram), a number (twilio,
	// whatsapp). Optional for http, whose url is the recipient (it goes
	// out as the body's "to"), and for the sandbox ("team").
	Address string
	// Client, when set, limits the digest to that client's channels'
	// drafts: a digest for a client's approvers shows nothing of another's.
	Client string
	// Owner, when set, limits it to the drafts routed to that owner.
	Owner string
	// Schedule (yaml schedule) is a standard 5-field cron expression or a
	// descriptor (@daily); empty: no scheduled digest.
	Schedule string
	// OldestAfter (yaml oldest_after) sends the digest when the oldest
	// waiting draft has waited longer than this, once per crossing; 0: never.
	OldestAfter time.Duration
}

// digests decodes the digests list. The cross-references (the provider,
// the client, base_url for the links) are checked once the file is read.
func (d *decoder) digests(path string, n *yaml.Node, c *Config, providers map[string]bool) {
	names := map[string]bool{}
	d.list(path, n, func(p string, item *yaml.Node) {
		dg := Digest{}
		set, ok := d.mapping(p, item, handlers{
			"name": func(p string, v *yaml.Node) {
				if !d.str(p, v, &dg.Name) {
					return
				}
				switch {
				case !validName(dg.Name):
					d.fail(p, v, "%q is not a valid digest name (use 1 to 64 lowercase letters, digits and -)", dg.Name)
				case names[dg.Name]:
					d.fail(p, v, "duplicate digest name %q", dg.Name)
				default:
					names[dg.Name] = true
				}
			},
			"to":      func(p string, v *yaml.Node) { d.text(p, v, &dg.To) },
			"address": func(p string, v *yaml.Node) { d.text(p, v, &dg.Address) },
			"client":  func(p string, v *yaml.Node) { d.text(p, v, &dg.Client) },
			"owner":   func(p string, v *yaml.Node) { d.text(p, v, &dg.Owner) },
			"schedule": func(p string, v *yaml.Node) {
				if d.text(p, v, &dg.Schedule) {
					if _, err := cron.ParseStandard(dg.Schedule); err != nil {
						d.fail(p, v, "%q is not a cron expression: %v", dg.Schedule, err)
					}
				}
			},
			"oldest_after": func(p string, v *yaml.Node) { d.duration(p, v, &dg.OldestAfter, false) },
		})
		if !ok {
			return
		}
		switch {
		case set["name"] == nil:
			d.fail(joinPath(p, "name"), item, "missing; every digest needs a name ([a-z0-9-]+)")
			return
		case set["to"] == nil:
			d.fail(joinPath(p, "to"), item, "missing; name the provider that sends the digest (one under providers, or sandbox)")
			return
		case set["schedule"] == nil && set["oldest_after"] == nil:
			d.fail(p, item, "has neither schedule nor oldest_after, so it would never be sent; set one or both (e.g. schedule: \"0 9 * * 1-5\", oldest_after: 30m)")
			return
		}
		i := len(c.Digests)
		c.Digests = append(c.Digests, dg)
		d.later(func() { d.checkDigest(p, item, set, c, &c.Digests[i], providers) })
	})
}

// checkDigest checks what a digest names against the whole file.
func (d *decoder) checkDigest(p string, item *yaml.Node, set map[string]*yaml.Node, c *Config, dg *Digest, providers map[string]bool) {
	if c.BaseURL == "" {
		d.fail(joinPath(p, "to"), set["to"], "base_url is not set, and a digest's links need the dashboard's public address (set base_url: https://handoff.example.com)")
	}
	if !providers[dg.To] {
		d.fail(joinPath(p, "to"), set["to"], "provider %q is not defined (define it under providers, or use sandbox)", dg.To)
		return
	}
	if dg.Client != "" {
		if _, ok := c.Client(dg.Client); !ok {
			d.fail(joinPath(p, "client"), set["client"], "client %q is not defined under clients", dg.Client)
		}
	}
	kind := sandboxProvider
	if pr, ok := c.Provider(dg.To); ok {
		kind = pr.Kind
	}
	at, node := joinPath(p, "address"), set["address"]
	if node == nil {
		node = item
	}
	k, _ := kinds.Lookup(kind)
	if dg.Address == "" {
		switch {
		case k.Recipient.Default != "":
			dg.Address = k.Recipient.Default
		case !k.Recipient.Optional:
			d.fail(at, node, "missing; a digest through %s provider %q needs the recipient (%s)", kind, dg.To, addressHint(k))
		}
		return
	}
	if why := checkAddress(k, dg.Address); why != "" {
		d.fail(at, node, "%s for %s provider %q (%s)", why, kind, dg.To, addressHint(k))
	}
}

// addressHint says what a recipient looks like to a provider kind.
func addressHint(k kinds.Kind) string {
	if k.Recipient.Hint != "" {
		return k.Recipient.Hint
	}
	return "the recipient as the provider names it"
}

// checkAddress says in a phrase what is wrong with a recipient, or "".
func checkAddress(k kinds.Kind, a string) string {
	if k.Recipient.Check != nil {
		return k.Recipient.Check(a)
	}
	return kinds.NoSpaces(a)
}
