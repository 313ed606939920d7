package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"
)

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
// every one of them: the one source of what a budget has spent (the
// overview's figures are kept per day, and hold no costliest draft). A
// draft of an event more than a week older than since is not counted.
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
