package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
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
	// Decision is the person's approval or rejection; nil while pending.
	Decision *Decision `json:"decision,omitempty"`
	// OutboxID is set by approval.
	OutboxID string `json:"outbox_id,omitempty"`
	// Version counts regenerations: 1 for the first draft of an event.
	Version int `json:"version"`
	// Replaces names the draft a regeneration replaced.
	Replaces string `json:"replaces,omitempty"`
}

// Decision records who decided a draft, when, from where, and the final text.
type Decision struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	From   string    `json:"from,omitempty"` // the client address
	Text   string    `json:"text,omitempty"` // the reply as approved (edited or not)
	Edited bool      `json:"edited,omitempty"`
	Reason string    `json:"reason,omitempty"` // why it was rejected
}

// DraftID names the first draft of the event with ULID eventID: the same
// event always names the same draft (and so the same outbox row) whoever
// stores it, and draft ids sort by time like the events they answer, so
// inserts append at the right edge of the drafts tree instead of landing on
// a random page each.
func DraftID(eventID string) string { return "d" + eventID }

// draftVersionID names version n of a draft.
func draftVersionID(eventID string, n int) string {
	if n <= 1 {
		return DraftID(eventID)
	}
	return fmt.Sprintf("%s-v%d", DraftID(eventID), n)
}

// SaveDraft stores d against its event key unless a draft is already stored
// there; it returns the stored draft and whether this call stored it. The
// first draft wins: a retry that raced a slower attempt reuses it. The same
// transaction moves the lead forward (matched, owned), so its status never
// claims more than what is stored.
func (s *Store) SaveDraft(ctx context.Context, draft Draft) (Draft, bool, error) {
	return s.SaveDraftVersion(ctx, draft, 1)
}

// DraftByEvent returns the draft stored for an event key.
func (s *Store) DraftByEvent(eventKey string) (Draft, error) {
	var d Draft
	err := s.view(func(tx *Tx) error {
		var err error
		d, err = tx.DraftByEvent(eventKey)
		return err
	})
	if err != nil {
		return Draft{}, fmt.Errorf("store: draft for %s: %w", eventKey, err)
	}
	return d, nil
}

func draftStatusKey(d Draft) []byte {
	return append(append([]byte(d.Status), 0), timeKey(d.CreatedAt, d.ID)...)
}

// Draft returns one draft by id.
func (s *Store) Draft(id string) (Draft, error) {
	var d Draft
	err := s.view(func(tx *Tx) error {
		var err error
		d, err = tx.Draft(id)
		return err
	})
	if err != nil {
		return Draft{}, fmt.Errorf("store: draft %s: %w", id, err)
	}
	return d, nil
}

// Draft reads one draft by id: ErrNotFound when there is none.
func (tx *Tx) Draft(id string) (Draft, error) { return draftsTable.get(tx, []byte(id)) }

// DraftByEvent reads the current draft of the event key (its newest
// version): ErrNotFound when the event has none.
func (tx *Tx) DraftByEvent(eventKey string) (Draft, error) {
	return draftsTable.lookup(tx, &draftsByEvent, []byte(eventKey))
}

// PutDraft writes d over old, the draft as read in this transaction (nil:
// d is a new draft, which becomes its event's current one), moving its
// index entries and the per-status counts.
func (tx *Tx) PutDraft(old, d *Draft) error {
	if old == nil || old.Status != d.Status {
		if old != nil {
			if err := addCount(tx, draftCountKey(old.Status), -1); err != nil {
				return err
			}
		}
		if err := addCount(tx, draftCountKey(d.Status), 1); err != nil {
			return err
		}
	}
	return draftsTable.put(tx, old, d)
}

// DeleteDraft removes the stored draft d, its index entries and its count.
func (tx *Tx) DeleteDraft(d *Draft) error {
	if err := addCount(tx, draftCountKey(d.Status), -1); err != nil {
		return err
	}
	return draftsTable.delete(tx, d)
}

// ConflictError is a decision that contradicts an earlier one (reject after
// approve, approve after reject). It names the earlier decision.
type ConflictError struct {
	Draft Draft
}

func (e *ConflictError) Error() string {
	d := e.Draft.Decision
	return fmt.Sprintf("draft %s was already %s by %s at %s", e.Draft.ID, e.Draft.Status, d.By, d.At.UTC().Format(time.RFC3339))
}

// Approval asks for a draft to be approved and sent.
type Approval struct {
	Decision
	Provider string // the channel's provider
	// ProviderFor, when set, names the provider of the draft's channel inside
	// the transaction (false: the channel is no longer configured); an
	// approval that already happened is answered without it.
	ProviderFor func(channel string) (string, bool)
	JobID       string // a ULID for the delivery job, minted by the caller
	MaxAttempts int
}

// Approved is the answer to ApproveDraft.
type Approved struct {
	Draft   Draft
	Outbox  Outbox
	Created bool // false: an earlier approval made the outbox row; Draft.Decision says who
}

// ApproveDraft approves draft id and, in the same transaction, creates its
// outbox row ("<conversation id>:<draft id>") and delivery job, unless an
// approval already did: then the existing row is returned and nothing is
// written. Approving a rejected draft is a *ConflictError.
func (s *Store) ApproveDraft(ctx context.Context, id string, approval Approval) (Approved, error) {
	var out Approved
	err := s.update(ctx, func(tx *Tx) error {
		out = Approved{}
		a := approval // a round may run twice: start from the caller's values
		d, err := tx.Draft(id)
		if err != nil {
			return err
		}
		switch d.Status {
		case DraftRejected:
			return &ConflictError{Draft: d}
		case DraftApproved:
			o, err := tx.Outbox(d.OutboxID)
			if err != nil {
				return fmt.Errorf("approved draft's outbox row %s: %w", d.OutboxID, err)
			}
			out = Approved{Draft: d, Outbox: o}
			return nil
		}
		if a.ProviderFor != nil {
			p, ok := a.ProviderFor(d.Channel)
			if !ok {
				return &StateError{What: "draft " + d.ID, State: "in channel " + d.Channel + ", which is no longer configured", Want: "in a configured channel to be approved"}
			}
			a.Provider = p
		}
		if a.Text == "" {
			a.Text = d.Text
		}
		a.Edited = a.Text != d.Text
		ev, err := tx.EventByKey(d.EventKey)
		if err != nil {
			return fmt.Errorf("event %s of draft %s: %w", d.EventKey, d.ID, err)
		}
		old := d
		dec := a.Decision
		d.Decision = &dec
		d.OutboxID = OutboxID(d.ConversationID, d.ID)
		o := Outbox{
			V: recordVersion, ID: d.OutboxID, DraftID: d.ID, EventKey: d.EventKey, CorrelationID: d.CorrelationID,
			Channel: d.Channel, ConversationID: d.ConversationID, To: ev.Contact, Text: a.Text,
			Provider: a.Provider, Status: OutboxPending, CreatedAt: a.At, UpdatedAt: a.At,
			ApprovedBy: a.By, Attempts: []OutboxAttempt{},
		}
		if err := insertOutbox(tx, o); err != nil {
			return err
		}
		if _, _, err := enqueue(tx, NewJob{ID: a.JobID, Kind: KindDeliver, Key: o.ID, MaxAttempts: a.MaxAttempts}, d.CorrelationID, a.At); err != nil {
			return err
		}
		d.Status = DraftApproved
		if err := tx.PutDraft(&old, &d); err != nil {
			return err
		}
		detail := "approved as written"
		if a.Edited {
			detail = "approved with edited text"
		}
		if err := writeAudit(tx, AuditEntry{At: a.At, Who: a.By, From: a.From, Action: "approve draft", Target: d.ID, Detail: detail + "; outbox " + o.ID}); err != nil {
			return err
		}
		out = Approved{Draft: d, Outbox: o, Created: true}
		return nil
	})
	if err != nil {
		return Approved{}, fmt.Errorf("store: approve draft %s: %w", id, err)
	}
	return out, nil
}

// Rejected is the answer to RejectDraft. Draft is embedded (not a named
// field as in Approved) so callers that read the draft's fields off the
// answer keep reading them there.
type Rejected struct {
	Draft
	Decided bool // false: an earlier rejection decided the draft; Draft.Decision says who
}

// RejectDraft rejects draft id, deciding inside one transaction whether this
// call is the one that rejects it. Rejecting it again writes nothing and
// answers the earlier rejection with Decided false; rejecting an approved
// draft is a *ConflictError.
func (s *Store) RejectDraft(ctx context.Context, id string, dec Decision) (Rejected, error) {
	var out Rejected
	err := s.update(ctx, func(tx *Tx) error {
		out = Rejected{} // a round may run twice: start from nothing
		d, err := tx.Draft(id)
		if err != nil {
			return err
		}
		switch d.Status {
		case DraftApproved:
			return &ConflictError{Draft: d}
		case DraftRejected:
			out = Rejected{Draft: d}
			return nil
		}
		old := d
		mine := dec
		d.Decision, d.Status = &mine, DraftRejected
		if err := tx.PutDraft(&old, &d); err != nil {
			return err
		}
		if err := writeAudit(tx, AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "reject draft", Target: d.ID, Detail: dec.Reason}); err != nil {
			return err
		}
		out = Rejected{Draft: d, Decided: true}
		return nil
	})
	if err != nil {
		return Rejected{}, fmt.Errorf("store: reject draft %s: %w", id, err)
	}
	return out, nil
}

// DraftFilter selects drafts for Drafts.
type DraftFilter struct {
	Status DraftStatus
	After  []byte // a cursor from the previous page
	Limit  int
	// Keep, when set, keeps only the drafts it accepts (the queue's owner and
	// channel filters), reading at most Scan drafts (0: no bound) in the
	// same read transaction, so the cursor is exact.
	Keep func(Draft) bool
	Scan int
}

// Drafts lists drafts in one status, oldest first, a page at a time; next
// is the cursor of the following page (nil at the end). With a filter whose
// scan budget ran out before the page filled, partial is true and next
// continues the scan.
func (s *Store) Drafts(f DraftFilter) (page []Draft, next []byte, err error) {
	page, next, _, err = s.DraftsWhere(f)
	return page, next, err
}

// DraftsWhere is Drafts that also says whether the page ended early because
// the scan budget ran out.
func (s *Store) DraftsWhere(f DraftFilter) (page []Draft, next []byte, partial bool, err error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	page = []Draft{}
	err = s.view(func(tx *Tx) error {
		prefix := append([]byte(f.Status), 0)
		c := tx.bucket(bucketDraftsByStatus).Cursor()
		k, _ := c.Seek(prefix)
		if f.After != nil {
			k, _ = c.Seek(f.After)
			if bytes.Equal(k, f.After) {
				k, _ = c.Next()
			}
		}
		scanned := 0
		var last []byte // the last key read: the next page starts after it
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			full := len(page) == f.Limit
			if full || f.Keep != nil && f.Scan > 0 && scanned == f.Scan {
				next, partial = bytes.Clone(last), !full
				return nil
			}
			last = k
			_, id := splitTimeKey(k[len(prefix):])
			d, err := tx.Draft(id)
			if err != nil {
				return fmt.Errorf("status index points at draft %s: %w", id, err)
			}
			scanned++
			if f.Keep == nil || f.Keep(d) {
				page = append(page, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("store: list drafts: %w", err)
	}
	return page, next, partial, nil
}

// SaveDraftVersion stores a regenerated draft as version n of its event,
// unless version n (or later) is stored: then that one is returned. The
// draft it replaces is kept, rejected with a note if it was pending, and
// the event's index points at the new one.
func (s *Store) SaveDraftVersion(ctx context.Context, draft Draft, n int) (Draft, bool, error) {
	var (
		out     Draft
		created bool
	)
	err := s.update(ctx, func(tx *Tx) error {
		out, created = Draft{}, false
		d := draft // a round may run twice: start from the caller's values
		cur, err := tx.DraftByEvent(d.EventKey)
		hasCur := err == nil
		switch {
		case hasCur:
			// A record from before versions were counted (0) is version 1.
			if max(cur.Version, 1) >= n {
				out = cur
				return nil
			}
			if cur.Status == DraftApproved {
				return &StateError{What: "draft " + cur.ID, State: "approved", Want: "pending or rejected to be regenerated"}
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		ev, err := tx.EventByKey(d.EventKey)
		if err != nil {
			return fmt.Errorf("event %s: %w", d.EventKey, err)
		}
		d.V, d.Version, d.Status = recordVersion, n, DraftPending
		d.ID = draftVersionID(ev.ID, n)
		d.Channel, d.ConversationID, d.CorrelationID = ev.Channel, ev.ConversationID, ev.CorrelationID
		if hasCur {
			d.Replaces = cur.ID
			if cur.Status == DraftPending {
				old := cur
				cur.Decision = &Decision{By: "regeneration", At: d.CreatedAt, Reason: "replaced by " + d.ID}
				cur.Status = DraftRejected
				if err := tx.PutDraft(&old, &cur); err != nil {
					return err
				}
			}
		}
		if err := insertDraft(tx, d, ev); err != nil {
			return err
		}
		out, created = d, true
		return nil
	})
	if err != nil {
		return Draft{}, false, fmt.Errorf("store: save draft version %d for %s: %w", n, draft.EventKey, err)
	}
	return out, created, nil
}

// DraftVersions lists every stored draft of an event, oldest first.
func (s *Store) DraftVersions(eventKey string) ([]Draft, error) {
	var out []Draft
	err := s.view(func(tx *Tx) error {
		out = draftsOf(tx, eventKey)
		return nil
	})
	return out, err
}

// insertDraft writes d as the current draft of its event with its indexes,
// and moves the lead forward in the same transaction.
func insertDraft(tx *Tx, d Draft, ev Event) error {
	if err := tx.PutDraft(nil, &d); err != nil {
		return err
	}
	return advanceOnDraft(tx, d, ev.Contact, d.CreatedAt)
}
