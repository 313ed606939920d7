package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Dead-letter kinds.
const (
	DeadJob    = "job"    // a job discarded after its last attempt
	DeadOutbox = "outbox" // a reply that failed or needs reconciliation
)

// DeadLetter is one item of the dead-letter list with what is known about
// it: prior attempts, the side effects already made, and whether a replay is
// safe, in a sentence. Whether resending a reply is safe is the delivery
// package's rule: the store describes an item that holds an outbox row
// (Outbox set) and leaves Safe, Why and Effects for delivery to fill in.
type DeadLetter struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Channel  string    `json:"channel"`
	EventKey string    `json:"event_key"`
	State    string    `json:"state"`
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
	Safe     bool      `json:"safe"`
	Why      string    `json:"why"`
	Effects  []string  `json:"effects"` // side effects known to have happened
	Job      *Job      `json:"job,omitempty"`
	Outbox   *Outbox   `json:"outbox,omitempty"`
	Draft    *Draft    `json:"draft,omitempty"`
}

// Replay records a person's request to run a dead letter again.
type Replay struct {
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	From       string    `json:"from,omitempty"`
	Regenerate bool      `json:"regenerate,omitempty"`
	Confirmed  bool      `json:"confirmed,omitempty"` // a person checked an item that may have been sent
}

// Dismissal takes an item off the dead-letter list, with a reason.
type Dismissal struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	From   string    `json:"from,omitempty"`
	Reason string    `json:"reason"`
}

// DeadLetterFilter selects dead letters.
type DeadLetterFilter struct {
	Kind      string // "", DeadJob or DeadOutbox
	Channel   string
	Error     string    // a substring of the error, case-insensitive
	OlderThan time.Time // only items in their state since before this
	Limit     int
}

// DeadLetters lists the dead-letter list, oldest first, as records: the
// replies' safety is delivery's to judge (delivery.DeadLetters).
func (s *Store) DeadLetters(f DeadLetterFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = 200
	}
	out := []DeadLetter{}
	err := s.view(func(tx *Tx) error {
		if f.Kind == "" || f.Kind == DeadJob {
			c := tx.bucket(bucketJobsDead).Cursor()
			for k, _ := c.First(); k != nil && len(out) < f.Limit; k, _ = c.Next() {
				dl, err := deadJob(tx, string(k))
				if err != nil {
					return err
				}
				if f.keep(dl) {
					out = append(out, dl)
				}
			}
		}
		if f.Kind == "" || f.Kind == DeadOutbox {
			for _, st := range []OutboxStatus{OutboxFailed, OutboxNeedsReconciliation} {
				err := tx.EachOutbox(st, func(o Outbox) error {
					if len(out) >= f.Limit {
						return errEnough
					}
					if dl := deadOutbox(o); f.keep(dl) {
						out = append(out, dl)
					}
					return nil
				})
				if err != nil && !errors.Is(err, errEnough) {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	return out, nil
}

func (f DeadLetterFilter) keep(dl DeadLetter) bool {
	if dl.State == "dismissed" {
		return false
	}
	if f.Channel != "" && dl.Channel != f.Channel {
		return false
	}
	if f.Error != "" && !strings.Contains(strings.ToLower(dl.Error), strings.ToLower(f.Error)) {
		return false
	}
	if !f.OlderThan.IsZero() && !dl.Since.Before(f.OlderThan) {
		return false
	}
	return true
}

// DeadLetter reads one item by job id (a discarded job) or outbox id (any
// row: which rows a person may act on is delivery's rule).
func (tx *Tx) DeadLetter(id string) (DeadLetter, error) {
	if j, err := tx.Job(id); err == nil && j.State == JobDiscarded { // not idx_jobs_dead's Get: its "" entries read as absent until committed
		return deadJob(tx, id)
	}
	o, err := tx.Outbox(id)
	if errors.Is(err, ErrNotFound) {
		return DeadLetter{}, fmt.Errorf("dead letter %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead outbox row %s: %w", id, err)
	}
	return deadOutbox(o), nil
}

// deadJob describes a discarded job.
func deadJob(tx *Tx, id string) (DeadLetter, error) {
	j, err := tx.Job(id)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead job %s: %w", id, err)
	}
	// A dismissed job is cancelled and off idx_jobs_dead, so it never gets here.
	dl := DeadLetter{ID: j.ID, Kind: DeadJob, State: string(j.State), Error: j.LastError, Since: j.UpdatedAt, Job: &j, Effects: []string{}}
	switch j.Kind {
	case KindDraft:
		dl.EventKey = j.Key
		if ev, err := tx.EventByKey(j.Key); err == nil {
			dl.Channel = ev.Channel
		}
		if d, err := tx.DraftByEvent(j.Key); err == nil {
			dl.Draft = &d
			dl.Effects = append(dl.Effects, "draft "+d.ID+" is stored ("+string(d.Status)+")")
			dl.Safe, dl.Why = true, "the draft is stored and will be reused: no model call"
		} else {
			dl.Safe, dl.Why = true, "no draft was stored, so the drafter is called again; nothing has reached the customer"
		}
	case KindDeliver:
		if o, err := tx.Outbox(j.Key); err == nil {
			dl.Outbox, dl.Channel, dl.EventKey = &o, o.Channel, o.EventKey // delivery judges it
		}
	default:
		dl.Safe, dl.Why = true, "a replay runs the job again under the same key"
	}
	return dl, nil
}

// deadOutbox describes a reply that failed or may have been sent.
func deadOutbox(o Outbox) DeadLetter {
	dl := DeadLetter{ID: o.ID, Kind: DeadOutbox, Channel: o.Channel, EventKey: o.EventKey, State: string(o.Status), Error: o.Note, Since: o.UpdatedAt, Outbox: &o}
	if len(o.Attempts) > 0 && dl.Error == "" {
		dl.Error = o.Attempts[len(o.Attempts)-1].Error
	}
	if o.Dismissed != nil {
		dl.State = "dismissed"
	}
	return dl
}

// ErrUnconfirmed refuses a replay that may repeat a side effect.
var ErrUnconfirmed = errors.New("the replay needs an explicit confirmation")

// ErrNotRegenerable refuses a regenerate of anything but a discarded draft
// job: a request that no state of the item and no confirmation can make succeed.
var ErrNotRegenerable = errors.New("only a draft job can be regenerated")

// NotRegenerableError names the item a regenerate was refused for; it is
// ErrNotRegenerable (like UnsafeReplayError is ErrUnconfirmed), with the
// sentence a caller can show as it is.
type NotRegenerableError struct {
	ID   string
	What string // "reply (outbox row)", "deliver job", ...
}

func (e *NotRegenerableError) Error() string {
	return fmt.Sprintf("%v; %s is a %s", ErrNotRegenerable, e.ID, e.What)
}

func (e *NotRegenerableError) Unwrap() error { return ErrNotRegenerable }

// UnsafeReplayError explains why a replay needs confirmation.
type UnsafeReplayError struct {
	ID, Why string
}

func (e *UnsafeReplayError) Error() string {
	return fmt.Sprintf("replaying %s is not known to be safe: %s; send {\"confirm\":%q} after checking", e.ID, e.Why, e.ID)
}

func (e *UnsafeReplayError) Unwrap() error { return ErrUnconfirmed }

// RetireJob closes a discarded delivery job as cancelled, recording the
// replay that gave its reply a fresh job.
func (tx *Tx) RetireJob(j *Job, r Replay) error {
	old := *j
	j.Replays = append(slices.Clip(j.Replays), r)
	j.UpdatedAt = r.At
	j.State = JobCancelled
	j.LastError = "replayed: its reply was requeued with a new delivery job"
	return tx.PutJob(&old, j)
}

// ReviveJob puts a discarded job back in the queue under the same key, with
// more attempts; a regenerate fixes the draft version to make.
func (tx *Tx) ReviveJob(j *Job, r Replay, more int) error {
	old := *j
	j.Replays = append(slices.Clip(j.Replays), r)
	j.UpdatedAt = r.At
	if live, err := tx.LiveJob(j.Kind, j.Key); err == nil {
		return &StateError{What: "job " + j.ID, State: "discarded while job " + live.ID + " for the same key is live", Want: "the only job for its key"}
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	j.State, j.RunAt, j.MaxAttempts = JobAvailable, r.At, j.Attempt+more
	if r.Regenerate {
		// The version to make is fixed now, so a retried attempt cannot make two.
		next := 1
		if d, err := tx.DraftByEvent(j.Key); err == nil {
			if d.Status == DraftApproved {
				return &StateError{What: "draft " + d.ID, State: "approved", Want: "pending or rejected to be regenerated"}
			}
			next = max(d.Version, 1) + 1
		}
		raw, err := json.Marshal(regenerateArgs{RegenerateVersion: next})
		if err != nil {
			return err
		}
		j.Payload = raw
	}
	return tx.PutJob(&old, j)
}

// regenerateArgs is the payload of a regenerated draft job: the fields of
// jobs.DraftArgs beyond its key, which the draft job decodes it as (a jobs
// test pins the two together). The store writes it only because
// delivery.Replay revives the job here and delivery cannot import jobs
// (jobs wires delivery's job kind): moving the regenerate to the queue is
// the next step of issue 12.
type regenerateArgs struct {
	RegenerateVersion int `json:"regenerate_version"`
}

// DismissJob takes a discarded job off the list with a reason: it becomes cancelled.
func (tx *Tx) DismissJob(j *Job, d Dismissal) error {
	old := *j
	j.State, j.Dismissed, j.UpdatedAt = JobCancelled, &d, d.At
	return tx.PutJob(&old, j)
}
