package kinds

// Slack posts with chat.postMessage and a bot token; events come in
// through the slack preset.
var Slack = Kind{
	Name:      "slack",
	Keys:      []Key{{Name: "token_env", Need: "a slack provider needs the variable holding its bot token (xoxb-…)"}},
	Preset:    "slack",
	Recipient: Recipient{Hint: "a channel, e.g. #approvals or C0123456789"},
	Row: Row{
		ResendSafe: "no",
		Lookup:     "no",
		Receipts:   "no",
		Unknown:    "`needs_reconciliation`: a person checks the channel",
	},
}
