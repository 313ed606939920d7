package kinds

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// graphVersion is a Graph API version as its URLs name it (v21.0).
var graphVersion = regexp.MustCompile(`^v[0-9]{1,3}\.[0-9]{1,3}$`)

// MetaRate is the Send API's documented ceiling for text messages: 300
// calls per second per Facebook Page or Instagram professional account.
const MetaRate = 300

// Meta answers Messenger and Instagram conversations through the
// Messenger Platform's Send API (POST /{version}/me/messages with the page
// access token); their messages come in through the messenger and
// instagram presets. The recipient is the page- or Instagram-scoped id
// the message came from.
var Meta = Kind{
	Name: "meta",
	Keys: []Key{
		{Name: "token_env", Need: "a meta provider needs the variable holding its page access token"},
		{Name: "graph_version", Only: "the Graph API version of the Send API", Check: func(p *Provider) string {
			if !graphVersion.MatchString(p.GraphVersion) {
				return fmt.Sprintf("%q is not a Graph API version (e.g. v21.0)", p.GraphVersion)
			}
			return ""
		}},
		{Name: "human_agent", Only: "the page's Human Agent permission, for replies up to 7 days after the customer's message"},
	},
	Defaults: func(p *Provider, has func(string) bool) {
		if !has("rate") {
			p.Rate = MetaRate
			if !has("burst") {
				p.Burst = 1
			}
		}
	},
	Presets: []string{"messenger", "instagram"},
	// The standard messaging window: a RESPONSE within 24 hours of the
	// customer's last message; with the Human Agent permission a message
	// tagged HUMAN_AGENT up to 7 days after it (code 10/2018278 outside).
	Window: Window{Reply: 24 * time.Hour, Tagged: 7 * 24 * time.Hour},
	// message.text: "UTF-8, 2000 character limit".
	MaxText: 2000,
	Recipient: Recipient{
		Hint: "a page-scoped id (PSID or IGSID), e.g. 6543210987654321",
		Check: func(a string) string {
			if _, err := strconv.ParseUint(a, 10, 64); err != nil {
				return "the address is not a page-scoped id (digits only)"
			}
			return ""
		},
	},
	Row: Row{
		ResendSafe: "no (the Send API has no idempotency key)",
		Lookup:     "no",
		Receipts:   "no (delivery webhooks name no reference of ours)",
		Unknown:    "`needs_reconciliation` at once: a person checks the conversation",
	},
}
