package store

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// HandoffStatus is how far one lead's current cycle has got.
type HandoffStatus string

// The handoff states of the spec, in order.
const (
	HandoffReceived HandoffStatus = "received"
	HandoffMatched  HandoffStatus = "matched"
	HandoffOwned    HandoffStatus = "owned"
	HandoffReplied  HandoffStatus = "replied"
	// HandoffClosed ends a turn without a reply (a person closed it, with a
	// reason); a new message reopens the lead at received.
	HandoffClosed HandoffStatus = "closed"
)

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
	// last: a new one waits while it runs (store/turns.go), so a lead has
	// one draft written at a time. Empty on a lead recorded before.
	DraftJob string `json:"draft_job,omitempty"`
	// Closed says who closed the lead without a reply, when and why; nil
	// unless the status is closed.
	Closed *Closure `json:"closed,omitempty"`
	// Name is the name the latest of the lead's messages that gave one
	// gave; the search finds leads by it (schema 7 on).
	Name string `json:"name,omitempty"`
}

// Closure is a person's decision to end a lead's turn without a reply.
type Closure struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Stuck reports whether the lead's current stay has been flagged.
func (h Handoff) Stuck() bool { return h.StuckSince != nil && h.StuckSince.Equal(h.Since) }

// LeadKey names the lead an event belongs to.
func LeadKey(channel, conversationID string) string { return channel + ":" + conversationID }

// The lead's moves that other concepts cause run here, inside the record
// operation that justifies them (Record: received, with the turn rules of store/turns.go; InsertDraft: matched,
// owned; ReplyLead: replied), and not yet as leads.On…Tx functions: their
// callers (review, delivery, and every fixture that records through
// RecordEvent) must switch in the same change, so that each rule lives in
// one place. Stuck detection is leads' (leads.FlagStuck over EachHandoff).

// moveHandoff puts h into status at now, recording the transition and
// keeping idx_handoffs_by_status in step. It is only ever called inside the
// transaction that stores what justifies the move.
func moveHandoff(tx *Tx, h *Handoff, status HandoffStatus, now time.Time, eventKey, note string) error {
	var old *Handoff // nil: a new lead, which receiveTurn found absent
	if h.Status != "" {
		o := *h
		old = &o
	}
	return moveHandoffFrom(tx, old, h, status, now, eventKey, note)
}

// moveHandoffFrom is moveHandoff for a caller that changed more of h than
// the status (its contact, its name: idx_handoffs_by_term follows them):
// old is the lead as stored, nil for a new one.
func moveHandoffFrom(tx *Tx, old, h *Handoff, status HandoffStatus, now time.Time, eventKey, note string) error {
	h.Status, h.Since = status, now
	h.History = append(slices.Clip(h.History), Transition{Cycle: h.Cycle, Status: status, At: now, EventKey: eventKey, Note: note})
	if old == nil {
		return handoffsTable.insert(tx, h)
	}
	return tx.PutHandoff(old, h)
}

// Handoff reads one lead by key: ErrNotFound when there is none.
func (tx *Tx) Handoff(key string) (Handoff, error) { return handoffsTable.get(tx, []byte(key)) }

// PutHandoff writes h over old, the lead as read in this transaction (nil:
// h is a new lead), moving its status index entry.
func (tx *Tx) PutHandoff(old, h *Handoff) error { return handoffsTable.put(tx, old, h) }

func handoffStatusKey(s HandoffStatus, since time.Time, key string) []byte {
	return append(append([]byte(s), 0), timeKey(since, key)...)
}

// advanceOnDraft moves a lead forward once a draft is stored: matched when a
// contact is identified, owned when routing named an owner.
func advanceOnDraft(tx *Tx, d Draft, contact string, now time.Time) error {
	h, err := tx.Handoff(LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of %s: %w", d.EventKey, err)
	}
	if h.Status == HandoffReceived && (contact != "" || d.Fields["email"] != "" || d.Fields["phone"] != "") {
		old := h
		if contact == "" {
			contact = d.Fields["email"]
		}
		if contact == "" {
			contact = d.Fields["phone"]
		}
		h.Contact = contact
		if err := moveHandoffFrom(tx, &old, &h, HandoffMatched, now, d.EventKey, "contact identified"); err != nil {
			return err
		}
	}
	if h.Status == HandoffMatched && d.Owner != "" {
		h.Owner = d.Owner
		return moveHandoff(tx, &h, HandoffOwned, now, d.EventKey, "routed to "+d.Owner+" by "+d.RuleVersion+" "+d.Rule)
	}
	return nil
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

// HandoffFilter selects leads for Handoffs.
type HandoffFilter struct {
	Status HandoffStatus // empty: every status
	// SinceBefore keeps only leads that entered their status before this time (stuck leads).
	SinceBefore time.Time
	Limit       int
	// Only, when set, keeps the leads of the channels it sees (a person
	// limited to clients); nil lists every channel's.
	Only *Visible
}

// Handoffs lists leads by status, longest in their status first.
func (s *Store) Handoffs(f HandoffFilter) ([]Handoff, error) {
	statuses := []HandoffStatus{HandoffReceived, HandoffMatched, HandoffOwned, HandoffReplied, HandoffClosed}
	if f.Status != "" {
		statuses = []HandoffStatus{f.Status}
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	out := []Handoff{}
	err := s.view(func(tx *Tx) error {
		for _, st := range statuses {
			err := tx.EachHandoff(st, f.SinceBefore, func(h Handoff) (bool, error) {
				if f.Only != nil && !f.Only.Key(h.Key) {
					return true, nil
				}
				out = append(out, h)
				return len(out) < f.Limit, nil
			})
			if err != nil || len(out) >= f.Limit {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list leads: %w", err)
	}
	return out, nil
}

// EachHandoff calls fn for every lead in status that entered it before
// before (zero: every one), longest in the status first, until fn answers
// false or an error. It walks idx_handoffs_by_status, so the leads past a
// threshold cost one seek: the stuck-lead scan (leads.FlagStuck).
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
