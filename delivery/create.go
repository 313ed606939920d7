package delivery

import (
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// Reply is an approved reply to put in the outbox.
type Reply struct {
	Draft    store.Draft // the approved draft: the row's id, event and conversation
	To       string      // the contact of the draft's event
	Text     string      // the reply as approved (edited or not)
	Provider string      // the channel's provider
	By       string      // who approved it
	At       time.Time
	// JobID names the delivery job, minted by the caller outside tx; the job
	// gets maxAttempts attempts.
	JobID       string
	MaxAttempts int
	// Hold is the approval's undo window: the delivery job is due At+Hold,
	// and until then UndoTx can take the approval back. 0 sends at once.
	Hold time.Duration
	// Template, when set, is sent instead of Text (which says it in
	// words): the approved template a person chose (review.SendTemplateTx).
	Template *store.OutboxTemplate
}

// CreateTx creates the outbox row of an approved reply, pending, with its
// id "<conversation id>:<draft id>", and its delivery job, inside the
// caller's transaction (the approval's): the row and the decision commit
// together or not at all. A row that already exists is an error: only the
// approval creates it, once. With a Hold, the job is due at the end of the
// undo window, which the row records (UndoUntil).
func CreateTx(tx *store.Tx, r Reply) (store.Outbox, error) {
	d := r.Draft
	o := store.Outbox{
		V: 1, ID: store.OutboxID(d.ConversationID, d.ID), DraftID: d.ID, EventKey: d.EventKey, CorrelationID: d.CorrelationID,
		Channel: d.Channel, ConversationID: d.ConversationID, To: r.To, Text: r.Text,
		Provider: r.Provider, Status: store.OutboxPending, CreatedAt: r.At, UpdatedAt: r.At,
		ApprovedBy: r.By, Attempts: []store.OutboxAttempt{}, Template: r.Template,
	}
	runAt := r.At
	if r.Hold > 0 {
		o.UndoUntil = r.At.Add(r.Hold)
		runAt = o.UndoUntil
	}
	switch _, err := tx.Outbox(o.ID); {
	case err == nil:
		return store.Outbox{}, fmt.Errorf("outbox row %s exists without its approval", o.ID)
	case !errors.Is(err, store.ErrNotFound):
		return store.Outbox{}, err
	}
	if err := tx.PutOutbox(nil, &o); err != nil {
		return store.Outbox{}, err
	}
	if _, _, err := jobs.Enqueue(tx, DeliverArgs{OutboxID: o.ID}, jobs.Opts{ID: r.JobID, MaxAttempts: r.MaxAttempts, RunAt: runAt, CorrelationID: d.CorrelationID, Now: r.At}); err != nil {
		return store.Outbox{}, err
	}
	return o, nil
}
