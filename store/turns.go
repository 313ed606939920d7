package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// A conversation turn is the inbound messages of one lead since its last
// approved reply (or since it was closed), with at most one live draft; the
// lead record keeps the open turn (Handoff.Turn, TurnEvents, TurnDraft).
// The rules that open, join and end a turn are the leads package's
// (leads/turns.go); this file keeps what they write through (EnqueueEncoded,
// HoldBehind, Skip) and the reads of a turn (TurnOf, CurrentDraftID, DraftingFor).

// DraftJob is the draft job e carries for its event, as encoded, and its
// JSON: what leads.ReceiveTx enqueues, or joins to the turn's queued one.
func (e *Encoded) DraftJob() (*Job, []byte) { return &e.j, e.jobRaw }

// Key is the event key of the event e carries.
func (e *Encoded) Key() string { return e.ev.Key }

// EnqueueEncoded enqueues j, whose JSON is raw (nil: encoded here), unless
// a live job of its kind and business key exists: then it returns that job
// and false.
func (tx *Tx) EnqueueEncoded(j *Job, raw []byte) (Job, bool, error) {
	return enqueueEncoded(tx, j, raw)
}

// HoldBehind makes j, about to be enqueued, wait for running, the same
// lead's draft job being written now: j is due once running's attempt ends
// (that transaction releases it). It returns running as it must be stored,
// naming j as its follower.
func HoldBehind(j *Job, running Job) Job { return waitFor(j, running) }

// Skip reports whether err is an unreadable record's, noting it for the
// unreadable list (Store.Unreadable): a walk steps over such a record.
func (tx *Tx) Skip(err error) bool { return tx.skip(err, nil) }

// Turn is what a draft job reads of its lead's turn.
type Turn struct {
	Lead Handoff
	// Current is false when the turn no longer waits for this job's draft:
	// a newer message moved it on to another draft, or it ended (approved,
	// closed). Such a job has nothing to draft.
	Current bool
	// Events are the turn's messages, in the order they were recorded (the
	// job's own event alone on a lead from before turns were kept).
	Events []Event
}

// Keys are the event keys of the turn's messages.
func (t Turn) Keys() []string {
	keys := make([]string, len(t.Events))
	for i, ev := range t.Events {
		keys[i] = ev.Key
	}
	return keys
}

// TurnOf reads the turn that the draft of event eventKey answers.
func (tx *Tx) TurnOf(eventKey string) (Turn, error) {
	ev, err := tx.EventByKey(eventKey)
	if err != nil {
		return Turn{}, err
	}
	h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID))
	if err != nil {
		return Turn{}, fmt.Errorf("lead of %s: %w", eventKey, err)
	}
	t := Turn{Lead: h}
	switch {
	case h.Turn == 0:
		t.Current, t.Events = true, []Event{ev}
	case h.TurnDraft == eventKey:
		t.Current = true
		for _, k := range h.TurnEvents {
			e, err := tx.EventByKey(k)
			if errors.Is(err, ErrNotFound) && k != eventKey {
				continue // retention took an old message of a turn left open
			}
			if err != nil {
				return Turn{}, fmt.Errorf("event %s of the turn of lead %s: %w", k, h.Key, err)
			}
			t.Events = append(t.Events, e)
		}
	}
	return t, nil
}

// CurrentDraftID names the draft that answers the open turn of lead h: the
// stored draft of its TurnDraft event, or the id that draft will have once
// written. Empty when no turn is open.
func (tx *Tx) CurrentDraftID(h Handoff) (string, error) {
	if h.TurnDraft == "" {
		return "", nil
	}
	switch d, err := tx.DraftByEvent(h.TurnDraft); {
	case err == nil:
		return d.ID, nil
	case !errors.Is(err, ErrNotFound):
		return "", err
	}
	ev, err := tx.EventByKey(h.TurnDraft)
	if err != nil {
		return "", fmt.Errorf("event %s of lead %s: %w", h.TurnDraft, h.Key, err)
	}
	return DraftID(ev.ID), nil
}

// Drafting is what the approval queue says about replies not drafted yet:
// how many messages wait for a draft, and whether drafting is failing.
type Drafting struct {
	Messages int // messages in open turns whose draft is not written yet
	Leads    int // leads those messages are from
	// Failing counts those leads whose draft job's last attempt failed
	// (retrying, or out of attempts: a dead letter), since FailingSince,
	// the first failure among them; LastError is the newest failure's.
	Failing      int
	FailingSince time.Time
	LastError    string
	// Failed names up to failedShown events whose draft job ran out of
	// attempts: a person can draft them again or close them.
	Failed []string
	// Partial: more draft jobs than draftingScan, so the numbers are a floor.
	Partial bool
}

// draftingScan bounds the draft jobs one overview reads, of each list
// (each costs its job, event, lead and draft): a backlog past it shows as
// "at least" (Partial).
const (
	draftingScan = 300
	failedShown  = 5
)

// DraftingFor reads the Drafting of the channels v sees (Everything: all).
func (s *Store) DraftingFor(v Visible) (Drafting, error) {
	var out Drafting
	err := s.view(func(tx *Tx) error {
		out = Drafting{}
		var lastAt time.Time
		seen := map[string]bool{}
		see := func(j Job) error {
			if seen[j.Key] {
				return nil // an older dead job of a turn already counted
			}
			seen[j.Key] = true
			if !v.Key(j.Key) {
				return nil // another client's
			}
			ev, err := tx.EventByKey(j.Key)
			if errors.Is(err, ErrNotFound) || tx.skip(err, nil) {
				return nil // the event went with retention, or cannot be read (listed apart)
			}
			if err != nil {
				return err
			}
			h, err := tx.Handoff(LeadKey(ev.Channel, ev.ConversationID))
			if tx.skip(err, nil) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("lead of %s: %w", j.Key, err)
			}
			waiting := len(h.TurnEvents)
			if h.Turn == 0 {
				waiting = 1 // a lead from before turns were kept
			} else if h.TurnDraft != j.Key {
				return nil // the turn moved on, or ended
			}
			if d, err := tx.DraftByEvent(j.Key); err == nil && d.Status == DraftPending {
				return nil // waiting for a person, not for a draft
			}
			out.Leads++
			out.Messages += waiting
			if j.LastError == "" || j.State == JobRunning && j.Attempt <= 1 {
				return nil
			}
			out.Failing++
			for _, a := range j.Attempts {
				if a.Error != "" && a.EndedAt != nil {
					if out.FailingSince.IsZero() || a.EndedAt.Before(out.FailingSince) {
						out.FailingSince = *a.EndedAt
					}
					break
				}
			}
			if j.UpdatedAt.After(lastAt) {
				lastAt, out.LastError = j.UpdatedAt, j.LastError
			}
			if j.State == JobDiscarded && len(out.Failed) < failedShown {
				out.Failed = append(out.Failed, j.Key)
			}
			return nil
		}
		prefix := append([]byte(KindDraft), 0)
		c := tx.bucket(bucketJobsUnique).Cursor()
		n := 0
		for k, val := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
			if !v.Key(string(k[len(prefix):])) {
				continue // another client's: its key (the event's) says so, undecoded
			}
			if n++; n > draftingScan {
				out.Partial = true
				break
			}
			j, err := tx.Job(string(val))
			if tx.skip(err, nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("unique index points at job %s: %w", val, err)
			}
			if err := see(j); err != nil {
				return err
			}
		}
		n = 0
		dc := tx.bucket(bucketJobsDead).Cursor()
		for k, _ := dc.Last(); k != nil; k, _ = dc.Prev() { // newest first
			if n++; n > draftingScan {
				out.Partial = true
				break
			}
			j, err := tx.Job(string(k))
			if tx.skip(err, nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("dead-letter index points at job %s: %w", k, err)
			}
			if j.Kind != KindDraft {
				continue
			}
			if _, err := tx.LiveJob(KindDraft, j.Key); err == nil {
				continue // drafted again: counted above
			}
			if err := see(j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Drafting{}, fmt.Errorf("store: drafting: %w", err)
	}
	return out, nil
}
