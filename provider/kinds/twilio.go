package kinds

import (
	"fmt"
	"strings"
)

// Twilio sends an SMS (or WhatsApp via Twilio) through the Messages
// resource; status callbacks come back through the twilio preset.
var Twilio = Kind{
	Name: "twilio",
	Keys: []Key{
		{Name: "account_sid", Need: "a twilio provider needs the account SID (AC…)", Check: func(p *Provider) string {
			if !strings.HasPrefix(p.AccountSID, "AC") || len(p.AccountSID) != 34 {
				return fmt.Sprintf("%q is not a Twilio account SID (AC followed by 32 hex digits)", p.AccountSID)
			}
			return ""
		}},
		{Name: "auth_token_env", Need: "a twilio provider needs the variable holding its auth token"},
		{Name: "from", Need: "a twilio provider needs the number (or messaging service) it sends from"},
		{Name: "status_callback"},
	},
	Preset: "twilio",
	// The Messages resource takes a Body of up to 1,600 characters
	// (error 21617 beyond it).
	MaxText:   1600,
	Recipient: phone,
	Row: Row{
		ResendSafe: "no (Twilio keeps no idempotency key for messages)",
		Lookup:     "no (Twilio cannot find a message by our reference)",
		Receipts:   "yes, status callbacks; with `status_callback` the callback URL carries our reference (`?ref=<outbox id>`)",
		Unknown:    "`needs_reconciliation` at once; the status callback then settles it without a person",
	},
}

var phone = Recipient{Hint: "a phone number, e.g. +15550001234"}
