package leads

import (
	"slices"
	"time"

	"github.com/handoff/handoff/store"
)

// ReopenTx undoes the close of lead h (as read in tx, closed by CloseTx):
// the lead goes back to the status it was closed from, its stay's Since
// kept (so a stuck clock runs on, not afresh), and its open turn as the
// close found it (the Closure keeps it; a closure from before it was kept
// falls back to turn, the caller's reading of the turn). History says
// who undid it. Whether it may be undone is the caller's rule
// (review.UndoCloseTx).
func ReopenTx(tx *store.Tx, h store.Handoff, by string, now time.Time, turnDraft string, turnEvents []string) (store.Handoff, error) {
	old := h
	prev, since := Received, h.Since
	if n := len(h.History); n >= 2 && h.History[n-2].Cycle == h.Cycle {
		prev, since = h.History[n-2].Status, h.History[n-2].At
	}
	if c := h.Closed; c != nil && c.TurnDraft != "" {
		turnDraft, turnEvents = c.TurnDraft, c.TurnEvents
	}
	h.Status, h.Since, h.Closed = prev, since, nil
	if h.Turn > 0 {
		h.TurnDraft, h.TurnEvents = turnDraft, slices.Clone(turnEvents)
	}
	h.History = append(slices.Clip(h.History), store.Transition{Cycle: h.Cycle, Status: prev, At: now, EventKey: h.LastEventKey, Note: "close undone by " + by + "; the lead is open again"})
	if err := tx.PutHandoff(&old, &h); err != nil {
		return store.Handoff{}, err
	}
	// A reopen is a move like the others: the store's LeadHook hears it
	// (crm writes "open again" to the record, which said closed).
	if err := tx.LeadMoved(h, now); err != nil {
		return store.Handoff{}, err
	}
	return h, nil
}
