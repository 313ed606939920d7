package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/handoff/handoff/jsonbody"
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
	// ReplyTo is where in the channel the message was written, where the
	// channel maps it: a reply goes there rather than to the contact's
	// own chat. nil for records written before it and for channels that
	// map none. The lead (ConversationID) does not depend on it.
	ReplyTo *ReplyTo `json:"reply_to,omitempty"`
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
	Unreadable string    `json:"unreadable,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// SentAt is when the provider says the customer wrote the message,
	// where the channel's preset reads it (WhatsApp's, Messenger's and
	// Instagram's timestamp); nil: it does not say. See Wrote.
	SentAt           *time.Time `json:"sent_at,omitempty"`
	Duplicates       int        `json:"duplicates"`
	FirstDuplicateAt *time.Time `json:"first_duplicate_at,omitempty"`
	LastDuplicateAt  *time.Time `json:"last_duplicate_at,omitempty"`
}

// Wrote is when the customer wrote e, as far as handoff knows: the
// provider's own time of the message (SentAt) where it gives one, else
// when handoff received it. A reply window counts from it, so it is never
// later than the receipt: a provider clock ahead of ours would otherwise
// leave a window that closes after the provider's.
func (e Event) Wrote() time.Time {
	if e.SentAt != nil && e.SentAt.Before(e.ReceivedAt) {
		return *e.SentAt
	}
	return e.ReceivedAt
}

// ReplyTo is where an inbound message sits in its channel: the chat or
// channel it was written in (a Telegram group, a Slack channel), the
// message itself (a Telegram message_id, an email's Message-ID) and the
// thread it belongs to (a Slack thread_ts). Each is optional.
type ReplyTo struct {
	Chat      string `json:"chat,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Thread    string `json:"thread,omitempty"`
}

// Recorded is the answer to an ingest (leads.Record): the stored event,
// whether this call created it, and the live draft job of its turn.
type Recorded struct {
	Event   Event
	Created bool
	Job     Job
}

// Encoded is an event and its draft job, encoded for Record.
type Encoded struct {
	ev     Event
	evRaw  []byte
	j      Job
	jobRaw []byte
}

// UpdateIngest is Update for fn, the ingest of es (leads.RecordTx of
// each): on PostgreSQL the round first reads, for every caller in it, the
// keys an ingest reads (the event's dedup key, its lead, its draft job's
// unique key, the counts it moves), one round trip per bucket instead of one per read
// (engine.Prefetcher). What fn reads and writes is as with Update.
func (s *Store) UpdateIngest(ctx context.Context, es []*Encoded, fn func(tx *Tx) error) error {
	if s.writes == nil {
		return ErrReadOnly
	}
	if s.pg == nil {
		return s.update(ctx, fn) // bbolt reads from memory: nothing to gain
	}
	reads := make([]readKey, 0, 5*len(es))
	for _, e := range es {
		lead := LeadKey(e.ev.Channel, e.ev.ConversationID)
		reads = append(reads,
			readKey{bucketEventsByKey, []byte(e.ev.Key)},
			readKey{bucketHandoffs, []byte(lead)},
			readKey{bucketJobsUnique, uniqueKey(e.j.Kind, e.j.Key)},
			// The counts it moves: its job's kind ready, a new lead's.
			readKey{bucketMeta, jobCountKey(e.j.Kind, JobAvailable)},
			readKey{bucketMeta, leadCountKey("received", lead)})
	}
	return s.updateReading(ctx, reads, fn)
}

// EncodeEvent encodes ev and the job to enqueue with it, in the caller's
// goroutine: the committer is the one serial step of every webhook, so
// the ingest's write only copies bytes.
func EncodeEvent(ev Event, job NewJob) (*Encoded, error) { return encodeEvent(ev, false, job) }

// EncodeEventJSON is EncodeEvent for an event whose body is body, the
// request's bytes as the webhook's parser decoded them (hook.Payload.Valid):
// ev.Body is set to them, and the proof stands in for the json.Valid scan
// EncodeEvent makes of a body. ev.BodyText must be empty.
func EncodeEventJSON(ev Event, body jsonbody.Valid, job NewJob) (*Encoded, error) {
	if body.Bytes() == nil || ev.BodyText != "" {
		return nil, fmt.Errorf("store: record event %s: a body proven JSON needs its bytes and no body_text", ev.Key)
	}
	ev.Body = body.Bytes()
	return encodeEvent(ev, true, job)
}

// encodeEvent is EncodeEvent; bodyValid: ev.Body is proven one JSON value.
func encodeEvent(ev Event, bodyValid bool, job NewJob) (*Encoded, error) {
	ev.V = recordVersion
	ev.canonical()                         // the strings as every read returns them
	evRaw, err := ev.encodeBody(bodyValid) // the body stored once: bodyonce.go
	if err != nil {
		return nil, fmt.Errorf("store: record event %s: %w", ev.Key, err)
	}
	j := newJob(job, ev.CorrelationID, ev.ReceivedAt)
	jobRaw, err := encode(&j) // its stored form: jobform.go
	if err != nil {
		return nil, fmt.Errorf("store: record event %s: %w", ev.Key, err)
	}
	return &Encoded{ev: ev, evRaw: evRaw, j: j, jobRaw: jobRaw}, nil
}

// recordEvent is Tx.Record: the event's write, with ev already encoded as
// evRaw.
func recordEvent(tx *Tx, ev *Event, evRaw []byte) (Recorded, error) {
	if first, err := tx.EventByKey(ev.Key); err == nil {
		return recordDuplicate(tx, first, ev.ReceivedAt)
	} else if !errors.Is(err, ErrNotFound) {
		return Recorded{}, err
	}
	if err := eventsTable.insertRaw(tx, ev, evRaw); err != nil {
		return Recorded{}, err
	}
	return Recorded{Event: *ev, Created: true}, nil
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
		var err error
		n, err = tx.EventSize(key)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: event %s: %w", key, err)
	}
	return n, nil
}

// EventSize is Store.EventSize inside tx.
func (tx *Tx) EventSize(key string) (int, error) {
	id := tx.bucket(bucketEventsByKey).Get([]byte(key))
	if id == nil {
		return 0, ErrNotFound
	}
	v := tx.bucket(bucketEvents).Get(id)
	if v == nil {
		return 0, ErrNotFound
	}
	return len(v), nil
}

// event reads the event with ULID id: ErrNotFound when there is none.
func (tx *Tx) event(id string) (Event, error) { return eventsTable.get(tx, []byte(id)) }

// putEvent writes ev over old, the event as read in this transaction (nil:
// ev is a new event, refused if its id is taken; a caller checks
// EventByKey first, as RecordEvent does), moving its index entries.
func (tx *Tx) putEvent(old, ev *Event) error { return eventsTable.put(tx, old, ev) }

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
		var err error
		out, err = tx.Conversation(lead, beforeID, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: conversation %s: %w", lead, err)
	}
	return out, nil
}

// Conversation is Store.Conversation inside tx.
func (tx *Tx) Conversation(lead, beforeID string, limit int) ([]Event, error) {
	var out []Event
	c := tx.bucket(bucketEventsByConv).Cursor()
	prefix := append([]byte(lead), 0)
	k, _ := c.Seek(convKey(lead, beforeID))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Prev() {
		ev, err := tx.event(string(k[len(prefix):]))
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	slices.Reverse(out)
	return out, nil
}
