package kinds

import "fmt"

// Sandbox keeps what it is sent in the data folder and misbehaves on
// purpose when told to (its knobs are for tests and drills).
var Sandbox = Kind{
	Name: "sandbox",
	Keys: []Key{
		{Name: "url"}, {Name: "lookup_url"}, {Name: "supports_idempotency_key"},
		{Name: "fail", Only: drills}, {Name: "fail_first", Only: drills}, {Name: "timeout_after_accept", Only: drills},
		{Name: "delay", Only: drills}, {Name: "lookup", Only: drills},
	},
	Defaults: func(p *Provider, has func(string) bool) {
		if !has("lookup_settle") {
			p.LookupSettle = 0 // its lookup reads what its send wrote
		}
	},
	Warn: func(at string, p *Provider) []string {
		if p.URL != "" || p.LookupURL != "" {
			return []string{fmt.Sprintf("%s: url and lookup_url are ignored by kind sandbox", at)}
		}
		return nil
	},
	Recipient: Recipient{Default: "team"},
	Row: Row{
		ResendSafe: "with `supports_idempotency_key: true`",
		Lookup:     "yes (unless `lookup: false`)",
		Receipts:   "no",
		Unknown:    "resend with the key, or look it up; with neither, `needs_reconciliation`",
	},
}

const drills = "it is for tests and drills"
