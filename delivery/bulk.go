package delivery

import (
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// KindBulkReplay replays the safe items of a dead-letter selection, one at
// a time, with its progress in the bulk bucket (store.BulkRun). The
// dead-letter list is delivery's, so are its job's args; the worker that
// runs them is workers.BulkReplayJob, each item through ReplayTx.
const KindBulkReplay = "bulk_replay"

// BulkReplayArgs run the bulk replay RunID, whose items and progress are
// its store.BulkRun, as By from From (who asked, and from where).
type BulkReplayArgs struct {
	RunID  string           `json:"-"`
	Filter store.BulkFilter `json:"filter"`
	By     string           `json:"by"`
	From   string           `json:"from"`
}

// Kind is the bulk replay job kind.
func (BulkReplayArgs) Kind() string { return KindBulkReplay }

// Key is the run's id.
func (a BulkReplayArgs) Key() string { return a.RunID }

// SetKey is how jobs.Decode gives the key back.
func (a *BulkReplayArgs) SetKey(k string) { a.RunID = k }

// StartBulkReplayTx stores run, as running, and enqueues the job that
// works through it for by from from (BulkReplayArgs, with the configured
// attempts, enqueued at now), inside the caller's transaction: a run that
// was answered for is a run that will happen, restarts included.
func (ob *Outbox) StartBulkReplayTx(tx *store.Tx, run *store.BulkRun, by, from string, now time.Time) error {
	run.State = store.BulkRunning
	if err := tx.PutBulkRun(nil, run); err != nil {
		return err
	}
	args := BulkReplayArgs{RunID: run.ID, Filter: run.Filter, By: by, From: from}
	_, _, err := jobs.Enqueue(tx, args, jobs.Opts{MaxAttempts: ob.maxAttempts, Now: now})
	return err
}

// CancelBulkReplay asks the run id to stop: the item under way finishes,
// the job stops before the next. A finished run is left as it is.
func CancelBulkReplay(tx *store.Tx, id string) (store.BulkRun, error) {
	run, err := tx.BulkRun(id)
	if err != nil || run.State != store.BulkRunning || run.Cancelled {
		return run, err
	}
	old := run
	run.Cancelled = true
	return run, tx.PutBulkRun(&old, &run)
}
