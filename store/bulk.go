package store

import (
	"fmt"
	"time"
)

// BulkState is where a bulk replay is.
type BulkState string

// The states of a bulk replay.
const (
	BulkRunning   BulkState = "running"
	BulkDone      BulkState = "done"
	BulkCancelled BulkState = "cancelled"
)

// BulkFilter is the filter a bulk replay was asked with, as the API took it.
type BulkFilter struct {
	Kind      string `json:"kind,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Error     string `json:"error,omitempty"`
	OlderThan string `json:"older_than,omitempty"`
}

// BulkSkip is an item a bulk replay did not replay, and why in a sentence.
type BulkSkip struct {
	ID  string `json:"id"`
	Why string `json:"why"`
}

// BulkRun is the progress of one bulk replay (the bulk_replay job kind):
// the items chosen when it started, in order, and what became of each so
// far. An item is handled once it is in Replayed, Skipped or Failed, so a
// run that resumes after a restart starts at the first item not handled.
type BulkRun struct {
	V          int        `json:"v"`
	ID         string     `json:"id"`
	Filter     BulkFilter `json:"filter"`
	Total      int        `json:"total"`
	Items      []string   `json:"items"`
	Replayed   []string   `json:"replayed"`
	Skipped    []BulkSkip `json:"skipped"`
	Failed     []BulkSkip `json:"failed"`
	Cancelled  bool       `json:"cancelled"` // asked to stop; the job stops before its next item
	State      BulkState  `json:"state"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Handled is how many items the run has dealt with: the next item's index.
func (b *BulkRun) Handled() int { return len(b.Replayed) + len(b.Skipped) + len(b.Failed) }

// BulkRun reads the bulk replay id: ErrNotFound when there is none.
func (tx *Tx) BulkRun(id string) (BulkRun, error) {
	if tx.bucket(bucketBulk) == nil { // a read-only file from before schema 3
		return BulkRun{}, fmt.Errorf("bulk replay %s: %w", id, ErrNotFound)
	}
	b, err := bulkTable.get(tx, []byte(id))
	if err != nil {
		return b, fmt.Errorf("bulk replay %s: %w", id, err)
	}
	return b, nil
}

// PutBulkRun writes b over old, the run as read in this transaction; old
// nil inserts a new run.
func (tx *Tx) PutBulkRun(old, b *BulkRun) error {
	if b.V == 0 {
		b.V = 1
	}
	return bulkTable.put(tx, old, b)
}
