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
	if o.Kind == store.OutboxEvent && (o.Status == store.OutboxFailed || o.Status == store.OutboxNeedsReconciliation || o.Status == store.OutboxPending) {
		// The subscriber dedupes by webhook-id, which the row's id fixes
		// (one being sent right now is judged as any row: wait for it).
		return true, "an outbound event: a replay posts the same body under the same webhook-id, which the subscriber dedupes by", effects
	}
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
	return false, fmt.Sprintf("the provider may already have this message (%d %s with an unknown outcome): check it first, then confirm the replay or reconcile", unknown, attempts(unknown)), append(effects, "sent to the provider with an unknown outcome")
}

// A DeadKind is a job kind's rules on the dead-letter list, declared by
// the package that owns the kind: what a discarded job of it is about and
// whether replaying it is safe. Delivery's own kinds have theirs here; the
// kinds declared above delivery are handed in once (Judging); any other
// kind is replayed as it is (replayAsIs).
type DeadKind interface {
	// Describe fills in the discarded job dl.Job, read in tx: what it is
	// about (EventKey, and Channel, Outbox or Draft where it has them: the
	// store then adds who wrote and what, from the event), the side
	// effects known to have happened (Effects), and whether a replay is
	// safe and why, in a sentence (Safe, Why). A job that holds a reply
	// (Outbox set) is judged as the reply, by Safety.
	Describe(tx *store.Tx, dl *store.DeadLetter)
}

// A Regenerator is a DeadKind whose discarded job a person can replay to
// be regenerated: made afresh rather than run again as it was.
type Regenerator interface {
	DeadKind
	// Regenerate gives the new arguments of the discarded job j, in the
	// replay's transaction, once j is known to be the only job for its
	// key; an error refuses the replay.
	Regenerate(tx *store.Tx, j store.Job) (json.RawMessage, error)
}

// DeadKinds are the dead-letter rules of job kinds, by kind.
type DeadKinds map[string]DeadKind

// Judging is ob with the dead-letter rules of the job kinds declared above
// delivery (workers.DeadKinds: the draft job's are review's). Without them
// such a kind's discarded job is replayed as it is, and none can be
// regenerated.
func (ob *Outbox) Judging(kinds DeadKinds) *Outbox {
	c := *ob
	c.kinds = kinds
	return &c
}

// kind is the rules of the job kind k.
func (ob *Outbox) kind(k string) DeadKind {
	switch k {
	case Kind, KindEvent:
		return deliverDead{}
	}
	if rules, ok := ob.kinds[k]; ok {
		return rules
	}
	return replayAsIs{}
}

// judge fills in what the rules say of an item (a store.Judge): a
// discarded job by its kind's rules; an item that holds a reply by the
// reply's safety.
func (ob *Outbox) judge(tx *store.Tx, dl *store.DeadLetter) {
	if dl.Job != nil {
		ob.kind(dl.Job.Kind).Describe(tx, dl)
	}
	if dl.Outbox != nil {
		dl.Safe, dl.Why, dl.Effects = Safety(*dl.Outbox)
	}
}

// deliverDead is the delivery job's rules: a discarded delivery job is its
// reply, judged as the reply.
type deliverDead struct{}

// Describe is the job's reply, its channel and its event.
func (deliverDead) Describe(tx *store.Tx, dl *store.DeadLetter) {
	if o, err := tx.Outbox(dl.Job.Key); err == nil {
		dl.Outbox, dl.Channel, dl.EventKey = &o, o.Channel, o.EventKey
	}
}

// replayAsIs is the rules of a kind that declares none (the digest, the
// bulk replay): its job runs again, and nothing is known to have happened.
type replayAsIs struct{}

// Describe says a replay is safe: it runs the job again.
func (replayAsIs) Describe(_ *store.Tx, dl *store.DeadLetter) {
	dl.Safe, dl.Why = true, "a replay runs the job again under the same key"
}

// DeadLetters lists the dead-letter list, oldest first, each item judged.
func (ob *Outbox) DeadLetters(f store.DeadLetterFilter) ([]store.DeadLetter, error) {
	return ob.st.DeadLetters(f, ob.judge)
}

// DeadLetterPage reads one page of the list (store.DeadLetterPage), each item judged.
func (ob *Outbox) DeadLetterPage(f store.DeadLetterFilter, after, before string, n int) (store.DeadLetterPage, error) {
	return ob.st.DeadLetterPage(f, ob.judge, after, before, n)
}

// DeadLetter returns one item by job id or outbox id, judged.
func (ob *Outbox) DeadLetter(id string) (store.DeadLetter, error) {
	var dl store.DeadLetter
	err := ob.st.View(func(tx *store.Tx) error {
		var err error
		dl, err = ob.find(tx, id)
		return err
	})
	return dl, err
}

// find reads item id, judged: a reply is an item only while it failed, needs
// a person or is being sent.
func (ob *Outbox) find(tx *store.Tx, id string) (store.DeadLetter, error) {
	dl, err := tx.DeadLetter(id, ob.judge)
	if err != nil {
		return store.DeadLetter{}, err
	}
	if dl.Kind == store.DeadOutbox {
		switch dl.Outbox.Status {
		case store.OutboxFailed, store.OutboxNeedsReconciliation, store.OutboxEffectPending:
		default:
			return store.DeadLetter{}, &store.StateError{What: "outbox row " + id, State: dl.State, Want: "failed, needs_reconciliation or effect_pending to be replayed"}
		}
	}
	return dl, nil
}

// ErrUnconfirmed refuses a replay that may repeat a side effect.
var ErrUnconfirmed = errors.New("the replay needs an explicit confirmation")

// ErrNotRegenerable refuses a regenerate of anything but a discarded job
// of a kind that can be regenerated (a Regenerator: the draft job is the
// only one, so the sentence names it): a request that no state of the item and no confirmation can make succeed.
var ErrNotRegenerable = errors.New("only a draft job can be regenerated")

// NotRegenerableError names the item a regenerate was refused for; it is
// ErrNotRegenerable (like UnsafeReplayError is ErrUnconfirmed), with the
// sentence a caller can show as it is.
type NotRegenerableError struct {
	ID   string
	What string // "reply (outbox row)", "deliver job", ...
}

func (e *NotRegenerableError) Error() string {
	return fmt.Sprintf("%v; %s is a %s", ErrNotRegenerable, e.ID, e.What)
}

func (e *NotRegenerableError) Unwrap() error { return ErrNotRegenerable }

// UnsafeReplayError explains why a replay needs confirmation.
type UnsafeReplayError struct {
	ID, Why string
}

func (e *UnsafeReplayError) Error() string {
	return fmt.Sprintf("replaying %s is not known to be safe: %s; send {\"confirm\":%q} after checking", e.ID, e.Why, e.ID)
}

func (e *UnsafeReplayError) Unwrap() error { return ErrUnconfirmed }

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
// happened is refused (*UnsafeReplayError) unless confirmed; a
// regenerate of anything but a discarded draft job is a
// *NotRegenerableError, before either.
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
	dl, err := ob.find(tx, id)
	if err != nil {
		return store.DeadLetter{}, err
	}
	// First: no state or confirmation makes this request one that can succeed.
	var regen Regenerator
	if r.Regenerate {
		if dl.Kind == store.DeadJob {
			regen, _ = ob.kind(dl.Job.Kind).(Regenerator)
		}
		if regen == nil {
			return store.DeadLetter{}, &NotRegenerableError{ID: id, What: what(dl)}
		}
	}
	if dl.State == "dismissed" {
		return store.DeadLetter{}, &store.StateError{What: dl.Kind + " " + id, State: "dismissed", Want: "on the dead-letter list"}
	}
	if !dl.Safe && !r.Confirmed {
		return store.DeadLetter{}, &UnsafeReplayError{ID: id, Why: dl.Why}
	}
	jobID := ob.newID()
	switch {
	case dl.Kind == store.DeadJob && (dl.Job.Kind == Kind || dl.Job.Kind == KindEvent) && dl.Outbox != nil:
		if err := ob.requeue(tx, dl.Outbox, r, jobID); err != nil {
			return store.DeadLetter{}, err
		}
		if err := tx.RetireJob(dl.Job, r); err != nil {
			return store.DeadLetter{}, err
		}
	case dl.Kind == store.DeadJob:
		var payload func() (json.RawMessage, error)
		if regen != nil {
			j := *dl.Job
			payload = func() (json.RawMessage, error) { return regen.Regenerate(tx, j) }
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
		dl, err := ob.find(tx, id)
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

// attempts is the noun for n attempts: "1 attempt", "2 attempts".
func attempts(n int) string {
	if n == 1 {
		return "attempt"
	}
	return "attempts"
}
