package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store/engine"
)

// A canary's decision is a person's promote or roll back of a client's
// candidate drafter version (config drafter.canary):
//
//	canary   client id -> CanaryDecision JSON
//
// It is kept per client, for the version it decided, so a new candidate
// version (a changed config) starts running again; a decision of the same
// version by two people at once is one decision, the other told who made
// it. The bucket is created by the first decision (a file without one has
// none; reads find nothing), so no migration and no schema version.
var bucketCanary = []byte("canary")

// CanaryState is what a decision made of a client's candidate.
type CanaryState string

// A canary's states: running (no decision, or one about another version)
// drafts the configured share with the candidate; promoted drafts every
// new turn with it, rolled back none.
const (
	CanaryRunning    CanaryState = ""
	CanaryPromoted   CanaryState = "promoted"
	CanaryRolledBack CanaryState = "rolled_back"
)

// CanaryDecision is the latest decision of a client's canary.
type CanaryDecision struct {
	V       int         `json:"v"`
	Client  string      `json:"client"`
	Version string      `json:"version"` // the candidate's prompt version it decided
	State   CanaryState `json:"state"`
	By      string      `json:"by"`
	At      time.Time   `json:"at"`
}

// SameCanaryDecisionError is a decision already made: the same state of
// the same version, by Earlier.By.
type SameCanaryDecisionError struct{ Earlier CanaryDecision }

func (e *SameCanaryDecisionError) Error() string {
	what := "promoted"
	if e.Earlier.State == CanaryRolledBack {
		what = "rolled back"
	}
	return fmt.Sprintf("version %s of client %s was already %s by %s at %s", e.Earlier.Version, e.Earlier.Client, what, e.Earlier.By, e.Earlier.At.UTC().Format("15:04 UTC, 2 Jan"))
}

func (tx *Tx) canaries(write bool) (engine.Bucket, error) {
	if b := tx.bucket(bucketCanary); b != nil || !write {
		return b, nil
	}
	b, err := tx.tx.CreateBucketIfNotExists(bucketCanary)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", bucketCanary, err)
	}
	return b, nil
}

// Canary is the state of client's canary of candidate version: running
// unless a decision of that very version was made.
func (tx *Tx) Canary(client, version string) (CanaryDecision, error) {
	d, err := tx.canaryDecision(client)
	if err != nil || d.Version != version {
		return CanaryDecision{Client: client, Version: version}, err
	}
	return d, nil
}

func (tx *Tx) canaryDecision(client string) (CanaryDecision, error) {
	b, _ := tx.canaries(false)
	if b == nil {
		return CanaryDecision{}, nil
	}
	var d CanaryDecision
	if err := getJSON(b, []byte(client), &d); err != nil {
		if errors.Is(err, ErrNotFound) {
			return CanaryDecision{}, nil
		}
		return CanaryDecision{}, unreadableOf("canary decision", []byte(client), err)
	}
	return d, nil
}

// Canary is Tx.Canary in a read of its own.
func (s *Store) Canary(client, version string) (CanaryDecision, error) {
	var d CanaryDecision
	err := s.View(func(tx *Tx) (err error) { d, err = tx.Canary(client, version); return err })
	return d, err
}

// DecideCanary records d, a promote or roll back, in one write: the same
// state of the same version already decided is a *SameCanaryDecisionError
// naming who decided it, and nothing is written; any other decision
// replaces the earlier one. audit, when it has an action, is written in
// the same transaction.
func (s *Store) DecideCanary(ctx context.Context, d CanaryDecision, audit AuditEntry) error {
	if d.Client == "" || d.Version == "" || d.By == "" || (d.State != CanaryPromoted && d.State != CanaryRolledBack) {
		return errors.New("canary decision: a decision needs a client, a version, a person and promoted or rolled_back")
	}
	return s.Update(ctx, func(tx *Tx) error {
		old, err := tx.canaryDecision(d.Client)
		if err != nil {
			return err
		}
		if old.Version == d.Version && old.State == d.State {
			return &SameCanaryDecisionError{Earlier: old}
		}
		b, err := tx.canaries(true)
		if err != nil {
			return err
		}
		d.V = recordVersion
		if err := putJSON(b, []byte(d.Client), d); err != nil {
			return err
		}
		if audit.Action == "" {
			return nil
		}
		return tx.Audit(audit)
	})
}
