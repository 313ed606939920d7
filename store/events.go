package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// recordVersion is the version field of every JSON record this binary writes.
const recordVersion = 1

// Event is one inbound business event, recorded once per event key.
type Event struct {
	V              int    `json:"v"`
	ID             string `json:"id"`
	Key            string `json:"key"`
	Channel        string `json:"channel"`
	MessageID      string `json:"message_id"`
	CorrelationID  string `json:"correlation_id"`
	ConversationID string `json:"conversation_id"`
	Contact        string `json:"contact,omitempty"`
	Name           string `json:"name,omitempty"`
	Text           string `json:"text,omitempty"`
	// Subject is the inbound email's subject, where the channel maps one;
	// an email reply answers it ("Re: " + it).
	Subject     string `json:"subject,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// Body is the request body as received: JSON kept as JSON (no escaping,
	// half the bytes), anything else in BodyText.
	Body     json.RawMessage `json:"body,omitempty"`
	BodyText string          `json:"body_text,omitempty"`
	// TextAt is where Text sits in the stored body (bodyonce.go); Raw
	// names the field the bytes after the stored record fill ("body",
	// "body_text"). Both are the stored form's: nil and "" outside the store.
	TextAt *[2]int `json:"text_at,omitempty"`
	Raw    string  `json:"raw,omitempty"`
	// Unreadable, when set, says why this event's text could not be read
	// back from what a schema 8 file stored (migration 8, schema_repair.go):
	// the event is kept, body and all, with its text empty, and every read
	// of it is an *Unreadable with this reason (shown as one unreadable row).
	Unreadable       string     `json:"unreadable,omitempty"`
	ReceivedAt       time.Time  `json:"received_at"`
	Duplicates       int        `json:"duplicates"`
	FirstDuplicateAt *time.Time `json:"first_duplicate_at,omitempty"`
	LastDuplicateAt  *time.Time `json:"last_duplicate_at,omitempty"`
}

// Recorded is the answer to RecordEvent: the stored event and whether this call created it.
type Recorded struct {
	Event   Event
	Created bool
	Job     Job
}

// RecordEvent stores ev and enqueues job for it in one transaction, unless an
// event with the same key exists: then the first event is returned (with its
// duplicate count raised) and nothing else is written. ev.ID and
// ev.CorrelationID are minted by the caller; a duplicate discards them.
// It is EncodeEvent then Record; intake.Record is the webhook's way in.
func (s *Store) RecordEvent(ctx context.Context, ev Event, job NewJob) (Recorded, error) {
	e, err := EncodeEvent(ev, job)
	if err != nil {
		return Recorded{}, err
	}
	return s.Record(ctx, e)
}

// Encoded is an event and its draft job, encoded for Record.
type Encoded struct {
	ev     Event
	evRaw  []byte
	j      Job
	jobRaw []byte
}

// EncodeEvent encodes ev and the job to enqueue with it, in the caller's
// goroutine: the committer is the one serial step of every webhook, so
// Record's write only copies bytes.
func EncodeEvent(ev Event, job NewJob) (*Encoded, error) {
	ev.V = recordVersion
	ev.canonical()                  // the strings as every read returns them
	evRaw, err := ev.encodeRecord() // the body stored once: bodyonce.go
	if err != nil {
		return nil, fmt.Errorf("store: record event %s: %w", ev.Key, err)
	}
	j := newJob(job, ev.CorrelationID, ev.ReceivedAt)
	jobRaw, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("store: record event %s: %w", ev.Key, err)
	}
	return &Encoded{ev: ev, evRaw: evRaw, j: j, jobRaw: jobRaw}, nil
}

// Record is the ingest's one transaction: unless the event's key is taken,
// the event, its dedup and conversation index entries, its lead's move
// (received; a new cycle on a replied lead) and its job with their index
// entries; a duplicate raises the first event's count and writes nothing
// else.
//
// The lead's move stays here, not in a leads function, for now: every test
// fixture in review/, delivery/, jobs/ and web/ records through this call
// and relies on the lead existing, and the rule must live in one place.
func (s *Store) Record(ctx context.Context, e *Encoded) (Recorded, error) {
	var out Recorded
	err := s.update(ctx, func(tx *Tx) error {
		var err error
		out, err = recordEvent(tx, &e.ev, e.evRaw, &e.j, e.jobRaw)
		return err
	})
	if err != nil {
		return Recorded{}, fmt.Errorf("store: record event %s: %w", e.ev.Key, err)
	}
	return out, nil
}

// recordEvent is RecordEvent's write, with ev and j already encoded as
// evRaw and jobRaw: the committer's one step of every webhook.
func recordEvent(tx *Tx, ev *Event, evRaw []byte, j *Job, jobRaw []byte) (Recorded, error) {
	if first, err := tx.EventByKey(ev.Key); err == nil {
		return recordDuplicate(tx, first, ev.ReceivedAt)
	} else if !errors.Is(err, ErrNotFound) {
		return Recorded{}, err
	}
	if err := eventsTable.insertRaw(tx, ev, evRaw); err != nil {
		return Recorded{}, err
	}
	live, err := receiveTurn(tx, *ev, j, jobRaw) // the lead's move and its turn: store/turns.go
	if err != nil {
		return Recorded{}, err
	}
	return Recorded{Event: *ev, Created: true, Job: live}, nil
}

// recordDuplicate counts a duplicate received at at on the first event.
func recordDuplicate(tx *Tx, first Event, at time.Time) (Recorded, error) {
	old := first
	first.Duplicates++
	first.LastDuplicateAt = &at
	if first.FirstDuplicateAt == nil {
		first.FirstDuplicateAt = &at
	}
	return Recorded{Event: first}, eventsTable.put(tx, &old, &first)
}

// EventByKey returns the event recorded under key.
func (s *Store) EventByKey(key string) (Event, error) {
	var ev Event
	err := s.view(func(tx *Tx) error {
		var err error
		ev, err = tx.EventByKey(key)
		return err
	})
	if err != nil {
		return Event{}, fmt.Errorf("store: event %s: %w", key, err)
	}
	return ev, nil
}

// EventSize is the size in bytes of the event's stored value (its record
// and its body as received), read without decoding it: what drafting it
// is about to hold in memory, known before the read. ErrNotFound when the
// key names no event.
func (s *Store) EventSize(key string) (int, error) {
	n := 0
	err := s.view(func(tx *Tx) error {
		id := tx.bucket(bucketEventsByKey).Get([]byte(key))
		if id == nil {
			return ErrNotFound
		}
		v := tx.bucket(bucketEvents).Get(id)
		if v == nil {
			return ErrNotFound
		}
		n = len(v)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: event %s: %w", key, err)
	}
	return n, nil
}

// Event reads the event with ULID id: ErrNotFound when there is none.
func (tx *Tx) Event(id string) (Event, error) { return eventsTable.get(tx, []byte(id)) }

// PutEvent writes ev over old, the event as read in this transaction (nil:
// ev is a new event, refused if its id is taken; a caller checks
// EventByKey first, as RecordEvent does), moving its index entries.
func (tx *Tx) PutEvent(old, ev *Event) error { return eventsTable.put(tx, old, ev) }

// EventByKey reads the event recorded under its event key (the dedup
// index): ErrNotFound when there is none.
func (tx *Tx) EventByKey(key string) (Event, error) {
	return eventsTable.lookup(tx, &eventsByKey, []byte(key))
}

func convKey(lead, eventID string) []byte {
	return append(append([]byte(lead), 0), eventID...)
}

// Conversation returns up to limit events of the lead that came before the
// event beforeID, newest last: the context a drafter sees.
func (s *Store) Conversation(lead, beforeID string, limit int) ([]Event, error) {
	var out []Event
	err := s.view(func(tx *Tx) error {
		c := tx.bucket(bucketEventsByConv).Cursor()
		prefix := append([]byte(lead), 0)
		k, _ := c.Seek(convKey(lead, beforeID))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Prev() {
			ev, err := tx.Event(string(k[len(prefix):]))
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: conversation %s: %w", lead, err)
	}
	slices.Reverse(out)
	return out, nil
}
