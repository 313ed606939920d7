package leads

import (
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// ErrInboundUnknown says when the customer last wrote cannot be told:
// the lead's latest message cannot be read. A reply window then counts as
// closed (review/window.go): a guess could only open it wider than the
// provider's, whose refusal would come after a person was told the reply
// goes out.
var ErrInboundUnknown = errors.New("the customer's latest message cannot be read")

// LastInboundTx is when the customer last wrote on lead h: the latest
// event's Wrote (the provider's time of the message where its preset reads
// one, else when handoff received it). A lead from before its latest event
// was kept (no LastEventKey) falls back to its latest "received" move,
// which is when a message started the cycle, no later than the latest
// one, so the window it gives closes no later than the real one. An event
// that cannot be read (or a lead with neither) is ErrInboundUnknown,
// wrapped with the event named.
func LastInboundTx(tx *store.Tx, h store.Handoff) (time.Time, error) {
	if h.LastEventKey != "" {
		ev, err := tx.EventByKey(h.LastEventKey)
		switch {
		case err == nil:
			return ev.Wrote(), nil
		case errors.Is(err, store.ErrNotFound) || tx.Skip(err):
			return time.Time{}, fmt.Errorf("%w (lead %s, message %s)", ErrInboundUnknown, h.Key, h.LastEventKey)
		default:
			return time.Time{}, fmt.Errorf("latest message %s of lead %s: %w", h.LastEventKey, h.Key, err)
		}
	}
	var at time.Time
	for _, t := range h.History {
		if t.Status == Received && t.At.After(at) {
			at = t.At
		}
	}
	if at.IsZero() {
		return time.Time{}, fmt.Errorf("%w (lead %s keeps no latest message)", ErrInboundUnknown, h.Key)
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
