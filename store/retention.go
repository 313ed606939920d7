package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// retentionChunk bounds one pruning transaction, so webhooks never wait
// long behind it for the write lock.
const retentionChunk = 200

// PruneEvents deletes events received before cutoff together with their
// finished jobs, decided drafts and finished replies, a chunk per
// transaction. An event whose work is still in flight (a live job, a draft
// waiting for a person, a reply not yet sent or failed) is kept whatever its
// age. Leads and their history are kept. Deleting an event forgets its
// dedup key: that is the end of the dedup window. It returns how many
// events it deleted.
func (s *Store) PruneEvents(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	var after []byte
	for {
		n, last, err := s.pruneEventsChunk(ctx, cutoff, after)
		total += n
		if err != nil || last == nil {
			return total, err
		}
		after = last
	}
}

func (s *Store) pruneEventsChunk(ctx context.Context, cutoff time.Time, after []byte) (int, []byte, error) {
	var (
		n    int
		last []byte
	)
	err := s.update(ctx, func(tx *Tx) error {
		n, last = 0, nil
		c := tx.bucket(bucketEvents).Cursor()
		k, v := c.First()
		if after != nil {
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		var doomed []Event
		seen := 0
		for ; k != nil && seen < retentionChunk; k, v = c.Next() {
			var ev Event
			if err := decode(v, &ev); err != nil {
				return fmt.Errorf("event %s: %w", k, err)
			}
			if !ev.ReceivedAt.Before(cutoff) {
				break // seen < retentionChunk here, so last is cleared below
			}
			seen++
			last = bytes.Clone(k)
			if ok, err := finished(tx, ev); err != nil {
				return err
			} else if ok {
				doomed = append(doomed, ev)
			}
		}
		for _, ev := range doomed {
			if err := deleteEvent(tx, ev); err != nil {
				return err
			}
		}
		n = len(doomed)
		if seen < retentionChunk {
			last = nil
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("store: prune events: %w", err)
	}
	return n, last, nil
}

// finished reports whether nothing about ev is still in flight.
func finished(tx *Tx, ev Event) (bool, error) {
	jobs, err := jobsOf(tx, ev.CorrelationID)
	if err != nil {
		return false, err
	}
	for _, j := range jobs {
		if !j.State.Final() || j.State == JobDiscarded { // a dismissed job is cancelled
			return false, nil // live, or on the dead-letter list
		}
	}
	for _, d := range draftsOf(tx, ev.Key) {
		if d.Status == DraftPending {
			return false, nil
		}
		if d.OutboxID != "" {
			o, err := tx.Outbox(d.OutboxID)
			if err != nil {
				return false, err
			}
			if o.Status != OutboxSent && !(o.Status == OutboxFailed && o.Dismissed != nil) {
				return false, nil
			}
		}
	}
	return true, nil
}

// draftsOf returns every draft version of an event.
func draftsOf(tx *Tx, eventKey string) []Draft { return draftsOfSkipping(tx, eventKey, nil) }

// draftsOfSkipping is draftsOf, stepping over a version that cannot be
// read (added to skipped): the versions after it are still listed.
func draftsOfSkipping(tx *Tx, eventKey string, skipped *[]Unreadable) []Draft {
	evID := tx.bucket(bucketEventsByKey).Get([]byte(eventKey))
	if evID == nil {
		return nil
	}
	var out []Draft
	for n := 1; ; n++ {
		d, err := tx.Draft(draftVersionID(string(evID), n))
		if tx.skip(err, skipped) {
			continue
		}
		if err != nil {
			return out
		}
		out = append(out, d)
	}
}

// deleteEvent removes an event and everything that hangs off it but its lead.
func deleteEvent(tx *Tx, ev Event) error {
	jobs, err := jobsOf(tx, ev.CorrelationID)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := tx.DeleteJob(&j); err != nil {
			return err
		}
	}
	for _, d := range draftsOf(tx, ev.Key) {
		if d.OutboxID != "" {
			if o, err := tx.Outbox(d.OutboxID); err == nil {
				if err := tx.DeleteOutbox(&o); err != nil {
					return err
				}
			}
		}
		if err := tx.deleteDraft(&d); err != nil {
			return err
		}
	}
	// The current draft's idx_drafts_by_event entry went with it above;
	// this removes one that outlived its draft.
	if err := tx.bucket(bucketDraftsByEvent).Delete([]byte(ev.Key)); err != nil {
		return err
	}
	return eventsTable.delete(tx, &ev)
}

// PruneOutside deletes what retention would otherwise never reach, older
// than cutoff: finished stuck-lead alerts (their outbox rows and delivery
// jobs; they hang off no event), the sandbox's record of what it
// received, and the delivery receipts whose latest status is older and
// whose outbox row is gone or was never known (a receipt about a kept row
// goes with the row: Tx.DeleteOutbox). It returns how many records it
// deleted.
func (s *Store) PruneOutside(ctx context.Context, cutoff time.Time) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *Tx) error {
		n = 0
		var alerts []Outbox
		for _, st := range []OutboxStatus{OutboxSent, OutboxFailed} {
			prefix := append([]byte(st), 0)
			c := tx.bucket(bucketOutboxByStatus).Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(alerts) < retentionChunk; k, _ = c.Next() {
				o, err := tx.Outbox(string(k[len(prefix):]))
				if err != nil {
					return err
				}
				if (o.Kind == OutboxAlert || o.Kind == OutboxCRM || o.Kind == OutboxEvent) && o.UpdatedAt.Before(cutoff) && (st == OutboxSent || o.Dismissed != nil) {
					alerts = append(alerts, o)
				}
			}
		}
		for _, o := range alerts {
			if err := deleteAlert(tx, o); err != nil {
				return err
			}
			n++
		}
		sandbox := tx.bucket(bucketSandbox)
		var old [][]byte
		c := sandbox.Cursor()
		for k, v := c.First(); k != nil && len(old) < retentionChunk; k, v = c.Next() {
			var m SandboxMessage
			if json.Unmarshal(v, &m) == nil && m.ReceivedAt.Before(cutoff) {
				old = append(old, bytes.Clone(k))
			}
		}
		for _, k := range old {
			if err := sandbox.Delete(k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune alerts and sandbox: %w", err)
	}
	// Receipts come with every send, so they go a chunk per transaction
	// until none is left, as events do.
	var after []byte
	for {
		var got int
		var last []byte
		err := s.update(ctx, func(tx *Tx) error {
			var err error
			got, last, err = pruneReceipts(tx, cutoff, after, retentionChunk)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("store: prune receipts: %w", err)
		}
		n += got
		if last == nil {
			return n, nil
		}
		after = last
	}
}

// deleteAlert removes a finished alert row and its finished delivery jobs.
func deleteAlert(tx *Tx, o Outbox) error {
	jobs, err := jobsOf(tx, o.CorrelationID)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Key == o.ID && j.State.Final() {
			if err := tx.DeleteJob(&j); err != nil {
				return err
			}
		}
	}
	return tx.DeleteOutbox(&o)
}
