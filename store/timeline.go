package store

import (
	"errors"
	"fmt"
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
}

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
	switch d, err := tx.DraftByEvent(ev.Key); {
	case err == nil:
		t.Draft = &d
	case !errors.Is(err, ErrNotFound):
		return Timeline{}, err
	}
	if t.Drafts = draftsOf(tx, ev.Key); t.Drafts == nil {
		t.Drafts = []Draft{}
	}
	if t.Draft != nil && t.Draft.OutboxID != "" {
		o, err := tx.Outbox(t.Draft.OutboxID)
		if err != nil {
			return Timeline{}, fmt.Errorf("draft %s names outbox row %s, which cannot be read: %v", t.Draft.ID, t.Draft.OutboxID, err)
		}
		t.Outbox = &o
	}
	switch h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID)); {
	case err == nil:
		t.Handoff = &h
	case !errors.Is(err, ErrNotFound):
		return Timeline{}, err
	}
	return t, nil
}
