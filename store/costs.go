package store

import (
	"bytes"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// DraftCost is what cost totals, budgets and prompt statistics read of a
// draft.
type DraftCost struct {
	ID            string
	Channel       string
	PromptVersion string
	PromptHash    string
	Drafter       string
	Cost          float64
	Currency      string
	CreatedAt     time.Time
	Status        DraftStatus
	Edited        bool
}

// costLookback is how much older than the window an event may be and its
// draft still be counted: draft ids sort by their event's time, and a
// draft written (or written again) later than its event is found by
// starting the walk this much earlier.
const costLookback = 7 * 24 * time.Hour

// DraftCosts returns the drafts created at or after since, oldest event
// first, reading at most limit drafts (the walk is bounded, so a large
// history never makes the overview or a budget check slow); more is true
// when the limit cut the walk short. A draft of an event more than a week
// older than since is not counted.
func (s *Store) DraftCosts(since time.Time, limit int) (out []DraftCost, more bool, err error) {
	err = s.view(func(tx *Tx) error {
		var err error
		out, more, err = tx.DraftCosts(since, limit)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: draft costs: %w", err)
	}
	return out, more, nil
}

// DraftCosts is Store.DraftCosts inside a transaction, so a budget check
// and the decision it leads to read the same state.
func (tx *Tx) DraftCosts(since time.Time, limit int) ([]DraftCost, bool, error) {
	from := since.Add(-costLookback)
	if from.Before(time.Unix(0, 0)) {
		from = time.Unix(0, 0)
	}
	var start ulid.ULID
	if err := start.SetTime(ulid.Timestamp(from)); err != nil {
		return nil, false, err
	}
	seek := []byte(DraftID(start.String()))
	c := tx.bucket(bucketDrafts).Cursor()
	var out []DraftCost
	read := 0
	for k, v := c.Seek(seek); k != nil && bytes.HasPrefix(k, []byte("d")); k, v = c.Next() {
		if read >= limit {
			return out, true, nil
		}
		read++
		var d Draft
		if err := decode(v, &d); err != nil {
			return nil, false, fmt.Errorf("draft %s: %w", k, err)
		}
		if d.CreatedAt.Before(since) {
			continue
		}
		dc := DraftCost{
			ID: d.ID, Channel: d.Channel, PromptVersion: d.PromptVersion, PromptHash: d.PromptHash,
			Drafter: d.Drafter, Cost: d.Cost, Currency: d.Currency, CreatedAt: d.CreatedAt, Status: d.Status,
		}
		if d.Decision != nil {
			dc.Edited = d.Decision.Edited
		}
		out = append(out, dc)
	}
	return out, false, nil
}
