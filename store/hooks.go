package store

import (
	"sync/atomic"
	"time"
)

// LeadHook is told of a move of a lead inside the move's transaction, with
// the lead as moved and the move's time: what it writes commits with the
// move or not at all. The lead's moves (leads/moves.go) call Tx.LeadMoved;
// the store knows no hook's purpose (crm's enqueues the CRM write, so leads
// never imports crm).
type LeadHook func(tx *Tx, h Handoff, now time.Time) error

// hooks are a store's own: two stores in one process (tests, an app
// restarted in place) never call each other's.
type hooks struct {
	lead atomic.Pointer[LeadHook]
}

// HookLeadMoves makes fn the hook of every lead move in this store (nil:
// none); set it after Open, before the first move that needs it.
func (s *Store) HookLeadMoves(fn LeadHook) {
	if fn == nil {
		s.hooks.lead.Store(nil)
		return
	}
	s.hooks.lead.Store(&fn)
}

// LeadMoved runs the store's LeadHook, if any, for lead h just moved in tx.
func (tx *Tx) LeadMoved(h Handoff, now time.Time) error {
	if tx.hooks == nil {
		return nil
	}
	if fn := tx.hooks.lead.Load(); fn != nil {
		return (*fn)(tx, h, now)
	}
	return nil
}
