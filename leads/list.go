package leads

import (
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// Filter selects leads for List.
type Filter struct {
	Status store.HandoffStatus // empty: every status, in the order of Statuses
	// SinceBefore keeps only leads that entered their status before this time (stuck leads).
	SinceBefore time.Time
	Limit       int
	// Only, when set, keeps the leads of the channels it sees (a person
	// limited to clients); nil lists every channel's.
	Only *store.Visible
}

// List lists leads by status, longest in their status first, in one read
// transaction.
func List(st *store.Store, f Filter) ([]store.Handoff, error) {
	statuses := Statuses
	if f.Status != "" {
		statuses = []store.HandoffStatus{f.Status}
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	out := []store.Handoff{}
	err := st.View(func(tx *store.Tx) error {
		out = out[:0]
		for _, s := range statuses {
			err := tx.EachHandoff(s, f.SinceBefore, func(h store.Handoff) (bool, error) {
				if f.Only != nil && !f.Only.Key(h.Key) {
					return true, nil
				}
				out = append(out, h)
				return len(out) < f.Limit, nil
			})
			if err != nil || len(out) >= f.Limit {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("leads: list leads: %w", err)
	}
	return out, nil
}
