package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Client is one business whose channels this install serves: an agency
// runs one handoff for several, and a person may be limited to some.
type Client struct {
	ID   string // [a-z0-9-]+, unique: what channels[].client and a user's clients name
	Name string // shown on the dashboard; default the id
	// FactsFile (yaml facts_file) is read into Facts at load: the client's
	// hours, prices and policies, which seed its facts versions at start
	// (facts.Seed); its drafts are written from the newest version.
	FactsFile, Facts string
	// DailyBudget (yaml daily_budget) overrides drafter.daily_budget; 0: that one.
	DailyBudget float64
}

// DefaultClient is the one client of a file that lists none (and of the
// demo), so a single-business install never has to name one.
var DefaultClient = Client{ID: "default", Name: "Default"}

// ClientOf returns the id of the client channel belongs to: its
// channels[].client, or the only client when it names none (a config
// built in code). It is "" for a channel that is not configured.
func (c *Config) ClientOf(channel string) string {
	ch, ok := c.Channel(channel)
	if !ok {
		return ""
	}
	if ch.Client != "" {
		return ch.Client
	}
	return c.onlyClient().ID
}

// onlyClient is the client a channel without channels[].client belongs to.
func (c *Config) onlyClient() Client {
	if len(c.Clients) == 0 {
		return DefaultClient
	}
	return c.Clients[0]
}

// ClientList is every client, DefaultClient when the config lists none.
func (c *Config) ClientList() []Client {
	if len(c.Clients) == 0 {
		return []Client{DefaultClient}
	}
	return c.Clients
}

// Client finds a client by id.
func (c *Config) Client(id string) (Client, bool) {
	for _, cl := range c.ClientList() {
		if cl.ID == id {
			return cl, true
		}
	}
	return Client{}, false
}

// ClientChannels lists the names of the channels of the clients ids, in
// the file's order.
func (c *Config) ClientChannels(ids ...string) []string {
	var out []string
	for _, ch := range c.Channels {
		if slices.Contains(ids, c.ClientOf(ch.Name)) {
			out = append(out, ch.Name)
		}
	}
	return out
}

// CheckClients says, in a sentence, what is wrong with a list of client
// ids given for a person or a token: an empty list (every client) is fine.
func (c *Config) CheckClients(ids []string) error {
	for _, id := range ids {
		if _, ok := c.Client(id); !ok {
			return fmt.Errorf("client %q is not defined (the clients are %s)", id, clientIDs(c))
		}
	}
	return nil
}

// clients decodes the clients list.
func (d *decoder) clients(path string, n *yaml.Node, dst *[]Client, ids map[string]bool) {
	d.list(path, n, func(p string, item *yaml.Node) {
		var cl Client
		set, ok := d.mapping(p, item, handlers{
			"id": func(p string, v *yaml.Node) {
				if !d.str(p, v, &cl.ID) {
					return
				}
				switch {
				case !validName(cl.ID):
					d.fail(p, v, "%q is not a valid client id (use 1 to 64 lowercase letters, digits and -)", cl.ID)
				case ids[cl.ID]:
					d.fail(p, v, "duplicate client id %q", cl.ID)
				default:
					ids[cl.ID] = true
				}
			},
			"name":         func(p string, v *yaml.Node) { d.text(p, v, &cl.Name) },
			"facts_file":   func(p string, v *yaml.Node) { d.factsFile(p, v, &cl.FactsFile, &cl.Facts) },
			"daily_budget": func(p string, v *yaml.Node) { d.amount(p, v, &cl.DailyBudget) },
		})
		if !ok {
			return
		}
		if set["id"] == nil {
			d.fail(joinPath(p, "id"), item, "missing; every client needs an id ([a-z0-9-]+)")
			return
		}
		if cl.Name == "" {
			cl.Name = cl.ID
		}
		*dst = append(*dst, cl)
	})
}

// channelClients checks, once the whole file is read, that every channel
// names a listed client, and names one when there are several; with one
// client (or none listed) a channel without one belongs to it (ClientOf). nodes are
// the channels' items, in the order of c.Channels.
func (d *decoder) channelClients(c *Config, nodes []*yaml.Node) {
	d.later(func() {
		for i := range c.Channels {
			ch := &c.Channels[i]
			path, n := fmt.Sprintf("channels[%d].client", i), (*yaml.Node)(nil)
			if i < len(nodes) {
				n = nodes[i]
			}
			switch {
			case ch.Client == "" && len(c.Clients) > 1:
				d.fail(path, n, "missing; with several clients every channel must name the one it belongs to (one of %s)", clientIDs(c))
			case ch.Client == "":
				// The only client's (ClientOf), left unset so a file
				// without clients reads as it always did.
			default:
				if _, ok := c.Client(ch.Client); !ok {
					d.fail(path, n, "client %q is not defined under clients (the clients are %s)", ch.Client, clientIDs(c))
				}
			}
		}
	})
}

func clientIDs(c *Config) string {
	ids := make([]string, 0, len(c.ClientList()))
	for _, cl := range c.ClientList() {
		ids = append(ids, cl.ID)
	}
	return strings.Join(ids, ", ")
}
