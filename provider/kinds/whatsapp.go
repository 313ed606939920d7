package kinds

import (
	"fmt"
	"strconv"
	"time"
)

// WhatsApp sends through the Cloud API; status webhooks come back through
// the whatsapp preset, each naming our reference.
var WhatsApp = Kind{
	Name: "whatsapp",
	Keys: []Key{
		{Name: "phone_number_id", Need: "a whatsapp provider needs the phone number id it sends from", Check: func(p *Provider) string {
			if _, err := strconv.ParseUint(p.PhoneNumberID, 10, 64); err != nil {
				return fmt.Sprintf("%q is not a WhatsApp phone number id (digits only; quote it in YAML)", p.PhoneNumberID)
			}
			return ""
		}},
		{Name: "token_env", Need: "a whatsapp provider needs the variable holding its access token"},
		{Name: "templates", Only: "the WhatsApp account's approved message templates"},
	},
	Preset: "whatsapp",
	// The Cloud API's text message body is at most 4,096 characters.
	MaxText:   4096,
	Recipient: phone,
	// A free-form message is delivered only within 24 hours of the
	// customer's last message (the customer service window; error 131047
	// after it); a template message may go at any time.
	Window: Window{Reply: 24 * time.Hour},
	Row: Row{
		ResendSafe: "no (the Cloud API has no idempotency key)",
		Lookup:     "no",
		Receipts:   "yes, status webhooks; each carries our reference in `biz_opaque_callback_data`",
		Unknown:    "`needs_reconciliation` at once; the status webhook then settles it without a person",
	},
}
