// Package jobs owns time: the queue runner, the job kinds and the cron
// schedule. A job kind is a type with Run(ctx, job) error; control flow uses
// the error types of errors.go, checked with errors.As.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/handoff/handoff/store"
)

// Kind is one kind of job.
type Kind interface {
	Run(ctx context.Context, job store.Job) error
}

// Options configures a Runner.
type Options struct {
	Workers int
	// Lease is how long a claimed job is held before the reaper may give it
	// to another worker; a job's context ends a little before its lease.
	Lease   time.Duration
	Backoff Backoff
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Jitter returns a number in [0,1); nil means random.
	Jitter func() float64
	// Observe, when set, is told of every finished attempt (metrics).
	Observe func(kind string, state store.JobState, d time.Duration)
}

// Runner claims due jobs and runs them on a pool of worker goroutines. It
// sleeps until woken by Wake (new work committed), a worker finishing, or
// the earliest future run time; it never polls in a loop.
type Runner struct {
	st    *store.Store
	kinds map[string]Kind
	opt   Options
	wake  chan struct{}

	mu      sync.Mutex
	stop    context.CancelFunc // stops claiming
	abandon context.CancelFunc // ends running jobs' contexts
	done    chan struct{}
	running sync.WaitGroup
}

// NewRunner returns a runner over st for the given kinds, by name.
func NewRunner(st *store.Store, kinds map[string]Kind, opt Options) *Runner {
	if opt.Workers < 1 {
		opt.Workers = 1
	}
	if opt.Lease <= 0 {
		opt.Lease = 5 * time.Minute
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Jitter == nil {
		opt.Jitter = randomJitter
	}
	return &Runner{st: st, kinds: kinds, opt: opt, wake: make(chan struct{}, 1)}
}

// Wake tells the runner that work may be due. It never blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start releases the jobs a dead process left running, then starts the
// dispatcher. ctx only bounds the start; Stop ends the runner.
func (r *Runner) Start(ctx context.Context) error {
	n, err := r.st.ReapLeases(ctx, r.opt.Now(), true)
	if err != nil {
		return fmt.Errorf("jobs: release jobs left running: %w", err)
	}
	if n > 0 {
		r.opt.Logger.Warn("released jobs left running by a stopped process", "jobs", n)
	}
	claimCtx, stop := context.WithCancel(context.Background())
	jobCtx, abandon := context.WithCancel(context.Background())
	r.mu.Lock()
	r.stop, r.abandon, r.done = stop, abandon, make(chan struct{})
	r.mu.Unlock()
	go r.dispatch(claimCtx, jobCtx)
	return nil
}

// Stop stops claiming, waits for running jobs until ctx ends, then cancels
// the rest; each cancelled job is released back to the queue (its attempt
// recorded) before Stop returns.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	stop, abandon, done := r.stop, r.abandon, r.done
	r.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-done
	finished := make(chan struct{})
	go func() { r.running.Wait(); close(finished) }()
	select {
	case <-finished:
		abandon()
		return nil
	case <-ctx.Done():
		abandon()
		<-finished
		return fmt.Errorf("jobs: stopped with jobs still running; they were released: %w", ctx.Err())
	}
}

// Reap gives expired leases back to the queue; the cron schedule calls it.
func (r *Runner) Reap(ctx context.Context) error {
	n, err := r.st.ReapLeases(ctx, r.opt.Now(), false)
	if n > 0 {
		r.opt.Logger.Warn("reaped expired job leases", "jobs", n)
		r.Wake()
	}
	return err
}

func (r *Runner) dispatch(claimCtx, jobCtx context.Context) {
	defer close(r.done)
	freed := make(chan struct{}, r.opt.Workers)
	busy := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Take back the slots of workers that finished meanwhile.
	drain:
		for {
			select {
			case <-freed:
				busy--
			default:
				break drain
			}
		}
		if claimCtx.Err() != nil {
			return
		}
		free := r.opt.Workers - busy
		if free > 0 {
			jobs, err := r.st.ClaimJobs(claimCtx, r.opt.Now(), free, r.opt.Lease)
			if err != nil && claimCtx.Err() == nil {
				// Log and wait: a store that cannot claim must not spin the loop.
				r.opt.Logger.Error("claim jobs", slog.Any("err", err))
				timer.Reset(time.Second)
				select {
				case <-timer.C:
				case <-claimCtx.Done():
					return
				}
				continue
			}
			for _, j := range jobs {
				busy++
				r.running.Add(1)
				go r.execute(jobCtx, j, freed)
			}
			if len(jobs) == free {
				continue // there may be more due
			}
		}
		wait := time.Hour
		if busy < r.opt.Workers {
			if next, ok, err := r.st.NextRunAt(); err == nil && ok {
				wait = max(next.Sub(r.opt.Now()), time.Millisecond)
			}
		}
		timer.Reset(wait)
		select {
		case <-r.wake:
		case <-timer.C:
		case <-freed:
			busy--
		case <-claimCtx.Done():
			return
		}
		// Since Go 1.23 a stopped timer delivers no stale tick, so the next
		// Reset needs no drain.
		timer.Stop()
	}
}

// leaseMargin is how long before its lease a job's context ends, so that a
// slow attempt records its own end before the reaper could take the job.
const leaseMargin = 5 * time.Second

func (r *Runner) execute(ctx context.Context, j store.Job, freed chan<- struct{}) {
	defer func() {
		r.running.Done()
		freed <- struct{}{}
		r.Wake()
	}()
	log := r.opt.Logger.With("job_id", j.ID, "kind", j.Kind, "key", j.Key,
		"correlation_id", j.CorrelationID, "execution_id", j.ExecutionID, "attempt", j.Attempt)
	// The lease is in the runner's clock; the context needs a wall-clock deadline.
	left := j.LeaseUntil.Sub(r.opt.Now())
	if left < 2*leaseMargin {
		left /= 2
	} else {
		left -= leaseMargin
	}
	deadline := time.Now().Add(left)
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	started := time.Now()
	err := r.run(runCtx, j)
	cancel()
	res := r.decide(j, err, ctx.Err() != nil)
	fin, ferr := r.st.FinishJob(context.WithoutCancel(ctx), j.ID, j.ExecutionID, r.opt.Now(), res)
	if ferr != nil {
		log.Error("record the end of a job attempt", slog.Any("err", ferr))
		return
	}
	if r.opt.Observe != nil {
		r.opt.Observe(j.Kind, fin.State, time.Since(started))
	}
	attrs := []any{"state", fin.State, "duration", time.Since(started)}
	switch fin.State {
	case store.JobCompleted:
		// Debug: at thousands of events a minute one line per success is noise;
		// failures, retries and discards are logged at Warn and Error.
		log.Debug("job completed", attrs...)
	case store.JobDiscarded:
		log.Error("job discarded after its last attempt", append(attrs, slog.Any("err", err))...)
	default:
		log.Warn("job attempt failed; will retry", append(attrs, "retry_at", fin.RunAt, slog.Any("err", err))...)
	}
}

// run calls the kind, turning a panic into an error so one bad job cannot
// take the process down.
func (r *Runner) run(ctx context.Context, j store.Job) (err error) {
	kind, ok := r.kinds[j.Kind]
	if !ok {
		return &Discard{Err: fmt.Errorf("no job kind %q in this binary", j.Kind)}
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("job panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return kind.Run(ctx, j)
}

// decide turns an attempt's error into the job's next step.
func (r *Runner) decide(j store.Job, err error, abandoned bool) store.Result {
	now := r.opt.Now()
	if err == nil {
		return store.Result{Outcome: store.OutcomeCompleted}
	}
	res := store.Result{Err: err.Error()}
	var raw *WithRaw
	if errors.As(err, &raw) {
		res.Raw = raw.Raw
	}
	var discard *Discard
	var later *RetryLater
	switch {
	case errors.As(err, &discard):
		res.Outcome = store.OutcomeDiscarded
	case abandoned:
		// Shutdown: hand the job straight back; the attempt still counts.
		res.Outcome, res.RetryAt, res.Released = store.OutcomeRetry, now, true
		res.Err = "released at shutdown: " + res.Err
	case errors.As(err, &later):
		res.Outcome, res.RetryAt = store.OutcomeRetry, now.Add(later.After)
	default:
		res.Outcome, res.RetryAt = store.OutcomeRetry, now.Add(r.opt.Backoff.Delay(j.Attempt, r.opt.Jitter()))
	}
	return res
}
