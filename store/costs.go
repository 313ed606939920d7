package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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

// draftsSince is where a walk of the drafts created at or after since
// starts: the first draft id of an event costLookback older than since.
func draftsSince(since time.Time) ([]byte, error) {
	from := since.Add(-costLookback)
	if from.Before(time.Unix(0, 0)) {
		from = time.Unix(0, 0)
	}
	var start ulid.ULID
	if err := start.SetTime(ulid.Timestamp(from)); err != nil {
		return nil, err
	}
	return []byte(DraftID(start.String())), nil
}

// DraftCosts returns the drafts created at or after since, oldest event
// first, reading at most limit drafts (the walk is bounded, so a large
// history never makes the overview slow; a budget reads Spend, which is
// not); more is true
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

// DraftCosts is Store.DraftCosts inside a transaction.
func (tx *Tx) DraftCosts(since time.Time, limit int) ([]DraftCost, bool, error) {
	seek, err := draftsSince(since)
	if err != nil {
		return nil, false, err
	}
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
			tx.skip(unreadableOf(draftsTable.name, k, err), nil) // the figures go on without it
			continue
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

// Spend is what a drafting budget reads of a day's drafts.
type Spend struct {
	Total   float64 // the drafts' cost
	Largest float64 // the costliest draft's: what the budget expects one more call to cost
	Drafts  int     // how many there are
}

// spendFields is the part of a draft record a budget reads: decoding
// three fields instead of the whole draft keeps a walk over a busy day's
// drafts cheap.
type spendFields struct {
	Channel   string    `json:"channel"`
	Cost      float64   `json:"cost"`
	CreatedAt time.Time `json:"created_at"`
}

// Spend sums the drafts of channels created at or after since, reading
// every one of them (DraftCosts stops at a bound; a budget must not). Like
// DraftCosts, a draft of an event more than a week older than since is not
// counted.
func (tx *Tx) Spend(since time.Time, channels []string) (Spend, error) {
	seek, err := draftsSince(since)
	if err != nil {
		return Spend{}, err
	}
	var sp Spend
	c := tx.bucket(bucketDrafts).Cursor()
	for k, v := c.Seek(seek); k != nil && bytes.HasPrefix(k, []byte("d")); k, v = c.Next() {
		var d spendFields
		if err := json.Unmarshal(v, &d); err != nil {
			// Its cost is unknown: the budget counts what it can read
			// (the store lists the draft as unreadable).
			tx.skip(unreadableOf(draftsTable.name, k, err), nil)
			continue
		}
		if d.CreatedAt.Before(since) || !slices.Contains(channels, d.Channel) {
			continue
		}
		sp.Total += d.Cost
		sp.Largest = max(sp.Largest, d.Cost)
		sp.Drafts++
	}
	return sp, nil
}

// BudgetHold is a drafting call in flight that a client's budget counts
// before its cost is stored: a draft job holds it from its budget check to
// the commit that stores the draft (ReleaseBudget in that transaction).
type BudgetHold struct {
	Client      string    `json:"client"`
	ExecutionID string    `json:"execution_id"`
	Reserve     float64   `json:"reserve"` // what the call is expected to cost
	Until       time.Time `json:"until"`   // the job's lease: a hold outlives neither its attempt nor its process
}

// budgetHoldKey is a hold's key in meta: one per client and execution.
func budgetHoldKey(client, execID string) []byte {
	return []byte("budget_hold:" + client + "\x00" + execID)
}

// BudgetHolds returns client's holds still in force at now.
func (tx *Tx) BudgetHolds(client string, now time.Time) ([]BudgetHold, error) {
	prefix := []byte("budget_hold:" + client + "\x00")
	var out []BudgetHold
	c := tx.bucket(bucketMeta).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var h BudgetHold
		if err := json.Unmarshal(v, &h); err != nil {
			return nil, fmt.Errorf("budget hold %q: %w", k, err)
		}
		if h.Until.After(now) {
			out = append(out, h)
		}
	}
	return out, nil
}

// HoldBudget writes h, and deletes client's holds that have expired by
// now (their attempt ended without releasing them: the process stopped).
func (tx *Tx) HoldBudget(h BudgetHold, now time.Time) error {
	prefix := []byte("budget_hold:" + h.Client + "\x00")
	meta := tx.bucket(bucketMeta)
	var expired [][]byte
	c := meta.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var old BudgetHold
		if err := json.Unmarshal(v, &old); err != nil || !old.Until.After(now) {
			expired = append(expired, bytes.Clone(k))
		}
	}
	for _, k := range expired {
		if err := meta.Delete(k); err != nil {
			return err
		}
	}
	return putJSON(meta, budgetHoldKey(h.Client, h.ExecutionID), h)
}

// ReleaseBudget deletes the hold of client and execution execID, if any.
func (tx *Tx) ReleaseBudget(client, execID string) error {
	return tx.bucket(bucketMeta).Delete(budgetHoldKey(client, execID))
}
