package delivery

import (
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// UndoError is an undo refused: the reply can no longer be taken back (or
// there is no approval to take back). Its sentence says why; web answers
// it with 409.
type UndoError struct {
	OutboxID string // "" when the refusal is about the draft, before any row
	Why      string
}

func (e *UndoError) Error() string { return e.Why }

// tooLate is the refusal of a row whose send may have begun.
func tooLate(id string) error {
	return &UndoError{OutboxID: id, Why: "the reply is already being sent; it can no longer be undone"}
}

// HeldTx reports whether outbox row o, as read in tx, is still held for
// its undo window as of now: pending, never attempted, its delivery job
// queued and never claimed, and now before the row's UndoUntil. It returns
// that job; anything else is an *UndoError saying why the reply can no
// longer be taken back. It writes nothing: UndoTx and the undo stack's
// read (review.UndoableTx) share it.
func HeldTx(tx *store.Tx, o store.Outbox, now time.Time) (store.Job, error) {
	switch {
	case o.Status == store.OutboxSent:
		return store.Job{}, &UndoError{OutboxID: o.ID, Why: "the reply was sent; it can no longer be undone"}
	case o.UndoUntil.IsZero():
		return store.Job{}, &UndoError{OutboxID: o.ID, Why: "the reply was approved to be sent at once (no undo window); it can no longer be undone"}
	case o.Status != store.OutboxPending || len(o.Attempts) > 0 || o.ExecutionID != "":
		return store.Job{}, tooLate(o.ID)
	case !now.Before(o.UndoUntil):
		return store.Job{}, &UndoError{OutboxID: o.ID, Why: "the undo window ended at " + o.UndoUntil.UTC().Format("15:04:05 UTC") + " and the reply is being sent; it can no longer be undone"}
	}
	j, err := tx.LiveJob(Kind, o.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Job{}, tooLate(o.ID) // its job is gone; the minutely resolve gives it a new one
	case err != nil:
		return store.Job{}, err
	case j.State != store.JobAvailable || j.Attempt > 0:
		return store.Job{}, tooLate(o.ID)
	}
	return j, nil
}

// UndoTx takes back the outbox row outboxID of an approval still inside its
// undo window, as of now, inside the caller's transaction (review.UndoTx,
// which puts the draft back in the same one): the row must be held
// (HeldTx). Then the row and its job are deleted, so nothing of the reply
// remains to send, and the deleted row is returned. Anything else is an
// *UndoError.
//
// The check and the deletes are one write transaction, and the runner's
// claim of the job is another: whichever commits first wins. A job claimed
// first is running, so the undo is refused and the reply goes out once; an
// undo first leaves no job to claim, so nothing is sent.
func UndoTx(tx *store.Tx, outboxID string, now time.Time) (store.Outbox, error) {
	o, err := tx.Outbox(outboxID)
	if err != nil {
		return store.Outbox{}, fmt.Errorf("outbox row %s: %w", outboxID, err)
	}
	j, err := HeldTx(tx, o, now)
	if err != nil {
		return store.Outbox{}, err
	}
	if err := tx.DeleteJob(&j); err != nil {
		return store.Outbox{}, err
	}
	if err := tx.DeleteOutbox(&o); err != nil {
		return store.Outbox{}, err
	}
	return o, nil
}
