package views

import (
	"time"

	"github.com/handoff/handoff/store"
)

// Lockout is a name, an address or a (name, address) pair whose logins are
// refused or slowed now.
type Lockout struct {
	Name     string // empty for an address alone
	Addr     string // empty for a name's back-off
	Failures int
	Until    time.Time
}

// What says what is locked, for the panel.
func (k Lockout) What() string {
	switch {
	case k.Name != "" && k.Addr != "":
		return k.Name + " from " + k.Addr
	case k.Name != "":
		return k.Name + " (slowed from every address that failed for it)"
	}
	return "address " + k.Addr + " (every name)"
}

// scopeHelp says what a token of scope sc may do.
func scopeHelp(sc store.Scope) string {
	switch sc {
	case store.ScopeMetrics:
		return "GET /metrics only"
	case store.ScopeKeys:
		return "the idempotency-key API only"
	case store.ScopeRead:
		return "reads of the JSON API"
	case store.ScopeApprove:
		return "reads, and approve or reject drafts"
	case store.ScopeAdmin:
		return "everything, backups included"
	}
	return "unknown scope"
}
