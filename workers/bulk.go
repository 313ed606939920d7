package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// errUnmapped is the sentence an item's failure gets when it is none of the
// replay's own refusals: the one web gives every error nobody maps. Its
// cause is logged.
const errUnmapped = "something went wrong on our side; it has been logged"

// BulkReplayJob runs bulk replays. Each item goes through the single
// replay (delivery's Replay, under its safe-ones-only rule) and is then
// recorded in the run, so a run the runner hands back at shutdown resumes
// after a restart at the first item not recorded.
type BulkReplayJob struct {
	Store  *store.Store
	Outbox *delivery.Outbox
	Log    *slog.Logger // nil: slog.Default
	// Now stamps the replays: the HTTP side's clock, as a single replay's.
	Now func() time.Time
	// Wake tells the runner that a replay queued work; may be nil.
	Wake func()
	// Pause, when set (tests only), runs before item i of every run is
	// looked at, so a test can hold a run at a known point.
	Pause func(ctx context.Context, i int)
}

func (k *BulkReplayJob) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *BulkReplayJob) run(id string) (store.BulkRun, error) {
	var run store.BulkRun
	err := k.Store.View(func(tx *store.Tx) error {
		var err error
		run, err = tx.BulkRun(id)
		return err
	})
	return run, err
}

// Run works through the run's items from the first not yet handled. It
// stops between items when the run is cancelled (it ends cancelled) or the
// job's context ends (the runner hands the job back to resume later).
func (k *BulkReplayJob) Run(ctx context.Context, job store.Job) error {
	args, err := jobs.Decode[delivery.BulkReplayArgs](job)
	if err != nil {
		return err
	}
	for {
		run, err := k.run(args.RunID)
		if errors.Is(err, store.ErrNotFound) {
			return &jobs.Discard{Err: err}
		}
		if err != nil {
			return err
		}
		if run.State != store.BulkRunning {
			return nil
		}
		i := run.Handled()
		if i < len(run.Items) && !run.Cancelled {
			if k.Pause != nil {
				k.Pause(ctx, i)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			// A cancel may have come while paused.
			if run, err = k.run(args.RunID); err != nil {
				return err
			}
		}
		if run.Cancelled || i >= len(run.Items) {
			return k.finish(ctx, args.RunID)
		}
		if err := k.item(ctx, args, i, run.Items[i]); err != nil {
			return err
		}
	}
}

// outcome is what became of one item: replayed, or skipped or failed and why.
type outcome struct {
	replayed bool
	skipped  bool
	why      string
}

// item replays item i (id) if it is safe, and records that in the same
// transaction, so a run stopped at any moment resumes at the first item not
// recorded and never replays one twice. A refusal (unsafe, dismissed, gone)
// writes nothing of the replay and is recorded in a transaction of its own;
// an error returned is the store's, and the job tries again later.
func (k *BulkReplayJob) item(ctx context.Context, args delivery.BulkReplayArgs, i int, id string) error {
	r := store.Replay{By: args.By, At: k.now().UTC(), From: args.From}
	// The item under way finishes even when the job is stopped meanwhile.
	ctx = context.WithoutCancel(ctx)
	err := k.Store.Update(ctx, func(tx *store.Tx) error {
		run, err := tx.BulkRun(args.RunID)
		if err != nil || run.Handled() != i {
			return err // recorded already: nothing to do
		}
		if _, err := k.Outbox.ReplayTx(tx, id, r); err != nil {
			return err
		}
		return recordTx(tx, run, id, outcome{replayed: true})
	})
	var unsafe *delivery.UnsafeReplayError
	switch {
	case err == nil:
		if k.Wake != nil {
			k.Wake()
		}
		return nil
	case errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed):
		return err
	case errors.As(err, &unsafe):
		return k.record(ctx, args.RunID, i, id, outcome{skipped: true, why: unsafe.Why})
	}
	return k.record(ctx, args.RunID, i, id, outcome{why: k.sentence(args.RunID, id, err)})
}

// sentence words an item's failure as a single replay's answer would.
func (k *BulkReplayJob) sentence(runID, id string, err error) string {
	var (
		unsafe   *delivery.UnsafeReplayError
		state    *store.StateError
		notRegen *delivery.NotRegenerableError
	)
	switch {
	case errors.As(err, &unsafe):
		return unsafe.Error()
	case errors.As(err, &state):
		return state.Error()
	case errors.As(err, &notRegen):
		return notRegen.Error()
	case errors.Is(err, store.ErrNotFound):
		return fmt.Sprintf("there is no dead letter %q", id)
	}
	log := k.Log
	if log == nil {
		log = slog.Default()
	}
	log.Error("bulk replay: item failed", "run", runID, "item", id, slog.Any("err", err))
	return errUnmapped
}

// record writes the outcome of item i (id) into the run, unless the run
// is past it already.
func (k *BulkReplayJob) record(ctx context.Context, runID string, i int, id string, out outcome) error {
	return k.Store.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		run, err := tx.BulkRun(runID)
		if err != nil || run.Handled() != i {
			return err
		}
		return recordTx(tx, run, id, out)
	})
}

// recordTx appends the outcome for id to run, as read in tx.
func recordTx(tx *store.Tx, run store.BulkRun, id string, out outcome) error {
	old := run
	switch {
	case out.replayed:
		run.Replayed = append(slices.Clip(run.Replayed), id)
	case out.skipped:
		run.Skipped = append(slices.Clip(run.Skipped), store.BulkSkip{ID: id, Why: out.why})
	default:
		run.Failed = append(slices.Clip(run.Failed), store.BulkSkip{ID: id, Why: out.why})
	}
	return tx.PutBulkRun(&old, &run)
}

// finish ends the run: done when every item was handled, else cancelled.
func (k *BulkReplayJob) finish(ctx context.Context, runID string) error {
	at := k.now().UTC()
	return k.Store.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		run, err := tx.BulkRun(runID)
		if err != nil || run.State != store.BulkRunning {
			return err
		}
		old := run
		run.State, run.FinishedAt = store.BulkDone, &at
		if run.Handled() < len(run.Items) {
			run.State = store.BulkCancelled
		}
		return tx.PutBulkRun(&old, &run)
	})
}
