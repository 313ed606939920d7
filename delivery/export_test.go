package delivery

import "github.com/handoff/handoff/store"

// NewForTest is New with the job policy given directly.
func NewForTest(st *store.Store, maxAttempts int, newID func() string) *Outbox {
	return &Outbox{st: st, maxAttempts: maxAttempts, newID: newID}
}

// SettledAt is settledAt, for its table test.
var SettledAt = settledAt
