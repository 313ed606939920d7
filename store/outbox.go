package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// Job kinds the store enqueues itself, inside the transaction that makes
// them necessary (an event enqueues its draft job, an approval its delivery).
const (
	KindDraft   = "draft"
	KindDeliver = "deliver"
)

// OutboxStatus is where a reply is on its way out.
type OutboxStatus string

// The outbox states of the spec.
const (
	OutboxPending             OutboxStatus = "pending"
	OutboxEffectPending       OutboxStatus = "effect_pending"
	OutboxSent                OutboxStatus = "sent"
	OutboxNeedsReconciliation OutboxStatus = "needs_reconciliation"
	OutboxFailed              OutboxStatus = "failed"
)

// OutboxAttempt is one call to the provider (a send, a resend with the same
// key, or a lookup) and what came of it.
type OutboxAttempt struct {
	ExecutionID string    `json:"execution_id"`
	At          time.Time `json:"at"`
	Action      string    `json:"action"`  // send, resend, lookup
	Outcome     string    `json:"outcome"` // sent, not_found, ambiguous, permanent
	Error       string    `json:"error,omitempty"`
	ProviderID  string    `json:"provider_id,omitempty"`
}

// Reconciliation is a person's verdict on a reply whose outcome was unknown.
type Reconciliation struct {
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	Outcome    string    `json:"outcome"` // sent or not_sent
	ProviderID string    `json:"provider_id,omitempty"`
	From       string    `json:"from,omitempty"`
}

// Outbox is one reply to send, created by approval with an id derived from
// the approved draft, so it can exist once.
type Outbox struct {
	V               int              `json:"v"`
	ID              string           `json:"id"`
	Kind            string           `json:"kind,omitempty"` // "" for a reply, OutboxAlert for a stuck-lead alert
	DraftID         string           `json:"draft_id,omitempty"`
	EventKey        string           `json:"event_key"`
	CorrelationID   string           `json:"correlation_id"`
	Channel         string           `json:"channel"`
	ConversationID  string           `json:"conversation_id"`
	To              string           `json:"to"`
	Text            string           `json:"text"`
	Provider        string           `json:"provider"`
	Status          OutboxStatus     `json:"status"`
	ProviderID      string           `json:"provider_id,omitempty"`
	ExecutionID     string           `json:"execution_id,omitempty"` // the attempt that holds the claim
	ClaimedAt       time.Time        `json:"claimed_at,omitzero"`    // when ExecutionID claimed the row
	Note            string           `json:"note,omitempty"`         // why it failed or needs a person
	ApprovedBy      string           `json:"approved_by"`
	CreatedAt       time.Time        `json:"created_at"`
	UpdatedAt       time.Time        `json:"updated_at"`
	SentAt          *time.Time       `json:"sent_at,omitempty"`
	Attempts        []OutboxAttempt  `json:"attempts"`
	Reconciliations []Reconciliation `json:"reconciliations,omitempty"`
	Replays         []Replay         `json:"replays,omitempty"`
	Dismissed       *Dismissal       `json:"dismissed,omitempty"`
}

// OutboxAlert marks an outbox row that announces a stuck lead to the team.
const OutboxAlert = "alert"

// OutboxID is the idempotency key of a reply: the conversation and the approved draft.
func OutboxID(conversationID, draftID string) string { return conversationID + ":" + draftID }

func outboxStatusKey(status OutboxStatus, id string) []byte {
	return append(append([]byte(status), 0), id...)
}

// Outbox reads one outbox row by id: ErrNotFound when there is none.
func (tx *Tx) Outbox(id string) (Outbox, error) { return outboxTable.get(tx, []byte(id)) }

// PutOutbox writes o over old, the row as read in this transaction (nil:
// o is a new row), moving its status index entry.
func (tx *Tx) PutOutbox(old, o *Outbox) error { return outboxTable.put(tx, old, o) }

// DeleteOutbox removes the stored row o and its index entry.
func (tx *Tx) DeleteOutbox(o *Outbox) error { return outboxTable.delete(tx, o) }

func insertOutbox(tx *Tx, o Outbox) error {
	if outboxTable.has(tx, []byte(o.ID)) {
		return fmt.Errorf("outbox row %s exists without its approval", o.ID)
	}
	return outboxTable.insert(tx, &o)
}

// OutboxClaim is the claim a row carried before ClaimOutbox replaced it:
// an execution that claimed the row and recorded no attempt died in the
// middle of its call, which may have reached the provider.
type OutboxClaim struct {
	Status      OutboxStatus
	ExecutionID string
	At          time.Time
}

// ClaimOutbox marks row id effect_pending for execution execID before the
// provider is called. prev is what the row held before: status pending for
// a first send, effect_pending when an earlier attempt's outcome is unknown
// (it failed ambiguously or its process died mid-call). A row in any other
// status is returned unchanged: there is nothing to send.
func (s *Store) ClaimOutbox(ctx context.Context, id, execID string, now time.Time) (row Outbox, prev OutboxClaim, err error) {
	err = s.update(ctx, func(tx *Tx) error {
		row, prev = Outbox{}, OutboxClaim{}
		var err error
		if row, err = tx.Outbox(id); err != nil {
			return err
		}
		prev = OutboxClaim{Status: row.Status, ExecutionID: row.ExecutionID, At: row.ClaimedAt}
		if prev.At.IsZero() {
			prev.At = row.UpdatedAt // rows written before claimed_at existed
		}
		if row.Status != OutboxPending && row.Status != OutboxEffectPending {
			return nil
		}
		old := row
		row.Status, row.ExecutionID, row.ClaimedAt, row.UpdatedAt = OutboxEffectPending, execID, now, now
		return tx.PutOutbox(&old, &row)
	})
	if err != nil {
		return Outbox{}, OutboxClaim{}, fmt.Errorf("store: claim outbox %s: %w", id, err)
	}
	return row, prev, nil
}

// OutboxResult is how a delivery attempt ended.
type OutboxResult struct {
	// Status is sent, failed, needs_reconciliation, effect_pending (unknown;
	// will retry) or pending (the attempt provably sent nothing; will retry).
	Status     OutboxStatus
	ProviderID string
	Note       string
	Attempt    OutboxAttempt
	// JobID, when set, completes the delivery job (held by the same
	// execution) in the same transaction once the row leaves effect_pending,
	// so a replay or reconciliation right after always finds no live job and
	// enqueues a fresh one.
	JobID string
}

// FinishOutbox records an attempt on row id held by execID and moves the
// row to r.Status. A sent row moves its lead to replied in the same
// transaction. ErrLeaseLost when another execution holds the row.
func (s *Store) FinishOutbox(ctx context.Context, id, execID string, now time.Time, r OutboxResult) (Outbox, error) {
	var out Outbox
	err := s.update(ctx, func(tx *Tx) error {
		o, err := tx.Outbox(id)
		if err != nil {
			return err
		}
		if o.Status != OutboxEffectPending || o.ExecutionID != execID {
			return ErrLeaseLost
		}
		old := o
		o.Attempts = append(o.Attempts, r.Attempt)
		o.UpdatedAt = now
		if r.Note != "" {
			o.Note = r.Note
		}
		o.Status = r.Status
		if r.Status == OutboxSent {
			if err := markSent(tx, &o, r.ProviderID, now); err != nil {
				return err
			}
		}
		if r.JobID != "" && r.Status != OutboxEffectPending && r.Status != OutboxPending {
			// A job whose lease was reaped meanwhile is not this execution's
			// to complete; the outcome is still recorded, and the job's next
			// execution finds the row settled.
			if err := completeJob(tx, r.JobID, execID, now); err != nil && !errors.Is(err, ErrLeaseLost) {
				return err
			}
		}
		out = o
		return tx.PutOutbox(&old, &o)
	})
	if err != nil {
		return Outbox{}, fmt.Errorf("store: finish outbox %s: %w", id, err)
	}
	return out, nil
}

// markSent records the provider id and moves the lead to replied.
func markSent(tx *Tx, o *Outbox, providerID string, now time.Time) error {
	o.ProviderID, o.SentAt, o.ExecutionID, o.Note = providerID, &now, "", ""
	if o.Kind == OutboxAlert {
		return nil // an alert to the team is not a reply to the lead
	}
	h, err := tx.Handoff(LeadKey(o.Channel, o.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of %s: %w", o.ID, err)
	}
	if h.Status == HandoffReplied || h.LastEventKey != o.EventKey {
		// Replied already, or a newer message is still unanswered: the lead
		// must not look done.
		return nil
	}
	return moveHandoff(tx, &h, HandoffReplied, now, o.EventKey, "reply "+o.ID+" sent")
}

// Reconcile applies a person's verdict on a row that needs reconciliation
// (or failed): sent records the provider id they found and moves the lead to
// replied; not_sent puts the same row back to pending with a new delivery
// job (jobID), so the reply keeps its id and key.
func (s *Store) Reconcile(ctx context.Context, id string, rec Reconciliation, jobID string, maxAttempts int) (Outbox, error) {
	var out Outbox
	err := s.update(ctx, func(tx *Tx) error {
		o, err := tx.Outbox(id)
		if err != nil {
			return err
		}
		if o.Status != OutboxNeedsReconciliation && o.Status != OutboxFailed {
			return &StateError{What: "outbox row " + id, State: string(o.Status), Want: "needs_reconciliation or failed"}
		}
		old := o
		o.Reconciliations = append(o.Reconciliations, rec)
		o.UpdatedAt = rec.At
		switch rec.Outcome {
		case "sent":
			o.Status = OutboxSent
			if err := markSent(tx, &o, rec.ProviderID, rec.At); err != nil {
				return err
			}
		case "not_sent":
			o.Status, o.ExecutionID, o.Note, o.Dismissed = OutboxPending, "", "", nil
			if _, _, err := enqueue(tx, NewJob{ID: jobID, Kind: KindDeliver, Key: o.ID, MaxAttempts: maxAttempts}, o.CorrelationID, rec.At); err != nil {
				return err
			}
		default:
			return fmt.Errorf("outcome %q is not sent or not_sent", rec.Outcome)
		}
		out = o
		if err := writeAudit(tx, AuditEntry{At: rec.At, Who: rec.By, From: rec.From, Action: "reconcile", Target: o.ID, Detail: rec.Outcome + " " + rec.ProviderID}); err != nil {
			return err
		}
		return tx.PutOutbox(&old, &o)
	})
	if err != nil {
		return Outbox{}, fmt.Errorf("store: reconcile %s: %w", id, err)
	}
	return out, nil
}

// StateError is a transition the record's current state does not allow.
type StateError struct {
	What, State, Want string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("%s is %s; this needs it to be %s", e.What, e.State, e.Want)
}

// OutboxRow returns one outbox row.
func (s *Store) OutboxRow(id string) (Outbox, error) {
	var o Outbox
	err := s.view(func(tx *Tx) error {
		var err error
		o, err = tx.Outbox(id)
		return err
	})
	if err != nil {
		return Outbox{}, fmt.Errorf("store: outbox %s: %w", id, err)
	}
	return o, nil
}

// OutboxByStatus lists up to limit rows in status, by id.
func (s *Store) OutboxByStatus(status OutboxStatus, limit int) ([]Outbox, error) {
	out := []Outbox{}
	err := s.view(func(tx *Tx) error {
		prefix := append([]byte(status), 0)
		c := tx.bucket(bucketOutboxByStatus).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Next() {
			o, err := tx.Outbox(string(k[len(prefix):]))
			if err != nil {
				return err
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: outbox rows %s: %w", status, err)
	}
	return out, nil
}

// EnsureDelivery enqueues a delivery job for every row left effect_pending
// or pending without a live job (a job discarded by a crash loop, a bug):
// the job then resolves it by the usual rules. It returns how many it
// enqueued. newID mints job ids.
func (s *Store) EnsureDelivery(ctx context.Context, now time.Time, maxAttempts int, newID func() string) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *Tx) error {
		n = 0
		c := tx.bucket(bucketOutboxByStatus).Cursor()
		for _, st := range []OutboxStatus{OutboxPending, OutboxEffectPending} {
			prefix := append([]byte(st), 0)
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				o, err := tx.Outbox(string(k[len(prefix):]))
				if err != nil {
					return err
				}
				_, created, err := enqueue(tx, NewJob{ID: newID(), Kind: KindDeliver, Key: o.ID, MaxAttempts: maxAttempts}, o.CorrelationID, now)
				if err != nil {
					return err
				}
				if created {
					n++
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: ensure delivery jobs: %w", err)
	}
	return n, nil
}
