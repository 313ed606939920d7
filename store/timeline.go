package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"
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
	// Unreadable is each record of the timeline but the event that cannot
	// be read: left out, the rest shown. An event that cannot be read is
	// Timeline's error, an *Unreadable.
	Unreadable []Unreadable
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
	if t.Jobs, err = jobsOfSkipping(tx, ev.CorrelationID, &t.Unreadable); err != nil {
		return Timeline{}, fmt.Errorf("jobs of %s cannot be read: %v", ev.CorrelationID, err)
	}
	if t.Jobs == nil {
		t.Jobs = []Job{}
	}
	switch h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID)); {
	case err == nil:
		t.Handoff = &h
	case tx.skip(err, &t.Unreadable):
	case !errors.Is(err, ErrNotFound):
		return Timeline{}, err
	}
	draftKey := ev.Key
	switch d, err := tx.DraftByEvent(ev.Key); {
	case err == nil:
		t.Draft = &d
	case tx.skip(err, &t.Unreadable):
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
			} else if !errors.Is(err, ErrNotFound) && !tx.skip(err, &t.Unreadable) {
				return Timeline{}, err
			}
		}
	}
	if t.Drafts = draftsOfSkipping(tx, draftKey, &t.Unreadable); t.Drafts == nil {
		t.Drafts = []Draft{}
	}
	if t.Draft != nil && t.Draft.OutboxID != "" {
		o, err := tx.Outbox(t.Draft.OutboxID)
		if tx.skip(err, &t.Unreadable) {
			return t, nil
		}
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
		e, err := tx.event(string(k[len(prefix):]))
		if tx.skip(err, nil) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		d, err := tx.DraftByEvent(e.Key)
		if errors.Is(err, ErrNotFound) || tx.skip(err, nil) {
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

// CardView is what the approval queue's card shows of a waiting draft,
// read in one read transaction so the conversation, the turn and the
// lead are of one moment.
type CardView struct {
	Event Event   // the draft's event
	Turn  []Event // every message the draft answers, oldest first
	Lead  Handoff
	// Conversation is the lead's messages and the replies sent (or on
	// their way) before and during the turn, oldest first, the turn's
	// messages marked; the earlier part bounded by the caller's limit.
	Conversation []Said
	// Drafting says a draft job of the lead's open turn is live.
	Drafting bool
	// Unreadable is each record of the card that cannot be read: left out
	// (the draft's event or lead then zero), the card shown without it.
	Unreadable []Unreadable
}

// Said is one line of a conversation: a customer's message or a reply.
type Said struct {
	At     time.Time
	Event  *Event  // a message the customer sent; nil for a reply
	Reply  *Outbox // a reply of ours; nil for a message
	InTurn bool    // the message is one the draft answers
}

// replyScan bounds the outbox rows a card reads for one conversation.
const replyScan = 200

// Card reads the card of draft d: its event, its turn, its lead and the
// conversation so far, with at most earlier lines before the turn.
func (s *Store) Card(d Draft, earlier int) (CardView, error) {
	var v CardView
	err := s.view(func(tx *Tx) error {
		var err error
		v, err = cardOf(tx, d, earlier)
		return err
	})
	if err != nil {
		return CardView{}, fmt.Errorf("store: card of draft %s: %w", d.ID, err)
	}
	return v, nil
}

func cardOf(tx *Tx, d Draft, earlier int) (CardView, error) {
	var v CardView
	var err error
	if v.Event, err = tx.EventByKey(d.EventKey); err != nil && !tx.skip(err, &v.Unreadable) {
		return v, err
	}
	answered := d.AnsweredEvents()
	for _, k := range answered {
		e, err := tx.EventByKey(k)
		if tx.skip(err, &v.Unreadable) {
			continue
		}
		if err != nil {
			return v, fmt.Errorf("message %s of draft %s: %w", k, d.ID, err)
		}
		v.Turn = append(v.Turn, e)
	}
	lead := LeadKey(d.Channel, d.ConversationID)
	if v.Lead, err = tx.Handoff(lead); err != nil && !tx.skip(err, &v.Unreadable) {
		return v, fmt.Errorf("lead %s: %w", lead, err)
	}
	if v.Lead.TurnDraft != "" {
		switch _, err := tx.LiveJob(KindDraft, v.Lead.TurnDraft); {
		case err == nil:
			v.Drafting = true
		case !errors.Is(err, ErrNotFound):
			return v, err
		}
	}
	// The messages before the turn, newest first, then the replies.
	var before []Said
	first := v.Event.ID
	if len(v.Turn) > 0 {
		first = v.Turn[0].ID
	}
	prefix := append([]byte(lead), 0)
	c := tx.bucket(bucketEventsByConv).Cursor()
	c.Seek(convKey(lead, first))
	for k, _ := c.Prev(); k != nil && bytes.HasPrefix(k, prefix) && len(before) < earlier+len(answered); k, _ = c.Prev() {
		e, err := tx.event(string(k[len(prefix):]))
		if tx.skip(err, &v.Unreadable) {
			continue
		}
		if err != nil {
			return v, err
		}
		if !slices.Contains(answered, e.Key) {
			before = append(before, Said{At: e.ReceivedAt, Event: &e})
		}
	}
	replies, err := repliesOf(tx, d.Channel, d.ConversationID, earlier, &v.Unreadable)
	if err != nil {
		return v, err
	}
	for i := range replies {
		before = append(before, Said{At: replies[i].saidAt(), Reply: &replies[i]})
	}
	slices.SortStableFunc(before, func(a, b Said) int { return b.At.Compare(a.At) })
	if len(before) > earlier {
		before = before[:earlier]
	}
	for i := range v.Turn {
		before = append(before, Said{At: v.Turn[i].ReceivedAt, Event: &v.Turn[i], InTurn: true})
	}
	slices.SortStableFunc(before, func(a, b Said) int { return a.At.Compare(b.At) })
	v.Conversation = before
	return v, nil
}

// saidAt is when a reply counts as said: when it was sent, else approved.
func (o Outbox) saidAt() time.Time {
	if o.SentAt != nil {
		return *o.SentAt
	}
	return o.CreatedAt
}

// repliesOf reads up to limit of the newest replies of a conversation:
// its outbox rows are "<conversation id>:<draft id>", so they are one
// prefix of the outbox bucket, oldest draft first. Rows of another
// channel's conversation of the same id, or of a conversation whose id
// only starts with this one's, are skipped; at most replyScan are read.
func repliesOf(tx *Tx, channel, conversationID string, limit int, skipped *[]Unreadable) ([]Outbox, error) {
	prefix := []byte(conversationID + ":")
	c := tx.bucket(bucketOutbox).Cursor()
	var out []Outbox
	for n, k := 0, lastWithPrefix(c, prefix); k != nil && bytes.HasPrefix(k, prefix) && n < replyScan && len(out) < limit; k, _ = c.Prev() {
		n++
		o, err := tx.Outbox(string(k))
		if tx.skip(err, skipped) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if o.Kind == "" && o.Channel == channel && o.ConversationID == conversationID {
			out = append(out, o)
		}
	}
	return out, nil
}

// DraftLine is what the queue's list shows of one waiting draft: its
// event and its lead (either zero when gone, as after retention).
type DraftLine struct {
	Event Event
	Lead  Handoff
	// Unreadable is the event or lead of the line that cannot be read (then zero).
	Unreadable []Unreadable
}

// DraftLines reads the event and the lead of each draft of ds, in one read
// transaction.
func (s *Store) DraftLines(ds []Draft) ([]DraftLine, error) {
	out := make([]DraftLine, len(ds))
	err := s.view(func(tx *Tx) error {
		for i, d := range ds {
			var line DraftLine
			ev, err := tx.EventByKey(d.EventKey)
			if err != nil && !errors.Is(err, ErrNotFound) && !tx.skip(err, &line.Unreadable) {
				return err
			}
			h, err := tx.Handoff(LeadKey(d.Channel, d.ConversationID))
			if err != nil && !errors.Is(err, ErrNotFound) && !tx.skip(err, &line.Unreadable) {
				return err
			}
			line.Event, line.Lead = ev, h
			out[i] = line
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: the queue's lines: %w", err)
	}
	return out, nil
}
