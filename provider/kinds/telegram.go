package kinds

import (
	"strconv"
	"strings"
)

// Telegram sends through the Bot API (the token sits in the URL path);
// updates come in through the telegram preset.
var Telegram = Kind{
	Name:   "telegram",
	Keys:   []Key{{Name: "token_env", Need: "a telegram provider needs the variable holding its bot token"}},
	Preset: "telegram",
	// sendMessage's text is 1–4096 characters after entities parsing.
	MaxText: 4096,
	Recipient: Recipient{
		Hint: "a chat id, e.g. -1001234567890 or @approvals",
		Check: func(a string) string {
			if why := NoSpaces(a); why != "" {
				return why
			}
			if _, err := strconv.ParseInt(a, 10, 64); err != nil && (!strings.HasPrefix(a, "@") || len(a) < 2) {
				return "the address is neither a numeric chat id nor an @channel"
			}
			return ""
		},
	},
	Row: Row{
		ResendSafe: "no",
		Lookup:     "no",
		Receipts:   "no (bots get no delivery reports)",
		Unknown:    "`needs_reconciliation`: a person checks the chat",
	},
}

// NoSpaces is the check of an address no kind lets hold spaces or line
// breaks.
func NoSpaces(a string) string {
	if strings.ContainsAny(a, "\r\n\t ") {
		return "the address has spaces or line breaks"
	}
	return ""
}
