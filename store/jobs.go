package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
)

// JobState is where a job is in its life; see docs/architecture.md.
type JobState string

// The job states of the spec.
const (
	JobAvailable JobState = "available"
	JobRunning   JobState = "running"
	JobRetryable JobState = "retryable"
	JobCompleted JobState = "completed"
	JobDiscarded JobState = "discarded"
	JobCancelled JobState = "cancelled"
)

// ready reports whether a worker may claim the job once it is due.
func (j *Job) ready() bool { return j.State == JobAvailable || j.State == JobRetryable }

// Final reports whether no worker will run the job again.
func (s JobState) Final() bool {
	return s == JobCompleted || s == JobDiscarded || s == JobCancelled
}

// Attempt outcomes, recorded on each attempt when it ends.
const (
	OutcomeCompleted    = "completed"
	OutcomeRetry        = "retry"
	OutcomeDiscarded    = "discarded"
	OutcomeLeaseExpired = "lease_expired"
)

// Attempt is one execution of a job, with its own execution id.
type Attempt struct {
	ExecutionID string     `json:"execution_id"`
	Number      int        `json:"number"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	Outcome     string     `json:"outcome"`
	Error       string     `json:"error,omitempty"`
	// Raw keeps what the attempt got back when that explains a failure (a model's invalid output).
	Raw string `json:"raw,omitempty"`
}

// Job is one unit of queued work on one business key.
type Job struct {
	V             int             `json:"v"`
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	Key           string          `json:"key"`
	CorrelationID string          `json:"correlation_id"`
	State         JobState        `json:"state"`
	Attempt       int             `json:"attempt"`
	MaxAttempts   int             `json:"max_attempts"`
	RunAt         time.Time       `json:"run_at"`
	LeaseUntil    *time.Time      `json:"lease_until,omitempty"`
	ExecutionID   string          `json:"execution_id,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	Attempts      []Attempt       `json:"attempts"`
	Replays       []Replay        `json:"replays,omitempty"`
	Dismissed     *Dismissal      `json:"dismissed,omitempty"`
	// Waits, on a queued job, names the running job it waits for: it is
	// held back (due no sooner than that job's lease ends) until that job's
	// attempt ends, when it is due at Waits.RunAt, its own due time.
	Waits *JobWait `json:"waits,omitempty"`
	// FollowedBy, on a running job, names the job that waits for it: the
	// end of this attempt, however it ends, releases that one in the same
	// transaction.
	FollowedBy string `json:"followed_by,omitempty"`
}

// JobWait is what a held-back job waits for (Job.Waits).
type JobWait struct {
	Job   string    `json:"job"`    // the id of the running job
	RunAt time.Time `json:"run_at"` // when the held job is due once that one ends
}

// NewJob describes a job to enqueue.
type NewJob struct {
	ID          string // a ULID minted by the caller
	Kind        string
	Key         string // the business key: at most one live job per kind and key
	MaxAttempts int
	RunAt       time.Time
	Payload     json.RawMessage
}

func uniqueKey(kind, key string) []byte {
	return append(append([]byte(kind), 0), key...)
}

func corrKey(corr, jobID string) []byte {
	return append([]byte(corr+"|"), jobID...)
}

// enqueue inserts nj unless a live job of the same kind and key exists, in
// which case that job is returned with created false.
func enqueue(tx *Tx, nj NewJob, corr string, now time.Time) (Job, bool, error) {
	j := newJob(nj, corr, now)
	return enqueueEncoded(tx, &j, nil)
}

// newJob builds the record of a job to enqueue.
func newJob(nj NewJob, corr string, now time.Time) Job {
	if nj.MaxAttempts < 1 {
		nj.MaxAttempts = 1
	}
	if nj.RunAt.IsZero() {
		nj.RunAt = now
	}
	return Job{
		V: recordVersion, ID: nj.ID, Kind: nj.Kind, Key: nj.Key, CorrelationID: corr,
		State: JobAvailable, MaxAttempts: nj.MaxAttempts, RunAt: nj.RunAt, Payload: CanonicalJSON(nj.Payload), // as it reads back
		CreatedAt: now, UpdatedAt: now, Attempts: []Attempt{},
	}
}

// enqueueEncoded inserts j (raw is its JSON when the caller encoded it
// outside the transaction, else nil) unless a live job of the same kind and
// key exists, which is then returned with created false.
func enqueueEncoded(tx *Tx, j *Job, raw []byte) (Job, bool, error) {
	live, err := tx.LiveJob(j.Kind, j.Key)
	if err == nil {
		return live, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Job{}, false, err
	}
	if err := insertJob(tx, j, raw); err != nil {
		return Job{}, false, err
	}
	return *j, true, nil
}

// insertJob writes the new job j (raw is its JSON, or nil) and counts it.
func insertJob(tx *Tx, j *Job, raw []byte) error {
	var err error
	if raw == nil {
		err = jobsTable.insert(tx, j)
	} else {
		err = jobsTable.insertRaw(tx, j, raw)
	}
	if err != nil {
		return err
	}
	tx.jobReady(j)
	return moveJobCount(tx, nil, j)
}

// putJob writes j over old (nil: an insert that looks first) and moves
// its count when its kind or state changed.
func putJob(tx *Tx, old, j *Job) error {
	if err := jobsTable.put(tx, old, j); err != nil {
		return err
	}
	tx.jobReady(j)
	if err := moveJobCount(tx, old, j); err != nil {
		return err
	}
	return tx.jobMoved(old, j) // hooks.go
}

// deleteJob removes the stored job j and takes it off its count.
func deleteJob(tx *Tx, j *Job) error {
	if err := jobsTable.delete(tx, j); err != nil {
		return err
	}
	return moveJobCount(tx, j, nil)
}

// readyKey is a job's entry in idx_jobs_ready: its kind, 0x00, then when
// it is due and its id, so each kind's jobs sort next due first.
func readyKey(kind string, runAt time.Time, id string) []byte {
	return append(append([]byte(kind), 0), timeKey(runAt, id)...)
}

// Enqueue adds a job inside tx unless a live job of the same kind and key
// exists; it returns the live job and whether this call created it. corr
// is the correlation id of the event the job follows from; nj.ID is minted
// by the caller, outside tx.
func (tx *Tx) Enqueue(nj NewJob, corr string, now time.Time) (Job, bool, error) {
	return enqueue(tx, nj, corr, now)
}

// Job reads one job by id: ErrNotFound when there is none.
func (tx *Tx) Job(id string) (Job, error) { return jobsTable.get(tx, []byte(id)) }

// LiveJob reads the live job of kind and business key (idx_jobs_unique):
// ErrNotFound when none is live.
func (tx *Tx) LiveJob(kind, key string) (Job, error) {
	return jobsTable.lookup(tx, &jobsUnique, uniqueKey(kind, key))
}

// PutJob writes j over old, the job as read in this transaction, moving
// its entries in the queue's indexes (ready, leased, unique, dead) to
// match its new state.
func (tx *Tx) PutJob(old, j *Job) error { return putJob(tx, old, j) }

// DeleteJob removes the stored job j and its index entries.
func (tx *Tx) DeleteJob(j *Job) error { return deleteJob(tx, j) }

// JobsByCorrelation reads every job that followed from one event, oldest first.
func (tx *Tx) JobsByCorrelation(corr string) ([]Job, error) { return jobsOf(tx, corr) }

// ClaimLimits bounds one claim round: up to Kinds[k] jobs of kind k, and
// up to Other jobs in all, shared by the kinds Kinds does not name.
type ClaimLimits struct {
	Kinds map[string]int
	Other int
}

// AnyJobs is the limit "up to n jobs of any kind, earliest due first".
func AnyJobs(n int) ClaimLimits { return ClaimLimits{Other: n} }

// budget is what is left of the limits within one transaction; it is
// copied from them at each run of the transaction's function, which the
// group commit may run twice.
type budget struct {
	kinds map[string]int
	other int
}

func (l ClaimLimits) budget() *budget {
	b := &budget{kinds: make(map[string]int, len(l.Kinds)), other: l.Other}
	for k, n := range l.Kinds {
		b.kinds[k] = n
	}
	return b
}

func (b *budget) left(kind string) int {
	if n, ok := b.kinds[kind]; ok {
		return n
	}
	return b.other
}

func (b *budget) take(kind string) {
	if _, ok := b.kinds[kind]; ok {
		b.kinds[kind]--
	} else {
		b.other--
	}
}

// readyHead is the next ready job of one kind, as a cursor over that
// kind's part of idx_jobs_ready.
type readyHead struct {
	prefix []byte // kind 0x00
	c      engine.Cursor
	k      []byte // the entry at the cursor, nil when the kind has no more
}

// due reports whether the head's job is due at limit (a timeKey; nil: whenever).
func (h *readyHead) due(limit []byte) bool {
	return h.k != nil && (limit == nil || bytes.Compare(h.k[len(h.prefix):], limit) <= 0)
}

func (h *readyHead) next() {
	k, _ := h.c.Next()
	if k == nil || !bytes.HasPrefix(k, h.prefix) {
		h.k = nil
		return
	}
	h.k = k
}

// readyHeads places a cursor on the first ready job of every kind that b
// leaves room for. It skips from one kind to the next with a seek, so it
// costs a few page reads per kind however long each kind's backlog is.
// A head's key stays valid while its cursor stands (every engine keeps a
// cursor's slices for the transaction).
func readyHeads(tx *Tx, b *budget) []*readyHead {
	ready := tx.bucket(bucketJobsReady)
	var heads []*readyHead
	c := ready.Cursor()
	for k, _ := c.First(); k != nil; {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			k, _ = c.Next() // damage, which Check names; a job never has it
			continue
		}
		prefix := bytes.Clone(k[:i+1])
		if b.left(string(k[:i])) > 0 {
			// The walk stands on the kind's first job: its cursor becomes
			// the kind's head and a new one walks on. On PostgreSQL each
			// cursor's first read is a round trip, made under the writers'
			// lock in a claim: one a kind, where a head of its own made two.
			heads = append(heads, &readyHead{prefix: prefix, c: c, k: k})
			c = ready.Cursor()
		}
		next := bytes.Clone(prefix)
		next[len(next)-1] = 1 // just past every key of this kind
		k, _ = c.Seek(next)
	}
	return heads
}

// pick returns the head whose job is due first at limit among the kinds b
// leaves room for, or nil.
func pick(heads []*readyHead, b *budget, limit []byte) *readyHead {
	var best *readyHead
	for _, h := range heads {
		if !h.due(limit) || b.left(string(h.prefix[:len(h.prefix)-1])) <= 0 {
			continue
		}
		if best == nil || bytes.Compare(h.k[len(h.prefix):], best.k[len(best.prefix):]) < 0 {
			best = h
		}
	}
	return best
}

// Claim leases, in one transaction, the jobs due at now that lim leaves
// room for, earliest due first: each moves from the ready index to the
// leased index, gets a new execution id and an attempt record before any
// of its work starts. A kind whose limit is reached is not read past, so
// a backlog of one kind never delays another kind's claim.
func (s *Store) Claim(ctx context.Context, now time.Time, lim ClaimLimits, lease time.Duration) ([]Job, error) {
	limit := timeKey(now, "\xff")
	// Nothing due costs a read, not a commit round with its fsyncs: the
	// runner asks whenever a worker frees up or it is woken, and an idle
	// queue would otherwise write an empty transaction each time. The
	// write below decides again on its own; this only skips it.
	var due bool
	if err := s.view(func(tx *Tx) error {
		b := lim.budget()
		due = pick(readyHeads(tx, b), b, limit) != nil
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: claim jobs: %w", err)
	}
	if !due {
		return nil, nil
	}
	var claimed []Job
	owner := s.Owner()
	err := s.update(ctx, func(tx *Tx) error {
		claimed = claimed[:0]
		b := lim.budget()
		heads := readyHeads(tx, b)
		// Choose first, then write: a cursor does not survive writes to its bucket.
		var ids, keys, counts []string
		kinds := map[string]bool{}
		for h := pick(heads, b, limit); h != nil; h = pick(heads, b, limit) {
			ids = append(ids, string(h.k[len(h.prefix)+8:]))
			keys = append(keys, string(h.k))
			kind := string(h.prefix[:len(h.prefix)-1])
			b.take(kind)
			h.next()
			if !kinds[kind] {
				// The counts a claim of the kind moves (moveJobCount).
				kinds[kind] = true
				for _, st := range []JobState{JobAvailable, JobRetryable, JobRunning} {
					counts = append(counts, string(jobCountKey(kind, st)))
				}
			}
		}
		tx.prefetch(bucketJobs, ids)
		tx.prefetch(bucketMeta, counts)
		for i, id := range ids {
			j, err := tx.Job(id)
			if tx.skip(err, nil) {
				// No worker can run a job it cannot read, and left ready it
				// would head its kind's queue for good: it moves to the dead
				// letters (where it shows as unreadable), and the claim goes on.
				if err := tx.bucket(bucketJobsReady).Delete([]byte(keys[i])); err != nil {
					return err
				}
				if err := tx.bucket(bucketJobsDead).Put([]byte(id), nil); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("ready index points at job %s: %w", id, err)
			}
			old := j
			until := now.Add(lease)
			j.State = JobRunning
			j.Waits = nil // held no more: due past the lease of the job it waited for
			j.Attempt++
			j.ExecutionID = executionID(owner)
			j.LeaseUntil = &until
			j.UpdatedAt = now
			j.Attempts = append(j.Attempts, Attempt{ExecutionID: j.ExecutionID, Number: j.Attempt, StartedAt: now})
			if err := putJob(tx, &old, &j); err != nil {
				return err
			}
			claimed = append(claimed, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim jobs: %w", err)
	}
	return claimed, nil
}

// NextRunAt is the earliest time a ready job of a kind lim leaves room for
// becomes due; ok is false when none waits.
func (s *Store) NextRunAt(lim ClaimLimits) (t time.Time, ok bool, err error) {
	err = s.view(func(tx *Tx) error {
		b := lim.budget()
		if h := pick(readyHeads(tx, b), b, nil); h != nil {
			t, _ = splitTimeKey(h.k[len(h.prefix):])
			ok = true
		}
		return nil
	})
	return t, ok, err
}

// Result is how one attempt ended, as the runner decided it.
type Result struct {
	Outcome string    // OutcomeCompleted, OutcomeRetry or OutcomeDiscarded
	Err     string    // the attempt's error, if any
	Raw     string    // what the attempt got back, kept for a person to read
	RetryAt time.Time // for OutcomeRetry
	// Released marks an attempt handed back at shutdown: it is recorded but
	// never turns into a discard, since the job did not fail.
	Released bool
	// Snoozed marks an attempt that did no work (a send held to its
	// provider's rate): it is recorded, gives its number back and never
	// turns into a discard, so a hold costs the job none of its attempts.
	Snoozed bool
}

// FinishJob records the end of the attempt execID of job id. A retry past the
// job's last attempt becomes a discard. It fails with ErrLeaseLost when the
// lease was taken from this execution (it expired and the job was reaped).
func (s *Store) FinishJob(ctx context.Context, id, execID string, now time.Time, r Result) (Job, error) {
	// A kind that completed its job in its own transaction (review.Record,
	// delivery.FinishTx) left nothing to record: the job as that commit
	// wrote it (kept by this process, ended), else a read, never a commit
	// round. A completion by execID is final, so either is exact.
	if j, ok := s.ended.take(id, execID); ok && r.Outcome == OutcomeCompleted {
		return j, nil // committed by this process, in the kind's transaction
	}
	if r.Outcome == OutcomeCompleted {
		if j, err := s.Job(id); err == nil && j.State == JobCompleted && completedBy(j, execID) {
			return j, nil
		}
	}
	var out Job
	err := s.update(ctx, func(tx *Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return err
		}
		if j.State == JobCompleted && r.Outcome == OutcomeCompleted && completedBy(j, execID) {
			out = j // the kind completed it in its own transaction
			return nil
		}
		if err := releaseLease(tx, &j, execID); err != nil {
			return err
		}
		outcome := r.Outcome
		if outcome == OutcomeRetry && j.Attempt >= j.MaxAttempts && !r.Released && !r.Snoozed {
			outcome = OutcomeDiscarded
		}
		if r.Snoozed && outcome == OutcomeRetry && j.Attempt > 0 {
			j.Attempt-- // the next claim numbers its attempt as this one was
		}
		if err := endAttempt(tx, &j, now, outcome, false, r.Err, r.Raw, r.RetryAt); err != nil {
			return err
		}
		out = j
		return nil
	})
	if err != nil {
		return Job{}, fmt.Errorf("store: finish job %s: %w", id, err)
	}
	return out, nil
}

// completedBy reports whether execution execID completed j.
func completedBy(j Job, execID string) bool {
	for _, a := range j.Attempts {
		if a.ExecutionID == execID && a.Outcome == OutcomeCompleted {
			return true
		}
	}
	return false
}

// completeJob completes job id held by execID inside tx: a kind that
// records its outcome and ends its job in one transaction leaves no moment
// where the outcome is stored but the job still looks live.
func completeJob(tx *Tx, id, execID string, now time.Time) error {
	j, err := tx.Job(id)
	if err != nil {
		return err
	}
	if err := releaseLease(tx, &j, execID); err != nil {
		return err
	}
	if err := endAttempt(tx, &j, now, OutcomeCompleted, false, "", "", time.Time{}); err != nil {
		return err
	}
	tx.completed = append(tx.completed, endedJob{execID, j})
	return nil
}

// ended is the jobs that kinds completed in their own committed
// transactions (CompleteJob), by execution, until the runner's FinishJob
// takes each: what spares it a read of the job it would find completed.
// A completion by an execution is final, so what is kept stays true; at
// most maxEnded are kept, and past that FinishJob reads the job instead.
type ended struct {
	mu   sync.Mutex
	jobs map[string]Job // execution id → the job as its completion wrote it
}

const maxEnded = 4096

// endedJob is a job as execution exec's completion wrote it.
type endedJob struct {
	exec string
	job  Job
}

// keep remembers the jobs a commit completed.
func (e *ended) keep(jobs []endedJob) {
	if len(jobs) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.jobs == nil {
		e.jobs = map[string]Job{}
	}
	for _, j := range jobs {
		if len(e.jobs) < maxEnded {
			e.jobs[j.exec] = j.job
		}
	}
}

// forget drops every job kept.
func (e *ended) forget() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.jobs = nil
}

// take is, and forgets, job id as execution execID's completion wrote it.
func (e *ended) take(id, execID string) (Job, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j, ok := e.jobs[execID]
	if ok {
		delete(e.jobs, execID)
	}
	return j, ok && j.ID == id
}

// releaseLease proves that execution execID holds j's lease, else
// ErrLeaseLost (the lease expired and was given away). endAttempt then
// moves the job off idx_jobs_leased.
func releaseLease(_ *Tx, j *Job, execID string) error {
	if j.State != JobRunning || j.ExecutionID != execID {
		return ErrLeaseLost
	}
	return nil
}

// endAttempt closes the running attempt of j (as stored) with outcome and
// moves j to the matching state, its index entries with it; with discard
// the job is discarded whatever the attempt's own outcome (a lease that
// expired on the last attempt).
func endAttempt(tx *Tx, j *Job, now time.Time, outcome string, discard bool, errText, raw string, retryAt time.Time) error {
	old := *j
	j.Attempts = slices.Clone(j.Attempts)
	for i := range j.Attempts {
		a := &j.Attempts[i]
		if a.ExecutionID == j.ExecutionID {
			a.EndedAt = &now
			a.Outcome = outcome
			a.Error = errText
			a.Raw = raw
		}
	}
	j.LeaseUntil = nil
	j.ExecutionID = ""
	j.UpdatedAt = now
	if errText != "" {
		j.LastError = errText
	}
	switch {
	case discard || outcome == OutcomeDiscarded:
		j.State = JobDiscarded
	case outcome == OutcomeCompleted:
		j.State = JobCompleted
	case outcome == OutcomeRetry, outcome == OutcomeLeaseExpired:
		j.State = JobRetryable
		j.RunAt = retryAt
		if j.RunAt.IsZero() {
			j.RunAt = now
		}
	default:
		return fmt.Errorf("unknown outcome %q", outcome)
	}
	if old.State == JobRunning && j.FollowedBy != "" {
		// Another job waits for this one, which the waiting job replaces
		// (a newer message of the lead's turn): this one has nothing left
		// to do that its retry would do, so it ends here rather than run
		// beside the job it let go. A failure for good stays a failure.
		if j.State == JobRetryable {
			j.State = JobCompleted
			j.LastError = "this attempt ended after job " + j.FollowedBy + " took over its work: " + cmp.Or(errText, outcome)
		}
		if err := releaseFollower(tx, j, now); err != nil {
			return err
		}
		j.FollowedBy = "" // released: a replay of this job waits for nothing and lets nothing go
	}
	return putJob(tx, &old, j)
}

// waitFor holds j, a job about to be enqueued, back behind k, a running
// job: j is due no sooner than k's lease ends (were k's end never
// recorded, its lease still frees j) and k names j, so that k's end
// releases it (releaseFollower). It returns k as it must be stored.
func waitFor(j *Job, k Job) Job {
	j.Waits = &JobWait{Job: k.ID, RunAt: j.RunAt}
	if k.LeaseUntil != nil && k.LeaseUntil.After(j.RunAt) {
		j.RunAt = *k.LeaseUntil
	}
	k.FollowedBy = j.ID
	return k
}

// releaseFollower makes the job that waits for k (k.FollowedBy) due at its
// own time, unless it no longer waits for k.
func releaseFollower(tx *Tx, k *Job, now time.Time) error {
	f, err := tx.Job(k.FollowedBy)
	if errors.Is(err, ErrNotFound) || tx.skip(err, nil) {
		return nil // retention took it, or it cannot be read (its claim moves it to the dead letters)
	}
	if err != nil {
		return fmt.Errorf("job %s waiting for job %s: %w", k.FollowedBy, k.ID, err)
	}
	if !f.ready() || f.Waits == nil || f.Waits.Job != k.ID {
		return nil
	}
	old := f
	// Its own due time, even when past: it has waited since, and sorts
	// before the jobs due after it.
	f.RunAt, f.Waits, f.UpdatedAt = f.Waits.RunAt, nil, now
	return putJob(tx, &old, &f)
}

// reapChunk bounds one reaping transaction so the write lock is held briefly.
const reapChunk = 256

// Reap returns to the queue every running job whose lease ended by now
// (all running jobs when all is true: at start, bbolt's file lock proves that
// no other process is running them). The attempt counts, with outcome
// lease_expired; a job out of attempts is discarded. It returns each job it
// reaped as it left it: retryable, or discarded when that was its last
// attempt (the runner logs those).
func (s *Store) Reap(ctx context.Context, now time.Time, all bool) ([]Job, error) {
	return s.reap(ctx, now, "the worker's lease expired before it finished (the process stopped or the attempt hung)",
		func(tx *Tx, until time.Time, id string) (bool, bool) {
			if !all && until.After(now) {
				return false, true
			}
			return true, false
		})
}

// ReleaseOwners returns to the queue, as Reap does a job whose lease
// ended, every running job whose execution is of a server in owners (see
// Owner): servers that no longer hold the database, whose jobs need not
// wait for their leases to end.
func (s *Store) ReleaseOwners(ctx context.Context, now time.Time, owners map[string]bool) ([]Job, error) {
	if len(owners) == 0 {
		return nil, nil
	}
	return s.reap(ctx, now, "its server stopped before it finished (it no longer holds the database)",
		func(tx *Tx, until time.Time, id string) (bool, bool) {
			j, err := tx.Job(id)
			return err == nil && owners[ownerOf(j.ExecutionID)], false
		})
}

// reap ends the attempt of each leased job that take picks (stop: no
// later key is picked either), in transactions of reapChunk jobs, with
// outcome lease_expired and msg.
func (s *Store) reap(ctx context.Context, now time.Time, msg string, take func(tx *Tx, until time.Time, id string) (picked, stop bool)) ([]Job, error) {
	var total []Job
	var after []byte // the last key a full chunk looked at
	for {
		var chunk []Job
		var last []byte
		err := s.update(ctx, func(tx *Tx) error {
			chunk, last = chunk[:0], nil
			leased := tx.bucket(bucketJobsLeased)
			var expired [][]byte
			c := leased.Cursor()
			k, _ := c.First()
			if after != nil {
				k, _ = c.Seek(after)
			}
			for ; k != nil && len(expired) < reapChunk; k, _ = c.Next() {
				until, id := splitTimeKey(k)
				last = bytes.Clone(k)
				picked, stop := take(tx, until, id)
				if stop {
					last = nil
					break
				}
				if picked {
					expired = append(expired, bytes.Clone(k))
				}
			}
			if k == nil {
				last = nil
			}
			for _, k := range expired {
				_, id := splitTimeKey(k)
				if err := leased.Delete(k); err != nil {
					return err
				}
				j, err := tx.Job(id)
				if tx.skip(err, nil) {
					// Off the leased index (deleted above), into the dead letters.
					if err := tx.bucket(bucketJobsDead).Put([]byte(id), nil); err != nil {
						return err
					}
					continue
				}
				if err != nil {
					return fmt.Errorf("leased index points at job %s: %w", id, err)
				}
				// The attempt keeps lease_expired as its outcome even when it was
				// the last one and the job is discarded.
				if err := endAttempt(tx, &j, now, OutcomeLeaseExpired, j.Attempt >= j.MaxAttempts, msg, "", now); err != nil {
					return err
				}
				chunk = append(chunk, j)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("store: reap leases: %w", err)
		}
		total = append(total, chunk...)
		if last == nil {
			return total, nil
		}
		after = last
	}
}

// executionID is a new execution's id: a ULID, as everywhere, whose
// randomness begins with owner's bytes on a store servers share, so that
// which server claimed it can be read from it (ownerOf).
func executionID(owner string) string {
	id := ulid.Make()
	if b, err := hex.DecodeString(owner); err == nil && len(b) == pgengine.OwnerSize {
		e := id.Entropy()
		copy(e, b)
		_ = id.SetEntropy(e) // the 10 bytes Entropy gave: it cannot fail
	}
	return id.String()
}

// ownerOf is the server that claimed execution execID on a store servers
// share (see executionID): the hex of the first bytes of its ULID's
// randomness; "" when execID is not a ULID.
func ownerOf(execID string) string {
	id, err := ulid.ParseStrict(execID)
	if err != nil {
		return ""
	}
	return hex.EncodeToString(id.Entropy()[:pgengine.OwnerSize])
}

// Owner names this store's server among those that share its database
// (pgengine's Owner): every execution it claims carries it. "" when no
// other process shares the database.
func (s *Store) Owner() string {
	if s.Shared() {
		return s.pg.Owner()
	}
	return ""
}

// RunningOwners counts the running jobs of each server that claimed one,
// by Owner, on a store that servers share (none otherwise).
func (s *Store) RunningOwners() (map[string]int, error) {
	out := map[string]int{}
	if !s.Shared() {
		return out, nil
	}
	err := s.view(func(tx *Tx) error {
		c := tx.bucket(bucketJobsLeased).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			_, id := splitTimeKey(k)
			j, err := tx.Job(id)
			if err != nil {
				continue // Reap deals with a job it cannot read
			}
			if o := ownerOf(j.ExecutionID); o != "" {
				out[o]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: the servers running jobs: %w", err)
	}
	return out, nil
}

// OwnersAlive reports, of owners, the servers that still hold the store's
// database (pgengine's Alive); every one of them on a store no other
// process shares.
func (s *Store) OwnersAlive(ctx context.Context, owners []string) (map[string]bool, error) {
	if !s.Shared() {
		alive := map[string]bool{}
		for _, o := range owners {
			alive[o] = true
		}
		return alive, nil
	}
	return s.pg.Alive(ctx, owners)
}

// Job returns one job by id.
func (s *Store) Job(id string) (Job, error) {
	var j Job
	err := s.view(func(tx *Tx) error {
		var err error
		j, err = tx.Job(id)
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("store: job %s: %w", id, err)
	}
	return j, nil
}

// jobsOf reads every job of correlation id corr inside tx, oldest first.
func jobsOf(tx *Tx, corr string) ([]Job, error) { return jobsOfSkipping(tx, corr, nil) }

// jobsOfSkipping is jobsOf that, with skipped set, steps over a job that
// cannot be read, adding it there; without, such a job is the error.
func jobsOfSkipping(tx *Tx, corr string, skipped *[]Unreadable) ([]Job, error) {
	prefix := []byte(corr + "|")
	var out []Job
	c := tx.bucket(bucketJobsByCorr).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		j, err := tx.Job(string(k[len(prefix):]))
		if skipped != nil && tx.skip(err, skipped) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// CompleteJob completes job id held by execution execID inside tx, so a
// kind can record its outcome and end its job in one transaction:
// ErrLeaseLost when execID no longer holds the job.
func (tx *Tx) CompleteJob(id, execID string, now time.Time) error {
	return completeJob(tx, id, execID, now)
}
