package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Timeline is everything recorded about one event, as one moment saw it.
type Timeline struct {
	Event Event
	Jobs  []Job // every job that followed from the event, oldest first, each with its attempts; never nil
	// Draft is the current draft (its newest version); nil when none was written yet.
	Draft *Draft
	// Drafts is every version, oldest first; never nil.
	Drafts []Draft
	// Outbox is the reply of the current draft once approved; nil before.
	Outbox *Outbox
	// Handoff is the event's lead; nil when it has none.
	Handoff *Handoff
	// AnsweredBy is the event whose draft answers this one, when the event
	// joined a turn another event's draft answers (Draft, Drafts and Outbox
	// are then that draft's); empty when the event's draft is its own.
	AnsweredBy string
}

// turnScan bounds how many of a lead's messages on either side of an event
// the timeline reads to find the draft of the turn the event joined.
const turnScan = 200

// Timeline reads the timeline of the event recorded under key in one read
// transaction, so that it never mixes two moments (a draft approved after
// its jobs were read, an outbox row without the decision that made it).
// ErrNotFound means no event has the key, and only that: a record the event's
// records name that cannot be read is damage, not absence.
func (s *Store) Timeline(key string) (Timeline, error) {
	var t Timeline
	err := s.view(func(tx *Tx) error {
		var err error
		t, err = timelineOf(tx, key)
		return err
	})
	if err != nil {
		return Timeline{}, fmt.Errorf("store: timeline of %s: %w", key, err)
	}
	return t, nil
}

func timelineOf(tx *Tx, key string) (Timeline, error) {
	ev, err := tx.EventByKey(key)
	if err != nil {
		return Timeline{}, err
	}
	t := Timeline{Event: ev}
	if t.Jobs, err = jobsOf(tx, ev.CorrelationID); err != nil {
		return Timeline{}, fmt.Errorf("jobs of %s cannot be read: %v", ev.CorrelationID, err)
	}
	if t.Jobs == nil {
		t.Jobs = []Job{}
	}
	switch h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID)); {
	case err == nil:
		t.Handoff = &h
	case !errors.Is(err, ErrNotFound):
		return Timeline{}, err
	}
	draftKey := ev.Key
	switch d, err := tx.DraftByEvent(ev.Key); {
	case err == nil:
		t.Draft = &d
	case !errors.Is(err, ErrNotFound):
		return Timeline{}, err
	case t.Handoff != nil:
		if draftKey, err = answeringEvent(tx, ev, *t.Handoff); err != nil {
			return Timeline{}, err
		}
		if draftKey != ev.Key {
			t.AnsweredBy = draftKey
			if d, err := tx.DraftByEvent(draftKey); err == nil {
				t.Draft = &d
			} else if !errors.Is(err, ErrNotFound) {
				return Timeline{}, err
			}
		}
	}
	if t.Drafts = draftsOf(tx, draftKey); t.Drafts == nil {
		t.Drafts = []Draft{}
	}
	if t.Draft != nil && t.Draft.OutboxID != "" {
		o, err := tx.Outbox(t.Draft.OutboxID)
		if err != nil {
			return Timeline{}, fmt.Errorf("draft %s names outbox row %s, which cannot be read: %v", t.Draft.ID, t.Draft.OutboxID, err)
		}
		t.Outbox = &o
	}
	return t, nil
}

// answeringEvent is the event whose draft answers ev, a message with no
// draft of its own: the open turn's when ev is in it, else the nearest of
// the lead's messages (up to turnScan on either side) with a draft that
// lists ev, preferring one that was not superseded; ev.Key when none does.
func answeringEvent(tx *Tx, ev Event, h Handoff) (string, error) {
	if h.TurnDraft != "" && slices.Contains(h.TurnEvents, ev.Key) {
		return h.TurnDraft, nil
	}
	prefix := append([]byte(h.Key), 0)
	found, superseded := "", ""
	look := func(k []byte) (bool, error) {
		e, err := tx.Event(string(k[len(prefix):]))
		if err != nil {
			return false, err
		}
		d, err := tx.DraftByEvent(e.Key)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		if err != nil || !slices.Contains(d.AnsweredEvents(), ev.Key) {
			return false, err
		}
		if d.Status != DraftSuperseded {
			found = e.Key
			return true, nil
		}
		if superseded == "" {
			superseded = e.Key
		}
		return false, nil
	}
	c := tx.bucket(bucketEventsByConv).Cursor()
	start := convKey(h.Key, ev.ID)
	n := 0
	for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix) && n < turnScan; k, _ = c.Next() {
		if done, err := look(k); err != nil || done {
			return found, err
		}
		n++
	}
	c.Seek(start)
	n = 0
	for k, _ := c.Prev(); k != nil && bytes.HasPrefix(k, prefix) && n < turnScan; k, _ = c.Prev() {
		if done, err := look(k); err != nil || done {
			return found, err
		}
		n++
	}
	if superseded != "" {
		return superseded, nil
	}
	return ev.Key, nil
}
