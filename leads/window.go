package leads

import (
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// LastInboundTx is when the customer last wrote on lead h: the received
// time of its latest event. An event that cannot be read back (or a lead
// without one) falls back to the latest move in the lead's history, which
// is no later than it, so the window it gives closes no later than the
// real one.
func LastInboundTx(tx *store.Tx, h store.Handoff) (time.Time, error) {
	if h.LastEventKey != "" {
		ev, err := tx.EventByKey(h.LastEventKey)
		switch {
		case err == nil:
			return ev.ReceivedAt, nil
		case !errors.Is(err, store.ErrNotFound) && !tx.Skip(err):
			return time.Time{}, fmt.Errorf("latest message %s of lead %s: %w", h.LastEventKey, h.Key, err)
		}
	}
	var at time.Time
	for _, t := range h.History {
		if t.At.After(at) {
			at = t.At
		}
	}
	return at, nil
}

// LastInbound is LastInboundTx of the lead key in a read of its own.
func LastInbound(st *store.Store, key string) (time.Time, error) {
	var at time.Time
	err := st.View(func(tx *store.Tx) error {
		h, err := tx.Handoff(key)
		if err != nil {
			return err
		}
		at, err = LastInboundTx(tx, h)
		return err
	})
	return at, err
}
