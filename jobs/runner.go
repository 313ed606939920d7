// Package jobs owns time, and only the queue: the runner, typed job
// arguments (args.go), backoff and the cron schedule. It imports only the
// store, so every concept can enqueue its own job's args in its own Tx and
// return the queue's control-flow errors (errors.go, checked with
// errors.As). A job kind is a type with Run(ctx, job) error; the kinds of
// handoff, which use the concepts, live above them in workers/.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff/handoff/store"
)

// Kind is one kind of job.
type Kind interface {
	Run(ctx context.Context, job store.Job) error
}

// Interruptible is a kind whose attempts the runner cancels as soon as it
// stops, instead of letting them use the stop's grace: work that is cut
// off anywhere leaves nothing half stored and is simply done again after
// the restart (a draft: the model's answer is stored in one commit, or not
// at all). Kinds that touch the world in ways a retry must reconcile (a
// send) are not, and get the grace to finish.
type Interruptible interface {
	Kind
	// InterruptedByStop reports whether the runner's stop cancels the
	// kind's attempts at once.
	InterruptedByStop() bool
}

// Options configures a Runner.
type Options struct {
	// Workers is how many jobs of each kind run at once, unless
	// Concurrency names the kind: every kind has its own pool, so a
	// backlog of one kind never holds another's jobs back.
	Workers int
	// Concurrency sets the pool of a kind by name (the draft pool: the
	// template drafter runs many at once, a model server takes a few).
	Concurrency map[string]int
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
	// Poll, when positive, bounds each sleep of the dispatcher: on a
	// database that other processes share, their commits wake this one by
	// notification (Wake), and the poll finds what a lost notification
	// would have told. Zero: no poll, only Wake and the timers.
	Poll time.Duration
}

// Runner claims due jobs and runs them on worker goroutines, one pool per
// kind. It sleeps until woken by Wake (new work committed), a worker
// finishing, or the earliest future run time; it polls only when
// Options.Poll asks it to.
type Runner struct {
	st    *store.Store
	kinds map[string]Kind
	opt   Options
	pools map[string]int // by kind; otherPool for jobs of kinds not in this binary
	wake  chan struct{}
	// soon is the earliest due time WakeAt was told of and the dispatcher
	// has not yet slept until (Unix nanoseconds in Options.Now's clock, 0:
	// none); resleep tells the dispatcher it moved.
	soon    atomic.Int64
	resleep chan struct{}

	// life serializes Start and Stop: a Stop that overlaps a Start stops
	// what that Start began, so nothing it claims outlives the Stop.
	life sync.Mutex
	cur  *run // the dispatcher started last, nil once stopped

	// gone is when ReleaseGone first saw each server gone that still runs
	// jobs.
	goneMu sync.Mutex
	gone   map[string]time.Time

	// stops ends each running job's context, by execution id (Interrupt).
	stopsMu sync.Mutex
	stops   map[string]context.CancelFunc
}

// run is one start of the runner, up to its Stop. Each has its own wait
// group, so a restart (a restore stops and starts the runner) never adds
// to the count that an earlier Stop may still be waiting on.
type run struct {
	stop    context.CancelFunc // stops claiming
	abandon context.CancelFunc // ends running jobs' contexts
	done    chan struct{}      // closed when the dispatcher has returned
	running sync.WaitGroup     // the jobs it started
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
	// A job of a kind this binary lacks is only discarded: one at a time.
	pools := map[string]int{otherPool: 1}
	for name := range kinds {
		pools[name] = opt.Workers
		if n, ok := opt.Concurrency[name]; ok && n > 0 {
			pools[name] = n
		}
	}
	r := &Runner{st: st, kinds: kinds, opt: opt, pools: pools, wake: make(chan struct{}, 1), resleep: make(chan struct{}, 1), stops: map[string]context.CancelFunc{}}
	st.OnHoldLost(r.interrupt)
	// A commit that made a job ready says when it is due: the runner
	// sleeps until then rather than looking at the queue after each one.
	st.HookDue(r.WakeAt)
	return r
}

// interrupt ends the context of every job running: the store lost its hold
// on a database that servers share, so its writes are refused and the
// leading server may soon give these jobs to another (ReleaseGone). Each
// stops at once rather than keep a side effect going beside the next
// execution; its end is recorded once the store takes writes again, or
// its lease releases it.
func (r *Runner) interrupt(err error) {
	r.stopsMu.Lock()
	n := len(r.stops)
	for _, stop := range r.stops {
		stop()
	}
	r.stopsMu.Unlock()
	r.opt.Logger.Error("this server lost its hold on the database: its running jobs were stopped", "jobs", n, slog.Any("err", err))
}

// otherPool names the pool of the jobs whose kind is not in this binary;
// no kind is named "", so it cannot clash.
const otherPool = ""

// pool names the pool a job of kind runs in.
func (r *Runner) pool(kind string) string {
	if _, ok := r.kinds[kind]; ok {
		return kind
	}
	return otherPool
}

// limits is what each pool has room for, given busy workers per pool;
// ok is false when every pool is full.
func (r *Runner) limits(busy map[string]int) (store.ClaimLimits, bool) {
	lim := store.ClaimLimits{Kinds: make(map[string]int, len(r.kinds))}
	room := false
	for name, n := range r.pools {
		free := max(n-busy[name], 0)
		room = room || free > 0
		if name == otherPool {
			lim.Other = free
		} else {
			lim.Kinds[name] = free
		}
	}
	return lim, room
}

// Wake tells the runner that work may be due. It never blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// WakeAt tells the runner that a job is due at at (the store's DueHook,
// and the other servers' notifications): once at has come it is Wake;
// before then the runner only sleeps no later than at, without a look at
// the queue now. It never blocks.
func (r *Runner) WakeAt(at time.Time) {
	if !at.After(r.opt.Now()) {
		r.Wake()
		return
	}
	t := at.UnixNano()
	for {
		old := r.soon.Load()
		if old != 0 && old <= t {
			return
		}
		if r.soon.CompareAndSwap(old, t) {
			break
		}
	}
	select {
	case r.resleep <- struct{}{}:
	default:
	}
}

// interrupted reports whether the runner's stop cancels jobs of kind at once.
func (r *Runner) interrupted(kind string) bool {
	k, ok := r.kinds[kind].(Interruptible)
	return ok && k.InterruptedByStop()
}

// Start releases the jobs a dead process left running, then starts the
// dispatcher. ctx only bounds the start; Stop ends the runner.
func (r *Runner) Start(ctx context.Context) error {
	r.life.Lock()
	defer r.life.Unlock()
	if r.cur != nil {
		return errors.New("jobs: the runner is already started")
	}
	// Alone on its database (bbolt's file lock proves it), every running
	// job is a dead process's; on a shared one (PostgreSQL, several
	// servers) a running job may be another live server's, so only the
	// leases that ended are released, here and by the schedule's reaper.
	reaped, err := r.st.Reap(ctx, r.opt.Now(), !r.st.Shared())
	if err != nil {
		return fmt.Errorf("jobs: release jobs left running: %w", err)
	}
	if len(reaped) > 0 {
		r.opt.Logger.Warn("released jobs left running by a stopped process", "jobs", len(reaped))
		r.logReapedDiscards(reaped)
	}
	claimCtx, stop := context.WithCancel(context.Background())
	jobCtx, abandon := context.WithCancel(context.Background())
	ru := &run{stop: stop, abandon: abandon, done: make(chan struct{})}
	r.cur = ru
	go r.dispatch(ru, claimCtx, jobCtx)
	return nil
}

// Stop stops claiming, cancels the running jobs of Interruptible kinds at
// once, waits for the others until ctx ends, then cancels the rest; each
// cancelled job is released back to the queue (its attempt recorded, never
// discarded for it) before Stop returns. The claims in flight when it begins are
// waited for, and the jobs they leased run (or are released) like the
// others. Stopping a stopped runner does nothing.
func (r *Runner) Stop(ctx context.Context) error {
	r.life.Lock()
	defer r.life.Unlock()
	ru := r.cur
	if ru == nil {
		return nil
	}
	r.cur = nil
	ru.stop()
	<-ru.done
	finished := make(chan struct{})
	go func() { ru.running.Wait(); close(finished) }()
	select {
	case <-finished:
		ru.abandon()
		return nil
	case <-ctx.Done():
		ru.abandon()
		<-finished
		return fmt.Errorf("jobs: stopped with jobs still running; they were released: %w", ctx.Err())
	}
}

// Reap gives expired leases back to the queue; the cron schedule calls it.
func (r *Runner) Reap(ctx context.Context) error {
	reaped, err := r.st.Reap(ctx, r.opt.Now(), false)
	if len(reaped) > 0 {
		r.opt.Logger.Warn("reaped expired job leases", "jobs", len(reaped))
		r.logReapedDiscards(reaped)
		r.Wake()
	}
	return err
}

// ReleaseGone releases the running jobs of the servers that no longer
// hold a database several servers share (killed, or cut off from it):
// the schedule of the leading server calls it often, so their jobs run
// again within seconds rather than once their leases end. A server is
// released only once it was seen gone at two calls at least
// store.LeadLease apart (the fence: a server that lost its connection
// notices within that, stops its running jobs (interrupt) and writes
// nothing until it holds the database again); one seen again is
// forgotten. This server's own jobs are never released here.
func (r *Runner) ReleaseGone(ctx context.Context) error {
	running, err := r.st.RunningOwners()
	if err != nil {
		return err
	}
	self := r.st.Owner()
	var owners []string
	for o := range running {
		if o != self {
			owners = append(owners, o)
		}
	}
	alive, err := r.st.OwnersAlive(ctx, owners)
	if err != nil {
		return err
	}
	r.goneMu.Lock()
	if r.gone == nil {
		r.gone = map[string]time.Time{}
	}
	release := map[string]bool{}
	for o, first := range r.gone {
		if _, ok := running[o]; !ok || alive[o] {
			delete(r.gone, o)
		} else if time.Since(first) >= store.LeadLease {
			release[o] = true
		}
	}
	for _, o := range owners {
		if _, seen := r.gone[o]; !seen && !alive[o] {
			r.gone[o] = time.Now()
		}
	}
	r.goneMu.Unlock()
	// A released server runs nothing any more: the next call forgets it.
	reaped, err := r.st.ReleaseOwners(ctx, r.opt.Now(), release)
	if len(reaped) > 0 {
		names := slices.Sorted(maps.Keys(release))
		r.opt.Logger.Warn("released the jobs of servers that no longer hold the database", "jobs", len(reaped), "servers", names)
		r.logReapedDiscards(reaped)
		r.Wake()
	}
	return err
}

// logReapedDiscards logs each job that a lease's end discarded (it was on
// its last attempt), as execute logs the discards of attempts that end.
func (r *Runner) logReapedDiscards(reaped []store.Job) {
	for _, j := range reaped {
		if j.State == store.JobDiscarded {
			r.opt.Logger.Error("job discarded into the dead letters", "job_id", j.ID, "kind", j.Kind, "key", j.Key,
				"correlation_id", j.CorrelationID, "attempt", j.Attempt,
				"reason", fmt.Sprintf("its lease ended on its last attempt (%d of %d): the process stopped or the attempt hung", j.Attempt, j.MaxAttempts))
		}
	}
}

// maxClaims bounds the claims in flight at once. A claim waits for a
// commit round, about as long as a quick job takes: with one claim at a
// time, the slots freed meanwhile would stay idle until it returned.
const maxClaims = 4

// claimed is what one claim round brought back: the jobs, and the slots it
// had reserved in each pool (its limits), busy until it returned.
type claimed struct {
	jobs []store.Job
	lim  store.ClaimLimits
	err  error
}

func (r *Runner) dispatch(ru *run, claimCtx, jobCtx context.Context) {
	defer close(ru.done)
	total := 0
	for _, n := range r.pools {
		total += n
	}
	freed := make(chan string, total) // the pool of each finished job
	results := make(chan claimed, maxClaims)
	// busy counts, per pool, the jobs running and the slots reserved by a
	// claim in flight, so that claims in flight at once never over-fill one.
	busy := make(map[string]int, len(r.pools))
	inFlight := 0
	wanted := true        // work may be due: a claim is worth a try
	var retryAt time.Time // after a failed claim (wall clock), none before this
	// handle starts the jobs of a claim and gives back the slots it
	// reserved but did not fill. A pool that got every slot it asked for may
	// have more due.
	reported := map[string]bool{} // the unreadable jobs logged already
	handle := func(res claimed) {
		inFlight--
		if res.err != nil && claimCtx.Err() == nil {
			// Log and wait: a store that cannot claim must not spin the loop.
			r.opt.Logger.Error("claim jobs", slog.Any("err", res.err))
			retryAt = time.Now().Add(time.Second)
		}
		// A claim steps over a job record that cannot be read, moving it to
		// the dead letters (store.Claim); it is said here, once.
		for _, u := range r.st.UnreadableOf("job") {
			if !reported[u.ID] {
				reported[u.ID] = true
				r.opt.Logger.Error("a job cannot be read: it is in the dead letters, and the queue goes on", "job_id", u.ID, "reason", u.Reason)
			}
		}
		got := make(map[string]int, len(r.pools))
		for _, j := range res.jobs {
			p := r.pool(j.Kind)
			got[p]++
			ru.running.Add(1)
			ctx := jobCtx
			if r.interrupted(j.Kind) {
				ctx = claimCtx // ends as Stop begins
			}
			go r.execute(ctx, ru, j, p, freed)
		}
		release := func(p string, n int) {
			busy[p] -= n - got[p]
			if n > 0 && got[p] == n && res.err == nil {
				wanted = true
			}
		}
		for p, n := range res.lim.Kinds {
			release(p, n)
		}
		release(otherPool, res.lim.Other)
	}
	// Jobs a claim leased are run even when stopping; the runner's Stop
	// then waits for them or releases them.
	defer func() {
		for inFlight > 0 {
			handle(<-results)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// nextAt is the earliest due job the last look at the queue found for
	// the pools with room (zero: none); look says it is to be read again.
	var nextAt time.Time
	look := true
	for {
		// Take back what finished meanwhile.
	drain:
		for {
			select {
			case p := <-freed:
				busy[p]--
				wanted, look = true, true
			case res := <-results:
				handle(res)
				look = true
			default:
				break drain
			}
		}
		// A job WakeAt told of is due: the claim that follows finds it.
		if soon := r.soon.Load(); soon != 0 && soon <= r.opt.Now().UnixNano() {
			r.soon.CompareAndSwap(soon, 0)
			wanted = true
		}
		if claimCtx.Err() != nil {
			return
		}
		lim, room := r.limits(busy)
		if room && wanted && inFlight < maxClaims && !time.Now().Before(retryAt) {
			for p, n := range lim.Kinds {
				busy[p] += n
			}
			busy[otherPool] += lim.Other
			inFlight++
			wanted = false
			go func(lim store.ClaimLimits) {
				jobs, err := r.st.Claim(claimCtx, r.opt.Now(), lim, r.opt.Lease)
				results <- claimed{jobs: jobs, lim: lim, err: err}
			}(lim)
			lim, room = r.limits(busy)
		}
		// Sleep until the next job a pool with room could take is due (a
		// claim in flight wakes the loop when it returns); a job due
		// already, committed after the claim read, makes it 1ms. The queue
		// is looked at again only when something but WakeAt woke the loop:
		// WakeAt says itself when its job is due.
		wait := time.Hour
		switch {
		case time.Now().Before(retryAt):
			wait = time.Until(retryAt)
		case room && inFlight == 0:
			if look {
				next, ok, err := r.st.NextRunAt(lim)
				if err == nil {
					look, nextAt = false, time.Time{}
					if ok {
						nextAt = next
					}
				}
			}
			if !nextAt.IsZero() {
				wait = max(nextAt.Sub(r.opt.Now()), time.Millisecond)
			}
		}
		if soon := r.soon.Load(); soon != 0 {
			wait = min(wait, max(time.Unix(0, soon).Sub(r.opt.Now()), time.Millisecond))
		}
		if r.opt.Poll > 0 {
			wait = min(wait, r.opt.Poll)
		}
		timer.Reset(wait)
		look = true
		select {
		case <-r.wake:
			wanted = true
		case <-r.resleep:
			look = false
		case <-timer.C:
			wanted = true
		case p := <-freed:
			busy[p]--
			wanted = true
		case res := <-results:
			handle(res)
		case <-claimCtx.Done():
			return
		}
		// Since Go 1.23 a stopped timer delivers no stale tick, so the next
		// Reset needs no drain.
		timer.Stop()
	}
}

// finish records the end of j's attempt. While the store is unavailable
// (a database restarting, a failover) it tries again, every 100 ms up to
// every 2 s, until the lease ends at until: the attempt's end is recorded
// as soon as the store takes writes again, instead of the job waiting for
// its lease to be reaped. A repeat is safe: FinishJob ends only the
// attempt of j's execution, and a commit is never reported as failed.
// It stops trying once ctx ends (a stop past its grace): the lease's end
// then releases the job.
func (r *Runner) finish(ctx context.Context, j store.Job, res store.Result, until time.Time) (store.Job, error) {
	pause := 100 * time.Millisecond
	for {
		fin, err := r.st.FinishJob(context.WithoutCancel(ctx), j.ID, j.ExecutionID, r.opt.Now(), res)
		if err == nil || !errors.Is(err, store.ErrUnavailable) || time.Now().Add(pause).After(until) {
			return fin, err
		}
		select {
		case <-ctx.Done():
			return fin, err
		case <-time.After(pause): // the next try of a write the store refused for now
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// leaseMargin is how long before its lease a job's context ends, so that a
// slow attempt records its own end before the reaper could take the job.
const leaseMargin = 5 * time.Second

func (r *Runner) execute(ctx context.Context, ru *run, j store.Job, pool string, freed chan<- string) {
	defer func() {
		ru.running.Done()
		freed <- pool
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
	r.stopsMu.Lock()
	r.stops[j.ExecutionID] = cancel
	r.stopsMu.Unlock()
	started := time.Now()
	err := r.run(runCtx, j)
	cancel()
	r.stopsMu.Lock()
	delete(r.stops, j.ExecutionID)
	r.stopsMu.Unlock()
	res := r.decide(j, err, ctx.Err() != nil)
	fin, ferr := r.finish(ctx, j, res, deadline.Add(leaseMargin))
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
		log.Error("job discarded into the dead letters", append(attrs, "reason", discardReason(fin, res), slog.Any("err", err))...)
	case store.JobRetryable:
		if res.Released {
			log.Info("job released at shutdown; it runs again after the restart", append(attrs, slog.Any("err", err))...)
			break
		}
		fallthrough
	default:
		log.Warn("job attempt failed; will retry", append(attrs, "retry_at", fin.RunAt, slog.Any("err", err))...)
	}
}

// discardReason says in a sentence why the attempt res discarded job j.
func discardReason(j store.Job, res store.Result) string {
	if res.Outcome == store.OutcomeDiscarded {
		return "it failed for good (no attempt can succeed): " + res.Err
	}
	return fmt.Sprintf("its last attempt (%d of %d) failed: %s", j.Attempt, j.MaxAttempts, res.Err)
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
	var snooze *Snooze
	_, unreadable := store.AsUnreadable(err)
	switch {
	case errors.As(err, &discard):
		res.Outcome = store.OutcomeDiscarded
	case unreadable:
		// A record the work needs cannot be read: no attempt can read it
		// either, so the job goes to the dead letters now, saying which.
		res.Outcome = store.OutcomeDiscarded
	case errors.As(err, &snooze):
		// The attempt did nothing: it does not count, even at shutdown.
		res.Outcome, res.RetryAt, res.Snoozed = store.OutcomeRetry, now.Add(snooze.After), true
	case abandoned:
		// Shutdown: hand the job straight back; the attempt still counts
		// (never to a discard).
		res.Outcome, res.RetryAt, res.Released = store.OutcomeRetry, now, true
		res.Err = "released at shutdown: " + res.Err
	case errors.As(err, &later):
		res.Outcome, res.RetryAt = store.OutcomeRetry, now.Add(later.After)
	default:
		res.Outcome, res.RetryAt = store.OutcomeRetry, now.Add(r.opt.Backoff.Delay(j.Attempt, r.opt.Jitter()))
	}
	return res
}
