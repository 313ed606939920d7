package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// The job kinds the store's own reads name: an event's draft job is found
// under (KindDraft, its key), a row's delivery job under (KindDeliver, its
// id). The concepts that enqueue them declare their kinds from these
// (review.KindDraft, delivery.Kind); what a delivery job does, and every
// move of an outbox row after it is created, is the delivery package's.
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
	Kind            string           `json:"kind,omitempty"` // "" for a reply, OutboxAlert for a stuck-lead alert or a digest, OutboxCRM for a CRM write, OutboxEvent for an outbound event
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
	UndoUntil       time.Time        `json:"undo_until,omitzero"` // until then the approval can be undone (delivery.UndoTx); the delivery job is due then
	CreatedAt       time.Time        `json:"created_at"`
	UpdatedAt       time.Time        `json:"updated_at"`
	SentAt          *time.Time       `json:"sent_at,omitempty"`
	Attempts        []OutboxAttempt  `json:"attempts"`
	Reconciliations []Reconciliation `json:"reconciliations,omitempty"`
	Replays         []Replay         `json:"replays,omitempty"`
	Dismissed       *Dismissal       `json:"dismissed,omitempty"`
	// Delivery is the latest status the provider reported on a receipt
	// (delivered, read, undelivered...), DeliveryAt when it arrived.
	Delivery   string     `json:"delivery,omitempty"`
	DeliveryAt *time.Time `json:"delivery_at,omitempty"`
	// Template, when set, is what the row sends instead of Text (which
	// then says it in words): one of the provider's approved message
	// templates, chosen by a person once the lead's reply window closed
	// (review.TemplateTx). nil: a text reply, as every row before it.
	Template *OutboxTemplate `json:"template,omitempty"`
}

// OutboxTemplate is an approved message template with its body's
// parameters as sent, in order.
type OutboxTemplate struct {
	Name     string   `json:"name"`
	Language string   `json:"language"`
	Params   []string `json:"params,omitempty"`
}

// OutboxAlert marks an outbox row that announces a stuck lead to the team.
const OutboxAlert = "alert"

// OutboxCRM marks an outbox row that writes a lead's status to its
// client's CRM (package crm): its id "crm:<lead key>:<cycle>:<status>",
// its text the record written, its provider "crm:<client>".
const OutboxCRM = "crm"

// OutboxEvent marks an outbox row that posts one outbound event to one
// subscriber (package outbound): its id "ev:<lead key>:<subscriber>:<type>:<business key>"
// ("ev::…" for an event of no lead), its text the exact JSON body, its
// provider "events:<subscriber>".
const OutboxEvent = "event"

// OutboxID is the idempotency key of a reply: the conversation and the approved draft.
func OutboxID(conversationID, draftID string) string { return conversationID + ":" + draftID }

func outboxStatusKey(status OutboxStatus, id string) []byte {
	return append(append([]byte(status), 0), id...)
}

// Outbox reads one outbox row by id: ErrNotFound when there is none.
func (tx *Tx) Outbox(id string) (Outbox, error) { return outboxTable.get(tx, []byte(id)) }

// PutOutbox writes o over old, the row as read in this transaction (nil:
// o is a new row), moving its status index entry.
func (tx *Tx) PutOutbox(old, o *Outbox) error {
	if err := moveOutboxCount(tx, old, o); err != nil { // outboxcounts.go
		return err
	}
	if err := outboxTable.put(tx, old, o); err != nil {
		return err
	}
	return tx.outboxMoved(old, o) // hooks.go
}

// DeleteOutbox removes the stored row o, its index entry and the receipts
// linked to it.
func (tx *Tx) DeleteOutbox(o *Outbox) error {
	if err := deleteReceiptsOf(tx, o.ID); err != nil {
		return err
	}
	if err := moveOutboxCount(tx, o, nil); err != nil {
		return err
	}
	return outboxTable.delete(tx, o)
}

func insertOutbox(tx *Tx, o Outbox) error {
	if outboxTable.has(tx, []byte(o.ID)) {
		return fmt.Errorf("outbox row %s exists without its approval", o.ID)
	}
	if err := moveOutboxCount(tx, nil, &o); err != nil {
		return err
	}
	return outboxTable.insert(tx, &o)
}

// EachOutbox calls fn for every row in status, by id, until fn returns an error.
func (tx *Tx) EachOutbox(status OutboxStatus, fn func(Outbox) error) error {
	prefix := append([]byte(status), 0)
	c := tx.bucket(bucketOutboxByStatus).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		o, err := tx.Outbox(string(k[len(prefix):]))
		if tx.skip(err, nil) { // listed apart (Store.Unreadable)
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// EachOutboxID calls fn with the id of every row in status, by id, until fn
// returns an error. It reads the status index alone, never a row: a walk
// over many rows costs their index keys, not their records.
func (tx *Tx) EachOutboxID(status OutboxStatus, fn func(id string) error) error {
	prefix := append([]byte(status), 0)
	c := tx.bucket(bucketOutboxByStatus).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if err := fn(string(k[len(prefix):])); err != nil {
			return err
		}
	}
	return nil
}

// HasLiveJob reports whether a live job of kind and business key exists,
// from idx_jobs_unique alone (LiveJob without reading the job).
func (tx *Tx) HasLiveJob(kind, key string) bool {
	return tx.bucket(bucketJobsUnique).Get(uniqueKey(kind, key)) != nil
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

// errEnough ends a walk that has what it needs.
var errEnough = errors.New("enough")

// OutboxByStatus lists up to limit rows in status, by id.
func (s *Store) OutboxByStatus(status OutboxStatus, limit int) ([]Outbox, error) {
	out := []Outbox{}
	err := s.view(func(tx *Tx) error {
		out = out[:0]
		err := tx.EachOutbox(status, func(o Outbox) error {
			if len(out) >= limit {
				return errEnough
			}
			out = append(out, o)
			return nil
		})
		if errors.Is(err, errEnough) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: outbox rows %s: %w", status, err)
	}
	return out, nil
}
