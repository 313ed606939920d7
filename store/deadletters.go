package store

import (
	"context"
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
// safe, in a sentence.
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

// DeadLetters lists the dead-letter list, oldest first.
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
			c := tx.bucket(bucketOutboxByStatus).Cursor()
			for _, st := range []OutboxStatus{OutboxFailed, OutboxNeedsReconciliation} {
				prefix := append([]byte(st), 0)
				for k, _ := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)) && len(out) < f.Limit; k, _ = c.Next() {
					dl, err := deadOutbox(tx, string(k[len(prefix):]))
					if err != nil {
						return err
					}
					if f.keep(dl) {
						out = append(out, dl)
					}
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

// DeadLetter returns one item by job id or outbox id.
func (s *Store) DeadLetter(id string) (DeadLetter, error) {
	var dl DeadLetter
	err := s.view(func(tx *Tx) error {
		var err error
		dl, err = findDeadLetter(tx, id)
		return err
	})
	return dl, err
}

func findDeadLetter(tx *Tx, id string) (DeadLetter, error) {
	if tx.bucket(bucketJobsDead).Get([]byte(id)) != nil {
		return deadJob(tx, id)
	}
	if outboxTable.has(tx, []byte(id)) {
		dl, err := deadOutbox(tx, id)
		if err != nil {
			return DeadLetter{}, err
		}
		switch OutboxStatus(dl.State) {
		case OutboxFailed, OutboxNeedsReconciliation, OutboxEffectPending:
			return dl, nil
		}
		return DeadLetter{}, &StateError{What: "outbox row " + id, State: dl.State, Want: "failed, needs_reconciliation or effect_pending to be replayed"}
	}
	return DeadLetter{}, fmt.Errorf("dead letter %s: %w", id, ErrNotFound)
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
			dl.Outbox, dl.Channel, dl.EventKey = &o, o.Channel, o.EventKey
			dl.Safe, dl.Why, dl.Effects = outboxSafety(o)
		}
	default:
		dl.Safe, dl.Why = true, "a replay runs the job again under the same key"
	}
	return dl, nil
}

// deadOutbox describes a reply that failed or may have been sent.
func deadOutbox(tx *Tx, id string) (DeadLetter, error) {
	o, err := tx.Outbox(id)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead outbox row %s: %w", id, err)
	}
	dl := DeadLetter{ID: o.ID, Kind: DeadOutbox, Channel: o.Channel, EventKey: o.EventKey, State: string(o.Status), Error: o.Note, Since: o.UpdatedAt, Outbox: &o}
	if len(o.Attempts) > 0 && dl.Error == "" {
		dl.Error = o.Attempts[len(o.Attempts)-1].Error
	}
	if o.Dismissed != nil {
		dl.State = "dismissed"
	}
	dl.Safe, dl.Why, dl.Effects = outboxSafety(o)
	return dl, nil
}

// outboxSafety says whether resending a reply is safe, and why.
func outboxSafety(o Outbox) (bool, string, []string) {
	effects := []string{"outbox row " + o.ID + " exists (" + string(o.Status) + ")"}
	unknown := 0
	for _, a := range o.Attempts {
		if a.Outcome == "ambiguous" {
			unknown++
		}
	}
	switch {
	case o.Status == OutboxFailed && unknown == 0 && len(o.Attempts) > 0 && o.Attempts[len(o.Attempts)-1].Outcome == "not_sent":
		return true, "the provider could not be reached and not one byte of it left, so it was not delivered; a replay sends it again with the same key", effects
	case o.Status == OutboxFailed && unknown == 0:
		return true, "the provider refused it permanently, so it was not delivered; a replay sends it again with the same key", effects
	case o.Status == OutboxPending:
		return true, "it was never sent", effects
	case o.Status == OutboxSent:
		return false, "it was sent (provider id " + o.ProviderID + "); there is nothing to replay", append(effects, "delivered as "+o.ProviderID)
	}
	return false, fmt.Sprintf("the provider may already have this message (%d attempt(s) with an unknown outcome): check it first, then confirm the replay or reconcile", unknown), append(effects, "sent to the provider with an unknown outcome")
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

// deadKind names what a dead letter is, for a sentence.
func deadKind(dl DeadLetter) string {
	if dl.Job != nil {
		return dl.Job.Kind + " job"
	}
	return "reply (outbox row)"
}

// UnsafeReplayError explains why a replay needs confirmation.
type UnsafeReplayError struct {
	ID, Why string
}

func (e *UnsafeReplayError) Error() string {
	return fmt.Sprintf("replaying %s is not known to be safe: %s; send {\"confirm\":%q} after checking", e.ID, e.Why, e.ID)
}

func (e *UnsafeReplayError) Unwrap() error { return ErrUnconfirmed }

// ReplayDeadLetter runs a dead letter again under the same business key, in
// one transaction: a discarded job becomes available again (attempts keep
// counting; it gets maxAttempts more); a failed or unresolved reply goes
// back to pending with a delivery job. An item whose side effect may have
// happened is refused unless confirmed; a regenerate of anything but a
// discarded draft job is a *NotRegenerableError (ErrNotRegenerable), before
// either. newID mints a job id when one is needed.
func (s *Store) ReplayDeadLetter(ctx context.Context, id string, r Replay, maxAttempts int, newID string) (DeadLetter, error) {
	var out DeadLetter
	err := s.update(ctx, func(tx *Tx) error {
		dl, err := findDeadLetter(tx, id)
		if err != nil {
			return err
		}
		// First: no state or confirmation makes this request one that can succeed.
		if r.Regenerate && (dl.Kind != DeadJob || dl.Job.Kind != KindDraft) {
			return &NotRegenerableError{ID: id, What: deadKind(dl)}
		}
		if dl.State == "dismissed" {
			return &StateError{What: dl.Kind + " " + id, State: "dismissed", Want: "on the dead-letter list"}
		}
		if !dl.Safe && !r.Confirmed {
			return &UnsafeReplayError{ID: id, Why: dl.Why}
		}
		switch {
		case dl.Kind == DeadJob && dl.Job.Kind == KindDeliver && dl.Outbox != nil:
			if err := requeueOutbox(tx, dl.Outbox, r, maxAttempts, newID); err != nil {
				return err
			}
			if err := reviveJob(tx, dl.Job, r, 0, true); err != nil {
				return err
			}
		case dl.Kind == DeadJob:
			if err := reviveJob(tx, dl.Job, r, maxAttempts, false); err != nil {
				return err
			}
		default:
			if err := requeueOutbox(tx, dl.Outbox, r, maxAttempts, newID); err != nil {
				return err
			}
		}
		if err := writeAudit(tx, AuditEntry{At: r.At, Who: r.By, From: r.From, Action: "replay " + dl.Kind, Target: id, Detail: fmt.Sprintf("regenerate=%v confirmed=%v", r.Regenerate, r.Confirmed)}); err != nil {
			return err
		}
		out = dl
		return nil
	})
	if err != nil {
		return DeadLetter{}, fmt.Errorf("store: replay %s: %w", id, err)
	}
	return out, nil
}

// reviveJob puts a discarded job back in the queue. retire instead closes it
// as cancelled (a delivery job whose row got a fresh job).
func reviveJob(tx *Tx, j *Job, r Replay, more int, retire bool) error {
	old := *j
	j.Replays = append(slices.Clip(j.Replays), r)
	j.UpdatedAt = r.At
	if retire {
		j.State = JobCancelled
		j.LastError = "replayed: its reply was requeued with a new delivery job"
		return tx.PutJob(&old, j)
	}
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
		j.Payload = []byte(fmt.Sprintf(`{"regenerate_version":%d}`, next))
	}
	return tx.PutJob(&old, j)
}

// requeueOutbox sends a reply again with the same id and key.
func requeueOutbox(tx *Tx, o *Outbox, r Replay, maxAttempts int, newID string) error {
	old := *o
	switch old.Status {
	case OutboxFailed, OutboxNeedsReconciliation, OutboxEffectPending, OutboxPending:
		// pending: its delivery job died before sending; a new job sends it.
	default:
		return &StateError{What: "outbox row " + o.ID, State: string(old.Status), Want: "pending, failed, needs_reconciliation or effect_pending"}
	}
	// Back in the queue, it is back on the list if it fails again.
	o.Status, o.ExecutionID, o.Note, o.UpdatedAt, o.Dismissed = OutboxPending, "", "", r.At, nil
	o.Replays = append(slices.Clip(o.Replays), r)
	if _, _, err := enqueue(tx, NewJob{ID: newID, Kind: KindDeliver, Key: o.ID, MaxAttempts: maxAttempts}, o.CorrelationID, r.At); err != nil {
		return err
	}
	return tx.PutOutbox(&old, o)
}

// DismissDeadLetter takes an item off the list with a reason; a discarded
// job becomes cancelled.
func (s *Store) DismissDeadLetter(ctx context.Context, id string, d Dismissal) error {
	return s.update(ctx, func(tx *Tx) error {
		dl, err := findDeadLetter(tx, id)
		if err != nil {
			return err
		}
		if dl.Kind == DeadOutbox && dl.Outbox.Status == OutboxEffectPending {
			return &StateError{What: "outbox row " + id, State: string(OutboxEffectPending), Want: "failed or needs_reconciliation to be cancelled (it is being sent)"}
		}
		if dl.Kind == DeadJob {
			j := dl.Job
			old := *j
			j.State, j.Dismissed, j.UpdatedAt = JobCancelled, &d, d.At
			if err := tx.PutJob(&old, j); err != nil {
				return err
			}
		} else {
			o := dl.Outbox
			old := *o
			o.Dismissed, o.UpdatedAt = &d, d.At
			if err := tx.PutOutbox(&old, o); err != nil {
				return err
			}
		}
		return writeAudit(tx, AuditEntry{At: d.At, Who: d.By, From: d.From, Action: "cancel " + dl.Kind, Target: id, Detail: d.Reason})
	})
}
