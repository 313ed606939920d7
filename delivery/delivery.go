// Package delivery owns the outbox: the state machine of a reply on its
// way out and every rule about it, written through the store's Tx.
//
//	pending ──claim──▶ effect_pending ──finish──▶ sent
//	   ▲                  │    ▲                  failed
//	   │                  │    └─ unknown, retry  needs_reconciliation
//	   └── not sent, retry┘
//	failed / needs_reconciliation ──reconcile sent──▶ sent
//	failed / needs_reconciliation ──reconcile not_sent, replay──▶ pending
//
// Claim and Finish bracket every call to a provider (Job, the delivery job
// kind); Reconcile is a person's verdict; Replay and Dismiss act on the
// dead-letter list, whose replies are judged by Safety and discarded jobs
// by their kind's rules (DeadKind, handed in by Judging); Resolve gives every
// unfinished row a live delivery job. The store keeps the Outbox record,
// its table and index, and Check; approval creates a row as pending.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// Kind is the job kind that sends one outbox row (its key).
const Kind = store.KindDeliver

// KindEvent is the job kind that sends one outbound event's row
// (store.OutboxEvent): Job runs it as it runs Kind, in a pool of its own.
const KindEvent = "deliver_event"

// Claim is what a row held before Claim replaced it: an execution that
// claimed the row and recorded no attempt died in the middle of its call,
// which may have reached the provider.
type Claim struct {
	Status      store.OutboxStatus
	ExecutionID string
	At          time.Time
}

// ClaimTx marks row id effect_pending for execution execID before the
// provider is called. prev is what the row held before: status pending for
// a first send, effect_pending when an earlier attempt's outcome is unknown
// (it failed ambiguously or its process died mid-call). A row in any other
// status is returned unchanged: there is nothing to send.
func ClaimTx(tx *store.Tx, id, execID string, now time.Time) (row store.Outbox, prev Claim, err error) {
	if row, err = tx.Outbox(id); err != nil {
		return store.Outbox{}, Claim{}, err
	}
	prev = Claim{Status: row.Status, ExecutionID: row.ExecutionID, At: row.ClaimedAt}
	if prev.At.IsZero() {
		prev.At = row.UpdatedAt // rows written before claimed_at existed
	}
	if row.Status != store.OutboxPending && row.Status != store.OutboxEffectPending {
		return row, prev, nil
	}
	old := row
	row.Status, row.ExecutionID, row.ClaimedAt, row.UpdatedAt = store.OutboxEffectPending, execID, now, now
	return row, prev, tx.PutOutbox(&old, &row)
}

// Result is how a delivery attempt ended.
type Result struct {
	// Status is sent, failed, needs_reconciliation, effect_pending (unknown;
	// will retry) or pending (the attempt provably sent nothing; will retry).
	Status     store.OutboxStatus
	ProviderID string
	Note       string
	Attempt    store.OutboxAttempt
	// JobID, when set, completes the delivery job (held by the same
	// execution) in the same transaction once the row leaves effect_pending,
	// so a replay or reconciliation right after always finds no live job and
	// enqueues a fresh one.
	JobID string
}

// FinishTx records an attempt on row id held by execID and moves the row to
// r.Status. A sent row moves its lead to replied in the same transaction.
// store.ErrLeaseLost when another execution holds the row.
func FinishTx(tx *store.Tx, id, execID string, now time.Time, r Result) (store.Outbox, error) {
	o, err := tx.Outbox(id)
	if err != nil {
		return store.Outbox{}, err
	}
	if o.Status != store.OutboxEffectPending || o.ExecutionID != execID {
		if settledByReceipt(o, execID) {
			return finishAfterReceipt(tx, o, execID, now, r)
		}
		return store.Outbox{}, store.ErrLeaseLost
	}
	old := o
	o.Attempts = append(o.Attempts, r.Attempt)
	o.UpdatedAt = now
	if r.Note != "" {
		o.Note = r.Note
	}
	o.Status = r.Status
	if r.Status == store.OutboxSent {
		if err := markSent(tx, &o, r.ProviderID, now); err != nil {
			return store.Outbox{}, err
		}
	}
	if r.JobID != "" && r.Status != store.OutboxEffectPending && r.Status != store.OutboxPending {
		// A job whose lease was reaped meanwhile is not this execution's
		// to complete; the outcome is still recorded, and the job's next
		// execution finds the row settled.
		if err := tx.CompleteJob(r.JobID, execID, now); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			return store.Outbox{}, err
		}
	}
	if err := tx.PutOutbox(&old, &o); err != nil {
		return store.Outbox{}, err
	}
	if r.Status == store.OutboxSent {
		return linkAnswer(tx, o, r.ProviderID)
	}
	return o, nil
}

// finishAfterReceipt records the answer of execution execID on a row a
// receipt settled while the call was in flight: the receipt's verdict
// stands (the provider reported on the message itself), the answer is kept
// as an attempt, and the job completes.
func finishAfterReceipt(tx *store.Tx, o store.Outbox, execID string, now time.Time, r Result) (store.Outbox, error) {
	old := o
	o.Attempts = append(o.Attempts, r.Attempt)
	o.ExecutionID, o.UpdatedAt = "", now
	if o.ProviderID == "" {
		o.ProviderID = r.ProviderID
	}
	if r.JobID != "" {
		if err := tx.CompleteJob(r.JobID, execID, now); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			return store.Outbox{}, err
		}
	}
	if err := tx.PutOutbox(&old, &o); err != nil {
		return store.Outbox{}, err
	}
	if r.Status == store.OutboxSent && r.ProviderID != "" {
		if _, err := tx.LinkReceipt(o.Channel, r.ProviderID, o.ID); err != nil {
			return store.Outbox{}, err
		}
	}
	return o, nil
}

// markSent records the provider id on o and moves its lead to replied.
func markSent(tx *store.Tx, o *store.Outbox, providerID string, now time.Time) error {
	o.ProviderID, o.SentAt, o.ExecutionID, o.Note = providerID, &now, "", ""
	return leads.ReplyTx(tx, *o, now)
}

// Outbox is the outbox's operations that need a whole transaction and the
// delivery job's policy: how many attempts a new delivery job gets and how
// its id is minted. Its zero value is not usable; call New.
type Outbox struct {
	st          *store.Store
	maxAttempts int
	newID       func() string
	kinds       DeadKinds // the dead-letter rules of the job kinds above delivery (Judging)
}

// New returns the outbox over st with cfg's retry policy.
func New(st *store.Store, cfg *config.Config) *Outbox {
	return &Outbox{st: st, maxAttempts: cfg.Retry.MaxAttempts, newID: func() string { return ulid.Make().String() }}
}

// Claim is ClaimTx in a transaction of its own.
func (ob *Outbox) Claim(ctx context.Context, id, execID string, now time.Time) (row store.Outbox, prev Claim, err error) {
	err = ob.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		row, prev, err = ClaimTx(tx, id, execID, now)
		return err
	})
	if err != nil {
		return store.Outbox{}, Claim{}, fmt.Errorf("delivery: claim %s: %w", id, err)
	}
	return row, prev, nil
}

// Finish is FinishTx in a transaction of its own.
func (ob *Outbox) Finish(ctx context.Context, id, execID string, now time.Time, r Result) (store.Outbox, error) {
	var out store.Outbox
	err := ob.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = FinishTx(tx, id, execID, now, r)
		return err
	})
	if err != nil {
		return store.Outbox{}, fmt.Errorf("delivery: finish %s: %w", id, err)
	}
	return out, nil
}

// Reconcile applies a person's verdict on a row that needs reconciliation
// (or failed): sent records the provider id they found and moves the lead
// to replied; not_sent puts the same row back to pending with a new
// delivery job, so the reply keeps its id and key.
func (ob *Outbox) Reconcile(ctx context.Context, id string, rec store.Reconciliation) (store.Outbox, error) {
	var out store.Outbox
	jobID := ob.newID()
	err := ob.st.Update(ctx, func(tx *store.Tx) error {
		o, err := tx.Outbox(id)
		if err != nil {
			return err
		}
		if o.Status != store.OutboxNeedsReconciliation && o.Status != store.OutboxFailed {
			return &store.StateError{What: "outbox row " + id, State: string(o.Status), Want: "needs_reconciliation or failed"}
		}
		old := o
		o.Reconciliations = append(o.Reconciliations, rec)
		o.UpdatedAt = rec.At
		switch rec.Outcome {
		case "sent":
			o.Status = store.OutboxSent
			if err := markSent(tx, &o, rec.ProviderID, rec.At); err != nil {
				return err
			}
		case "not_sent":
			o.Status, o.ExecutionID, o.Note, o.Dismissed = store.OutboxPending, "", "", nil
			if _, err := ob.enqueue(tx, jobID, o, rec.At); err != nil {
				return err
			}
		default:
			return fmt.Errorf("outcome %q is not sent or not_sent", rec.Outcome)
		}
		out = o
		if err := tx.Audit(store.AuditEntry{At: rec.At, Who: rec.By, From: rec.From, Action: "reconcile", Target: o.ID, Detail: rec.Outcome + " " + rec.ProviderID}); err != nil {
			return err
		}
		return tx.PutOutbox(&old, &o)
	})
	if err != nil {
		return store.Outbox{}, fmt.Errorf("delivery: reconcile %s: %w", id, err)
	}
	return out, nil
}

// enqueue adds the delivery job id of row o in tx, due now, unless one
// is live; created says whether this call added it.
func (ob *Outbox) enqueue(tx *store.Tx, id string, o store.Outbox, now time.Time) (created bool, err error) {
	_, created, err = jobs.Enqueue(tx, argsFor(o), jobs.Opts{ID: id, MaxAttempts: ob.maxAttempts, CorrelationID: o.CorrelationID, Now: now})
	return created, err
}

// Resolve enqueues a delivery job for every row left effect_pending or
// pending without a live job (a job discarded by a crash loop, a bug): the
// job then resolves it by the usual rules. It returns how many it enqueued.
//
// It runs at every start and every minute, and a file can hold a great
// many unfinished rows (a backlog waiting for a provider), nearly all with
// their job: so it finds the orphans from the keys of two indexes (the
// rows by status, the live jobs by key) in a read transaction, reading no
// row and holding no write lock, and only then writes the few it found,
// deciding each again in the write transaction.
func (ob *Outbox) Resolve(ctx context.Context, now time.Time) (int, error) {
	var orphans []string
	err := ob.st.View(func(tx *store.Tx) error {
		orphans = orphans[:0]
		for _, st := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending} {
			err := tx.EachOutboxID(st, func(id string) error {
				if !tx.HasLiveJob(Kind, id) && !tx.HasLiveJob(KindEvent, id) {
					orphans = append(orphans, id)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delivery: resolve unfinished deliveries: %w", err)
	}
	total := 0
	for chunk := range slices.Chunk(orphans, resolveChunk) {
		ids := make([]string, len(chunk)) // a job id each, minted once: fn may run twice
		for i := range ids {
			ids[i] = ob.newID()
		}
		n := 0
		err := ob.st.Update(ctx, func(tx *store.Tx) error {
			n = 0
			for i, id := range chunk {
				o, err := tx.Outbox(id)
				if errors.Is(err, store.ErrNotFound) {
					continue // deleted (retention, an undo) since the read
				}
				if err != nil {
					return err
				}
				if o.Status != store.OutboxPending && o.Status != store.OutboxEffectPending {
					continue // its job moved it on since the read
				}
				created, err := ob.enqueue(tx, ids[i], o, now)
				if err != nil {
					return err
				}
				if created {
					n++
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("delivery: resolve unfinished deliveries: %w", err)
		}
		total += n
	}
	return total, nil
}

// resolveChunk bounds the rows one of Resolve's write transactions
// enqueues, so the write lock is held briefly however many it found.
const resolveChunk = 256
