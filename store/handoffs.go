package store

import (
	"bytes"
	"fmt"
	"time"
)

// HandoffStatus is how far one lead's current cycle has got. Its values,
// their order and every move between them are the leads package's
// (leads.Statuses, leads.Open): the store keeps the field and its index
// (idx_handoffs_by_status, keyed by the status's bytes) and names none.
type HandoffStatus string

// Transition is one status change of a lead, kept forever in its history.
type Transition struct {
	Cycle    int           `json:"cycle"`
	Status   HandoffStatus `json:"status"`
	At       time.Time     `json:"at"`
	EventKey string        `json:"event_key,omitempty"`
	Note     string        `json:"note,omitempty"`
}

// Handoff is the one status record of a lead, keyed "<channel>:<conversation id>".
type Handoff struct {
	V              int           `json:"v"`
	Key            string        `json:"key"`
	Channel        string        `json:"channel"`
	ConversationID string        `json:"conversation_id"`
	Status         HandoffStatus `json:"status"`
	Since          time.Time     `json:"since"`
	Cycle          int           `json:"cycle"`
	Owner          string        `json:"owner,omitempty"`
	Contact        string        `json:"contact,omitempty"`
	LastEventKey   string        `json:"last_event_key"`
	History        []Transition  `json:"history"`
	// StuckSince is the Since of the stay that was flagged stuck: each stay
	// in a status is flagged (and alerted) once.
	StuckSince *time.Time `json:"stuck_since,omitempty"`
	StuckAt    *time.Time `json:"stuck_at,omitempty"`
	// Turn counts the lead's conversation turns: the inbound messages since
	// its last approved reply (or since it was closed) are one turn, with at
	// most one live draft. 0: a lead recorded before turns were kept.
	Turn int `json:"turn,omitempty"`
	// TurnEvents are the event keys of the open turn, in the order they
	// were recorded; empty once the turn's draft is approved or the lead closed.
	TurnEvents []string `json:"turn_events,omitempty"`
	// TurnDraft is the event key that drafts the open turn: its draft job's
	// business key and its draft's event (so the draft id is DraftID of that
	// event). Empty: no turn is open.
	TurnDraft string `json:"turn_draft,omitempty"`
	// DraftJob is the id of the draft job the lead's messages enqueued
	// last: a new one waits while it runs (leads/turns.go), so a lead has
	// one draft written at a time. Empty on a lead recorded before.
	DraftJob string `json:"draft_job,omitempty"`
	// Closed says who closed the lead without a reply, when and why; nil
	// unless the status is closed.
	Closed *Closure `json:"closed,omitempty"`
	// Name is the name the latest of the lead's messages that gave one
	// gave; the search finds leads by it (schema 7 on).
	Name string `json:"name,omitempty"`
	// Assigned is the owner the lead's cycle Assigned.Cycle was given while
	// the lead waited, received, for its CRM record (a client with a CRM:
	// routing's, or the CRM's own read back): the move to owned that
	// follows the move to matched, once the record's write is on it
	// (leads.CRMRecordTx), takes its owner and note. nil: none waiting.
	Assigned *Assignment `json:"assigned,omitempty"`
}

// Assignment is an owner kept for a lead's move to owned.
type Assignment struct {
	Cycle int    `json:"cycle"`
	Owner string `json:"owner"`
	// Routed is true for routing's owner (which wins over the CRM's).
	Routed   bool   `json:"routed,omitempty"`
	Note     string `json:"note"`      // the owned move's history note
	EventKey string `json:"event_key"` // the event the owner came with
}

// Closure is a person's decision to end a lead's turn without a reply.
type Closure struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	// TurnDraft and TurnEvents are the open turn the close ended (the
	// lead's, as they were): what undoing the close (leads.ReopenTx) puts
	// back. Empty on a closure stored before they were kept.
	TurnDraft  string   `json:"turn_draft,omitempty"`
	TurnEvents []string `json:"turn_events,omitempty"`
}

// Stuck reports whether the lead's current stay has been flagged.
func (h Handoff) Stuck() bool { return h.StuckSince != nil && h.StuckSince.Equal(h.Since) }

// LeadKey names the lead an event belongs to.
func LeadKey(channel, conversationID string) string { return channel + ":" + conversationID }

// NewHandoff is the record of a new lead of conversationID on channel, in
// its first cycle and in no status yet: leads.ReceiveTx moves it to its
// first status in the transaction that stores its first message.
func NewHandoff(channel, conversationID string) Handoff {
	return Handoff{V: recordVersion, Key: LeadKey(channel, conversationID), Channel: channel, ConversationID: conversationID, Cycle: 1}
}

// Handoff reads one lead by key: ErrNotFound when there is none.
func (tx *Tx) Handoff(key string) (Handoff, error) { return handoffsTable.get(tx, []byte(key)) }

// PutHandoff writes h over old, the lead as read in this transaction (nil:
// h is a new lead), moving its status index entry.
func (tx *Tx) PutHandoff(old, h *Handoff) error {
	if err := moveLeadCount(tx, old, h); err != nil { // the stuck count's: stats.go
		return err
	}
	return handoffsTable.put(tx, old, h)
}

func handoffStatusKey(s HandoffStatus, since time.Time, key string) []byte {
	return append(append([]byte(s), 0), timeKey(since, key)...)
}

// Handoff returns one lead by key.
func (s *Store) Handoff(key string) (Handoff, error) {
	var h Handoff
	err := s.view(func(tx *Tx) error {
		var err error
		h, err = tx.Handoff(key)
		return err
	})
	if err != nil {
		return Handoff{}, fmt.Errorf("store: lead %s: %w", key, err)
	}
	return h, nil
}

// EachHandoff calls fn for every lead in status that entered it before
// before (zero: every one), longest in the status first, until fn answers
// false or an error. It walks idx_handoffs_by_status, so the leads past a
// threshold cost one seek: the stuck-lead scan (leads.FlagStuck) and the
// lists (leads.List).
func (tx *Tx) EachHandoff(status HandoffStatus, before time.Time, fn func(Handoff) (bool, error)) error {
	return tx.EachHandoffAfter(status, nil, before, fn)
}

// EachHandoffAfter is EachHandoff starting after lead after (as it was
// indexed: its status, since and key), so that a walk split over several
// transactions resumes where the last one stopped instead of reading the
// start of the index again. A nil after starts at the beginning.
func (tx *Tx) EachHandoffAfter(status HandoffStatus, after *Handoff, before time.Time, fn func(Handoff) (bool, error)) error {
	prefix := append([]byte(status), 0)
	start := prefix
	var skip []byte
	if after != nil {
		skip = handoffStatusKey(status, after.Since, after.Key)
		start = skip
	}
	c := tx.bucket(bucketHandoffsByStatus).Cursor()
	for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if skip != nil && bytes.Equal(k, skip) {
			continue
		}
		since, key := splitTimeKey(k[len(prefix):])
		if !before.IsZero() && !since.Before(before) {
			return nil
		}
		h, err := tx.Handoff(key)
		if tx.skip(err, nil) { // listed apart (Store.Unreadable); the walk goes on
			continue
		}
		if err != nil {
			return fmt.Errorf("status index points at lead %s: %w", key, err)
		}
		if more, err := fn(h); err != nil || !more {
			return err
		}
	}
	return nil
}
