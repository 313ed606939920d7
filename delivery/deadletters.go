package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/handoff/handoff/store"
)

// Safety says whether resending the reply o is safe, why, in a sentence,
// and the side effects known to have happened.
func Safety(o store.Outbox) (safe bool, why string, effects []string) {
	effects = []string{"outbox row " + o.ID + " exists (" + string(o.Status) + ")"}
	unknown := 0
	for _, a := range o.Attempts {
		switch {
		case a.Outcome == "ambiguous":
			unknown++
		case a.Outcome == "not_found" || a.Action == "receipt" && a.Outcome == "failed":
			// The provider said it has no such message, once its answer
			// counted: what came before it did not arrive.
			unknown = 0
		}
	}
	switch {
	case o.Status == store.OutboxFailed && unknown == 0 && len(o.Attempts) > 0 && o.Attempts[len(o.Attempts)-1].Outcome == "not_sent":
		return true, "the provider could not be reached and not one byte of it left, so it was not delivered; a replay sends it again with the same key", effects
	case o.Status == store.OutboxFailed && unknown == 0:
		return true, "the provider refused it permanently, so it was not delivered; a replay sends it again with the same key", effects
	case o.Status == store.OutboxPending:
		return true, "it was never sent", effects
	case o.Status == store.OutboxSent:
		return false, "it was sent (provider id " + o.ProviderID + "); there is nothing to replay", append(effects, "delivered as "+o.ProviderID)
	}
	return false, fmt.Sprintf("the provider may already have this message (%d attempt(s) with an unknown outcome): check it first, then confirm the replay or reconcile", unknown), append(effects, "sent to the provider with an unknown outcome")
}

// judge fills in the safety of an item that holds a reply.
func judge(dl *store.DeadLetter) {
	if dl.Outbox != nil {
		dl.Safe, dl.Why, dl.Effects = Safety(*dl.Outbox)
	}
}

// DeadLetters lists the dead-letter list, oldest first, each reply judged.
func (ob *Outbox) DeadLetters(f store.DeadLetterFilter) ([]store.DeadLetter, error) {
	dls, err := ob.st.DeadLetters(f)
	for i := range dls {
		judge(&dls[i])
	}
	return dls, err
}

// DeadLetterPage reads one page of the list (store.DeadLetterPage), each reply judged.
func (ob *Outbox) DeadLetterPage(f store.DeadLetterFilter, after, before string, n int) (store.DeadLetterPage, error) {
	page, err := ob.st.DeadLetterPage(f, after, before, n)
	for i := range page.Items {
		judge(&page.Items[i])
	}
	return page, err
}

// DeadLetter returns one item by job id or outbox id, judged.
func (ob *Outbox) DeadLetter(id string) (store.DeadLetter, error) {
	var dl store.DeadLetter
	err := ob.st.View(func(tx *store.Tx) error {
		var err error
		dl, err = find(tx, id)
		return err
	})
	return dl, err
}

// find reads item id, judged: a reply is an item only while it failed, needs
// a person or is being sent.
func find(tx *store.Tx, id string) (store.DeadLetter, error) {
	dl, err := tx.DeadLetter(id)
	if err != nil {
		return store.DeadLetter{}, err
	}
	judge(&dl)
	if dl.Kind == store.DeadOutbox {
		switch dl.Outbox.Status {
		case store.OutboxFailed, store.OutboxNeedsReconciliation, store.OutboxEffectPending:
		default:
			return store.DeadLetter{}, &store.StateError{What: "outbox row " + id, State: dl.State, Want: "failed, needs_reconciliation or effect_pending to be replayed"}
		}
	}
	return dl, nil
}

// what names what a dead letter is, for a sentence.
func what(dl store.DeadLetter) string {
	if dl.Job != nil {
		return dl.Job.Kind + " job"
	}
	return "reply (outbox row)"
}

// Replay runs a dead letter again under the same business key, in one
// transaction: a discarded job becomes available again (attempts keep
// counting; it gets the configured attempts more); a failed or unresolved
// reply goes back to pending with a new delivery job, and a discarded
// delivery job is retired in its favour. An item whose side effect may have
// happened is refused (*store.UnsafeReplayError) unless confirmed; a
// regenerate of anything but a discarded draft job is a
// *store.NotRegenerableError, before either.
func (ob *Outbox) Replay(ctx context.Context, id string, r store.Replay) (store.DeadLetter, error) {
	var out store.DeadLetter
	err := ob.st.Update(ctx, func(tx *store.Tx) (err error) {
		out, err = ob.ReplayTx(tx, id, r)
		return err
	})
	if err != nil {
		return store.DeadLetter{}, fmt.Errorf("delivery: replay %s: %w", id, err)
	}
	return out, nil
}

// ReplayTx is Replay inside the caller's transaction, so that a caller can
// record what it replayed in the same commit (a bulk replay does). Every
// refusal is decided before anything is written. A rerun of the
// transaction mints a new id for the delivery job it enqueues: only the
// rolled-back run saw the first.
func (ob *Outbox) ReplayTx(tx *store.Tx, id string, r store.Replay) (store.DeadLetter, error) {
	dl, err := find(tx, id)
	if err != nil {
		return store.DeadLetter{}, err
	}
	// First: no state or confirmation makes this request one that can succeed.
	if r.Regenerate && (dl.Kind != store.DeadJob || dl.Job.Kind != store.KindDraft) {
		return store.DeadLetter{}, &store.NotRegenerableError{ID: id, What: what(dl)}
	}
	if r.Regenerate && ob.regenerate == nil {
		return store.DeadLetter{}, errors.New("delivery: a regenerate needs the draft's rule (Outbox.Regenerating)")
	}
	if dl.State == "dismissed" {
		return store.DeadLetter{}, &store.StateError{What: dl.Kind + " " + id, State: "dismissed", Want: "on the dead-letter list"}
	}
	if !dl.Safe && !r.Confirmed {
		return store.DeadLetter{}, &store.UnsafeReplayError{ID: id, Why: dl.Why}
	}
	jobID := ob.newID()
	switch {
	case dl.Kind == store.DeadJob && dl.Job.Kind == Kind && dl.Outbox != nil:
		if err := ob.requeue(tx, dl.Outbox, r, jobID); err != nil {
			return store.DeadLetter{}, err
		}
		if err := tx.RetireJob(dl.Job, r); err != nil {
			return store.DeadLetter{}, err
		}
	case dl.Kind == store.DeadJob:
		var payload func() (json.RawMessage, error)
		if r.Regenerate {
			j := *dl.Job
			payload = func() (json.RawMessage, error) { return ob.regenerate(tx, j) }
		}
		if err := tx.ReviveJob(dl.Job, r, ob.maxAttempts, payload); err != nil {
			return store.DeadLetter{}, err
		}
	default:
		if err := ob.requeue(tx, dl.Outbox, r, jobID); err != nil {
			return store.DeadLetter{}, err
		}
	}
	if err := tx.Audit(store.AuditEntry{At: r.At, Who: r.By, From: r.From, Action: "replay " + dl.Kind, Target: id, Detail: fmt.Sprintf("regenerate=%v confirmed=%v", r.Regenerate, r.Confirmed)}); err != nil {
		return store.DeadLetter{}, err
	}
	return dl, nil
}

// requeue sends a reply again with the same id and key, under job jobID.
func (ob *Outbox) requeue(tx *store.Tx, o *store.Outbox, r store.Replay, jobID string) error {
	old := *o
	switch old.Status {
	case store.OutboxFailed, store.OutboxNeedsReconciliation, store.OutboxEffectPending, store.OutboxPending:
		// pending: its delivery job died before sending; a new job sends it.
	default:
		return &store.StateError{What: "outbox row " + o.ID, State: string(old.Status), Want: "pending, failed, needs_reconciliation or effect_pending"}
	}
	// Back in the queue, it is back on the list if it fails again.
	o.Status, o.ExecutionID, o.Note, o.UpdatedAt, o.Dismissed = store.OutboxPending, "", "", r.At, nil
	o.Replays = append(slices.Clip(o.Replays), r)
	if _, err := ob.enqueue(tx, jobID, *o, r.At); err != nil {
		return err
	}
	return tx.PutOutbox(&old, o)
}

// Dismiss takes an item off the list with a reason: a discarded job
// becomes cancelled, a reply keeps its status and leaves the list. A reply
// being sent cannot be dismissed.
func (ob *Outbox) Dismiss(ctx context.Context, id string, d store.Dismissal) error {
	return ob.st.Update(ctx, func(tx *store.Tx) error {
		dl, err := find(tx, id)
		if err != nil {
			return err
		}
		if dl.Kind == store.DeadOutbox && dl.Outbox.Status == store.OutboxEffectPending {
			return &store.StateError{What: "outbox row " + id, State: string(store.OutboxEffectPending), Want: "failed or needs_reconciliation to be cancelled (it is being sent)"}
		}
		if dl.Kind == store.DeadJob {
			if err := tx.DismissJob(dl.Job, d); err != nil {
				return err
			}
		} else {
			o := dl.Outbox
			old := *o
			o.Dismissed, o.UpdatedAt = &d, d.At
			if err := tx.PutOutbox(&old, o); err != nil {
				return err
			}
		}
		return tx.Audit(store.AuditEntry{At: d.At, Who: d.By, From: d.From, Action: "cancel " + dl.Kind, Target: id, Detail: d.Reason})
	})
}
