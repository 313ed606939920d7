package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
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
	ContentType    string `json:"content_type,omitempty"`
	// Body is the request body as received: JSON kept as JSON (no escaping,
	// half the bytes), anything else in BodyText.
	Body             json.RawMessage `json:"body,omitempty"`
	BodyText         string          `json:"body_text,omitempty"`
	ReceivedAt       time.Time       `json:"received_at"`
	Duplicates       int             `json:"duplicates"`
	FirstDuplicateAt *time.Time      `json:"first_duplicate_at,omitempty"`
	LastDuplicateAt  *time.Time      `json:"last_duplicate_at,omitempty"`
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
func (s *Store) RecordEvent(ctx context.Context, ev Event, job NewJob) (Recorded, error) {
	// Encode the new records here, in the caller's goroutine: the committer
	// is the one serial step of every webhook, so it only copies bytes.
	ev.V = recordVersion
	evRaw, err := json.Marshal(ev)
	if err != nil {
		return Recorded{}, fmt.Errorf("store: record event %s: %w", ev.Key, err)
	}
	j := newJob(job, ev.CorrelationID, ev.ReceivedAt)
	jobRaw, err := json.Marshal(j)
	if err != nil {
		return Recorded{}, fmt.Errorf("store: record event %s: %w", ev.Key, err)
	}
	var out Recorded
	err = s.update(ctx, func(tx *bolt.Tx) error {
		out = Recorded{}
		byKey := tx.Bucket(bucketEventsByKey)
		events := tx.Bucket(bucketEvents)
		if id := byKey.Get([]byte(ev.Key)); id != nil {
			var first Event
			if err := getJSON(events, id, &first); err != nil {
				return fmt.Errorf("store: event %s indexed but unreadable: %w", ev.Key, err)
			}
			first.Duplicates++
			at := ev.ReceivedAt
			first.LastDuplicateAt = &at
			if first.FirstDuplicateAt == nil {
				first.FirstDuplicateAt = &at
			}
			out.Event = first
			return putJSON(events, id, first)
		}
		if err := events.Put([]byte(ev.ID), evRaw); err != nil {
			return err
		}
		if err := byKey.Put([]byte(ev.Key), []byte(ev.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketEventsByConv).Put(convKey(LeadKey(ev.Channel, ev.ConversationID), ev.ID), nil); err != nil {
			return err
		}
		if err := receiveOnHandoff(tx, ev); err != nil {
			return err
		}
		j, _, err := enqueueEncoded(tx, j, jobRaw)
		if err != nil {
			return err
		}
		out = Recorded{Event: ev, Created: true, Job: j}
		return nil
	})
	if err != nil {
		return Recorded{}, fmt.Errorf("store: record event %s: %w", ev.Key, err)
	}
	return out, nil
}

// EventByKey returns the event recorded under key.
func (s *Store) EventByKey(key string) (Event, error) {
	var ev Event
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		ev, err = eventByKey(tx, key)
		return err
	})
	if err != nil {
		return Event{}, fmt.Errorf("store: event %s: %w", key, err)
	}
	return ev, nil
}

// eventByKey reads the event recorded under key inside tx: ErrNotFound when
// there is none.
func eventByKey(tx *bolt.Tx, key string) (Event, error) {
	id := tx.Bucket(bucketEventsByKey).Get([]byte(key))
	if id == nil {
		return Event{}, ErrNotFound
	}
	var ev Event
	if err := getJSON(tx.Bucket(bucketEvents), id, &ev); err != nil {
		// A dangling index is damage, not absence: it must not read as ErrNotFound.
		return Event{}, fmt.Errorf("idx_events_by_key points at event %s, which cannot be read: %v", id, err)
	}
	return ev, nil
}

func convKey(lead, eventID string) []byte {
	return append(append([]byte(lead), 0), eventID...)
}

// Conversation returns up to limit events of the lead that came before the
// event beforeID, newest last: the context a drafter sees.
func (s *Store) Conversation(lead, beforeID string, limit int) ([]Event, error) {
	var out []Event
	err := s.view(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		c := tx.Bucket(bucketEventsByConv).Cursor()
		prefix := append([]byte(lead), 0)
		k, _ := c.Seek(convKey(lead, beforeID))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Prev() {
			var ev Event
			if err := getJSON(events, k[len(prefix):], &ev); err != nil {
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
