package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DraftStatus is where a draft is on its way to a person's decision.
type DraftStatus string

// The draft states of the spec.
const (
	DraftPending  DraftStatus = "pending_approval"
	DraftApproved DraftStatus = "approved"
	DraftRejected DraftStatus = "rejected"
)

// Draft is the stored output of one drafting call: the record of the call
// itself, reused by every retry so the drafter runs once per event.
type Draft struct {
	V              int               `json:"v"`
	ID             string            `json:"id"`
	EventKey       string            `json:"event_key"`
	CorrelationID  string            `json:"correlation_id"`
	Channel        string            `json:"channel"`
	ConversationID string            `json:"conversation_id"`
	Status         DraftStatus       `json:"status"`
	Text           string            `json:"text"`
	Drafter        string            `json:"drafter"`
	Model          string            `json:"model,omitempty"`
	Template       string            `json:"template,omitempty"`
	PromptVersion  string            `json:"prompt_version"`
	InputHash      string            `json:"input_hash,omitempty"`
	Raw            string            `json:"raw,omitempty"`
	Fields         map[string]string `json:"fields,omitempty"`
	Owner          string            `json:"owner,omitempty"`
	RuleVersion    string            `json:"rule_version,omitempty"`
	Rule           string            `json:"rule,omitempty"`
	PromptTokens   int64             `json:"prompt_tokens,omitempty"`
	OutputTokens   int64             `json:"output_tokens,omitempty"`
	ExecutionID    string            `json:"execution_id"`
	CreatedAt      time.Time         `json:"created_at"`
}

// DraftID derives the draft id from the event key, so the same event always
// names the same draft (and so the same outbox row) whoever stores it.
func DraftID(eventKey string) string {
	sum := sha256.Sum256([]byte(eventKey))
	return "d" + hex.EncodeToString(sum[:10])
}

// SaveDraft stores d against its event key unless a draft is already stored
// there; it returns the stored draft and whether this call stored it. The
// first draft wins: a retry that raced a slower attempt reuses it. The same
// transaction moves the lead forward (matched, owned), so its status never
// claims more than what is stored.
func (s *Store) SaveDraft(ctx context.Context, d Draft) (Draft, bool, error) {
	var (
		out     Draft
		created bool
	)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		created = false
		byEvent := tx.Bucket(bucketDraftsByEvent)
		drafts := tx.Bucket(bucketDrafts)
		if id := byEvent.Get([]byte(d.EventKey)); id != nil {
			return getJSON(drafts, id, &out)
		}
		evID := tx.Bucket(bucketEventsByKey).Get([]byte(d.EventKey))
		if evID == nil {
			return fmt.Errorf("event %s: %w", d.EventKey, ErrNotFound)
		}
		var ev Event
		if err := getJSON(tx.Bucket(bucketEvents), evID, &ev); err != nil {
			return err
		}
		d.V = recordVersion
		d.ID = DraftID(d.EventKey)
		if d.Status == "" {
			d.Status = DraftPending
		}
		if err := putJSON(drafts, []byte(d.ID), d); err != nil {
			return err
		}
		if err := byEvent.Put([]byte(d.EventKey), []byte(d.ID)); err != nil {
			return err
		}
		if err := advanceOnDraft(tx, d, ev.Contact, d.CreatedAt); err != nil {
			return err
		}
		out, created = d, true
		return nil
	})
	if err != nil {
		return Draft{}, false, fmt.Errorf("store: save draft for %s: %w", d.EventKey, err)
	}
	return out, created, nil
}

// DraftByEvent returns the draft stored for an event key.
func (s *Store) DraftByEvent(eventKey string) (Draft, error) {
	var d Draft
	err := s.view(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketDraftsByEvent).Get([]byte(eventKey))
		if id == nil {
			return ErrNotFound
		}
		return getJSON(tx.Bucket(bucketDrafts), id, &d)
	})
	if err != nil {
		return Draft{}, fmt.Errorf("store: draft for %s: %w", eventKey, err)
	}
	return d, nil
}
