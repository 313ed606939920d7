package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// Every lead can end: besides approving the turn's draft, a person can
// write the reply themselves, have it drafted again (with an instruction),
// or close the lead without a reply. Each is one transaction on the lead's
// open turn (leads/turns.go), named by any event of the lead.

// leadTx reads the event eventKey and its lead.
func leadTx(tx *store.Tx, eventKey string) (store.Event, store.Handoff, error) {
	ev, err := tx.EventByKey(eventKey)
	if err != nil {
		return store.Event{}, store.Handoff{}, err
	}
	h, err := tx.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
	if err != nil {
		return store.Event{}, store.Handoff{}, fmt.Errorf("lead of %s: %w", eventKey, err)
	}
	return ev, h, nil
}

// openTurn is the event key that drafts h's open turn, or a refusal that
// says why there is none.
func openTurn(h store.Handoff) (string, error) {
	switch {
	case h.Status == leads.Closed:
		return "", &store.StateError{What: "lead " + h.Key, State: "closed", Want: "open; a new message from the customer reopens it"}
	case h.TurnDraft != "":
		return h.TurnDraft, nil
	case h.Turn == 0 && leads.Open(h.Status) && h.LastEventKey != "":
		return h.LastEventKey, nil // a lead from before turns were kept
	default:
		return "", &store.StateError{What: "lead " + h.Key, State: "answered (the reply to its latest message was approved)", Want: "waiting for a reply"}
	}
}

// nextVersion is the version a new draft of the event gets: one more than
// its current draft's, 1 when it has none.
func nextVersion(tx *store.Tx, key string) (cur *store.Draft, n int, err error) {
	switch d, err := tx.DraftByEvent(key); {
	case err == nil:
		if d.Status == store.DraftApproved {
			return nil, 0, &store.ConflictError{Draft: d}
		}
		return &d, max(d.Version, 1) + 1, nil
	case errors.Is(err, store.ErrNotFound):
		return nil, 1, nil
	default:
		return nil, 0, err
	}
}

// WriteTx stores text as a person's own draft for the open turn of the
// lead of eventKey, a new version of the turn's draft that answers every
// message of the turn, and approves it in the same transaction through the
// same outbox (ApproveTx, with delivery job jobID): one reply, whatever the
// drafter did before. A waiting draft of the turn is replaced; a draft job
// still writing one finds this version stored and stops.
func (r *Review) WriteTx(tx *store.Tx, eventKey, text string, dec store.Decision, jobID string) (Approved, error) {
	_, h, err := leadTx(tx, eventKey)
	if err != nil {
		return Approved{}, err
	}
	key, err := openTurn(h)
	if err != nil {
		return Approved{}, err
	}
	_, n, err := nextVersion(tx, key)
	if err != nil {
		return Approved{}, err
	}
	d, _, err := SaveTx(tx, store.Draft{
		EventKey: key, Text: text, Drafter: "person", Author: dec.By, PromptVersion: "person",
		CreatedAt: dec.At, Answers: slices.Clone(h.TurnEvents),
	}, n, r.ViaCRM)
	if err != nil {
		return Approved{}, err
	}
	dec.Text = text
	return r.ApproveTx(tx, d.ID, dec, jobID)
}

// Write is WriteTx in a transaction of its own, with a fresh job id.
func (r *Review) Write(ctx context.Context, eventKey, text string, dec store.Decision) (Approved, error) {
	var out Approved
	jobID := r.newID()
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = r.WriteTx(tx, eventKey, text, dec, jobID)
		return err
	})
	if err != nil {
		return Approved{}, fmt.Errorf("review: write the reply to %s: %w", eventKey, err)
	}
	return out, nil
}

// RedraftTx enqueues a draft job (DraftArgs) for a new version of the
// open turn's draft of the lead of eventKey (a draft job that ran out of
// attempts, or a draft a person wants written again), by dec.By at dec.At,
// with dec.Reason as the drafter's instruction and the configured
// attempts. Refused while a draft job of the turn is queued or running:
// that one's draft is coming.
func (r *Review) RedraftTx(tx *store.Tx, eventKey string, dec store.Decision) (store.Job, error) {
	_, h, err := leadTx(tx, eventKey)
	if err != nil {
		return store.Job{}, err
	}
	key, err := openTurn(h)
	if err != nil {
		return store.Job{}, err
	}
	switch live, err := tx.LiveJob(KindDraft, key); {
	case err == nil:
		return store.Job{}, &store.StateError{What: "the draft of lead " + h.Key, State: "already being written (job " + live.ID + ", " + string(live.State) + ")", Want: "written or failed to be drafted again"}
	case !errors.Is(err, store.ErrNotFound):
		return store.Job{}, err
	}
	_, n, err := nextVersion(tx, key)
	if err != nil {
		return store.Job{}, err
	}
	ev, err := tx.EventByKey(key)
	if err != nil {
		return store.Job{}, fmt.Errorf("event %s of lead %s: %w", key, h.Key, err)
	}
	args := DraftArgs{EventKey: key, RegenerateVersion: n, Instruction: dec.Reason}
	j, _, err := jobs.Enqueue(tx, args, jobs.Opts{MaxAttempts: r.maxAttempts, CorrelationID: ev.CorrelationID, Now: dec.At})
	if err != nil {
		return store.Job{}, err
	}
	detail := fmt.Sprintf("version %d of the draft of %s", n, key)
	if dec.Reason != "" {
		detail += "; instruction: " + dec.Reason
	}
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "draft again", Target: h.Key, Detail: detail}); err != nil {
		return store.Job{}, err
	}
	return j, nil
}

// Redraft is RedraftTx in a transaction of its own.
func (r *Review) Redraft(ctx context.Context, eventKey string, dec store.Decision) (store.Job, error) {
	var out store.Job
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = r.RedraftTx(tx, eventKey, dec)
		return err
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("review: draft %s again: %w", eventKey, err)
	}
	return out, nil
}

// Closed is the answer to Close.
type Closed struct {
	Lead   store.Handoff
	Closed bool // false: the lead was closed already; Lead.Closed says by whom
}

// CloseTx closes the lead of eventKey without a reply, for the reason in
// dec: its open turn ends, a waiting draft is rejected with that reason,
// and the lead is closed (no stuck alert watches it) until a new message
// reopens it at received. A draft job still under way finds the turn ended
// and writes nothing it could send. Closing it again answers the first
// closing; a lead whose reply was approved has nothing to close.
func CloseTx(tx *store.Tx, eventKey string, dec store.Decision) (Closed, error) {
	_, h, err := leadTx(tx, eventKey)
	if err != nil {
		return Closed{}, err
	}
	if h.Status == leads.Closed {
		return Closed{Lead: h}, nil
	}
	key, err := openTurn(h)
	if err != nil {
		return Closed{}, err
	}
	reason := strings.TrimSpace(dec.Reason)
	switch d, err := tx.DraftByEvent(key); {
	case err == nil && d.Status == store.DraftPending:
		old := d
		d.Status = store.DraftRejected
		d.Decision = &store.Decision{By: dec.By, At: dec.At, From: dec.From, Reason: "closed without a reply: " + reason, Outcome: store.OutcomeClosed}
		if err := tx.PutDraft(&old, &d); err != nil {
			return Closed{}, err
		}
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return Closed{}, err
	}
	h, err = leads.CloseTx(tx, h, store.Closure{By: dec.By, At: dec.At, Reason: reason})
	if err != nil {
		return Closed{}, err
	}
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "close lead", Target: h.Key, Detail: reason}); err != nil {
		return Closed{}, err
	}
	return Closed{Lead: h, Closed: true}, nil
}

// Close is CloseTx in a transaction of its own.
func (r *Review) Close(ctx context.Context, eventKey string, dec store.Decision) (Closed, error) {
	var out Closed
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = CloseTx(tx, eventKey, dec)
		return err
	})
	if err != nil {
		return Closed{}, fmt.Errorf("review: close the lead of %s: %w", eventKey, err)
	}
	return out, nil
}
