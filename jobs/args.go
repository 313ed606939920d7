package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store"
)

// Args are a job's typed arguments, as in river: Kind names the job kind
// that runs them, Key the business key the job works on (at most one live
// job per kind and key: idx_jobs_unique). The store keeps both as opaque
// strings and the rest as the job's JSON payload; Enqueue and Decode are
// the one place that encodes and decodes them.
//
// Each concept declares the args of the jobs it enqueues, beside the rule
// that enqueues them (review.DraftArgs, delivery.DeliverArgs,
// delivery.BulkReplayArgs), and enqueues them through Enqueue in its own
// Tx; the queue knows no kind.
//
// A key field is tagged `json:"-"`: it is the job's Key, never repeated in
// its payload, and Decode gives it back through SetKey (Keyed).
type Args interface {
	Kind() string
	Key() string
}

// Keyed is the pointer side of Args whose key field is left out of the
// payload: Decode sets the job's Key through it.
type Keyed interface {
	SetKey(key string)
}

// Opts are how a job is enqueued, beyond its arguments.
type Opts struct {
	// ID is the job's ULID; empty: Enqueue mints one. (A transaction the
	// group commit runs again mints another, which is harmless: the first
	// run was rolled back.)
	ID          string
	MaxAttempts int
	RunAt       time.Time // zero: now
	// CorrelationID is the event the job follows from.
	CorrelationID string
	Now           time.Time
}

// NewJob describes the job for args, for a store call that takes one
// (leads.RecordTx enqueues the draft job with its event).
func NewJob(args Args, o Opts) (store.NewJob, error) {
	payload, err := Encode(args)
	if err != nil {
		return store.NewJob{}, err
	}
	id := o.ID
	if id == "" {
		id = ulid.Make().String()
	}
	return store.NewJob{ID: id, Kind: args.Kind(), Key: args.Key(), MaxAttempts: o.MaxAttempts, RunAt: o.RunAt, Payload: payload}, nil
}

// Enqueue adds the job for args inside the caller's transaction unless a
// live job of the same kind and key exists; it returns the live job and
// whether this call created it.
func Enqueue(tx *store.Tx, args Args, o Opts) (store.Job, bool, error) {
	nj, err := NewJob(args, o)
	if err != nil {
		return store.Job{}, false, err
	}
	return tx.Enqueue(nj, o.CorrelationID, o.Now)
}

// Encode is the JSON payload of args: nil when every field but the key is
// zero, so a job without arguments stores none (as before typed args).
// Enqueue and NewJob store it; a caller that rewrites a stored job's
// payload (a regenerate revives a draft job with a new version) uses it.
func Encode(args Args) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("jobs: encode %s args: %w", args.Kind(), err)
	}
	if bytes.Equal(raw, []byte("{}")) {
		return nil, nil
	}
	return raw, nil
}

// Decode reads the typed arguments of job. A payload that does not decode,
// or a job of another kind, is a *Discard: running it again cannot help.
func Decode[T Args](job store.Job) (T, error) {
	var args T
	if len(job.Payload) > 0 {
		if err := json.Unmarshal(job.Payload, &args); err != nil {
			return args, &Discard{Err: fmt.Errorf("job %s: %s payload: %w", job.ID, job.Kind, err)}
		}
	}
	if k, ok := any(&args).(Keyed); ok {
		k.SetKey(job.Key)
	}
	if args.Kind() != job.Kind {
		return args, &Discard{Err: fmt.Errorf("job %s is a %s job, not %s", job.ID, job.Kind, args.Kind())}
	}
	return args, nil
}
