package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/leads"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/oklog/ulid/v2"
)

func TestRunnerAttempts(t *testing.T) {
	tests := []struct {
		name         string
		maxAttempts  int
		fn           func(ctx context.Context, call int, job store.Job) error
		wantState    store.JobState
		wantOutcomes []string
		wantErrors   []string // substrings of each attempt's error; "" means no error
		wantRaw      []string
	}{
		{
			name: "fails twice then succeeds", maxAttempts: 5,
			fn: func(_ context.Context, call int, _ store.Job) error {
				if call <= 2 {
					return fmt.Errorf("flaky %d", call)
				}
				return nil
			},
			wantState:    store.JobCompleted,
			wantOutcomes: []string{store.OutcomeRetry, store.OutcomeRetry, store.OutcomeCompleted},
			wantErrors:   []string{"flaky 1", "flaky 2", ""},
		},
		{
			name: "always fails", maxAttempts: 3,
			fn:           func(_ context.Context, call int, _ store.Job) error { return fmt.Errorf("boom %d", call) },
			wantState:    store.JobDiscarded,
			wantOutcomes: []string{store.OutcomeRetry, store.OutcomeRetry, store.OutcomeDiscarded},
			wantErrors:   []string{"boom 1", "boom 2", "boom 3"},
		},
		{
			name: "discard error ends at once", maxAttempts: 5,
			fn:           func(context.Context, int, store.Job) error { return &Discard{Err: errors.New("invalid input")} },
			wantState:    store.JobDiscarded,
			wantOutcomes: []string{store.OutcomeDiscarded},
			wantErrors:   []string{"invalid input"},
		},
		{
			name: "wrapped discard error", maxAttempts: 5,
			fn: func(context.Context, int, store.Job) error {
				return fmt.Errorf("send: %w", &Discard{Err: errors.New("number unknown")})
			},
			wantState:    store.JobDiscarded,
			wantOutcomes: []string{store.OutcomeDiscarded},
			wantErrors:   []string{"number unknown"},
		},
		{
			name: "panic is a failed attempt", maxAttempts: 3,
			fn: func(_ context.Context, call int, _ store.Job) error {
				if call == 1 {
					panic("nil map somewhere")
				}
				return nil
			},
			wantState:    store.JobCompleted,
			wantOutcomes: []string{store.OutcomeRetry, store.OutcomeCompleted},
			wantErrors:   []string{"panicked: nil map somewhere", ""},
		},
		{
			name: "panic on the last attempt discards", maxAttempts: 1,
			fn:           func(context.Context, int, store.Job) error { panic(errors.New("always")) },
			wantState:    store.JobDiscarded,
			wantOutcomes: []string{store.OutcomeDiscarded},
			wantErrors:   []string{"panicked: always"},
		},
		{
			name: "raw kept on the attempt", maxAttempts: 2,
			fn: func(_ context.Context, call int, _ store.Job) error {
				if call == 1 {
					return &WithRaw{Err: errors.New("the answer is not JSON"), Raw: `{"reply": "Hi`}
				}
				return nil
			},
			wantState:    store.JobCompleted,
			wantOutcomes: []string{store.OutcomeRetry, store.OutcomeCompleted},
			wantErrors:   []string{"the answer is not JSON", ""},
			wantRaw:      []string{`{"reply": "Hi`, ""},
		},
		{
			name: "raw kept on a discard", maxAttempts: 3,
			fn: func(context.Context, int, store.Job) error {
				return &Discard{Err: &WithRaw{Err: errors.New("refused"), Raw: "I cannot help with that"}}
			},
			wantState:    store.JobDiscarded,
			wantOutcomes: []string{store.OutcomeDiscarded},
			wantErrors:   []string{"refused"},
			wantRaw:      []string{"I cannot help with that"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			kind := &testkit.KindFunc{Fn: tt.fn}
			opt := testOptions()
			// Delays long enough that a retry run at once cannot pass for one
			// that waited (jitter 0 takes half of each: 20, 40, 80 ms).
			opt.Backoff = Backoff{Base: 40 * time.Millisecond, Max: 160 * time.Millisecond}
			j := testkit.Enqueue(t, st, "test", "web:1", tt.maxAttempts, time.Now())
			startRunner(t, st, map[string]Kind{"test": kind}, opt)
			got := testkit.WaitJob(t, st, j.ID, tt.wantState)

			if !slices.Equal(outcomes(got), tt.wantOutcomes) {
				t.Errorf("attempt outcomes = %v, want %v", outcomes(got), tt.wantOutcomes)
			}
			if got.Attempt != len(tt.wantOutcomes) || len(got.Attempts) != len(tt.wantOutcomes) {
				t.Fatalf("Attempt = %d with %d records, want %d", got.Attempt, len(got.Attempts), len(tt.wantOutcomes))
			}
			calls := kind.Calls()
			if len(calls) != len(tt.wantOutcomes) {
				t.Errorf("kind ran %d times, want %d", len(calls), len(tt.wantOutcomes))
			}
			execs := map[string]bool{}
			for i, a := range got.Attempts {
				if a.Number != i+1 || a.EndedAt == nil || a.EndedAt.Before(a.StartedAt) {
					t.Errorf("attempt %d = number %d started %s ended %v, want numbered and ended", i+1, a.Number, a.StartedAt, a.EndedAt)
				}
				if a.ExecutionID == "" || execs[a.ExecutionID] {
					t.Errorf("attempt %d execution id %q is empty or reused", i+1, a.ExecutionID)
				}
				execs[a.ExecutionID] = true
				if i < len(calls) && calls[i].ExecutionID != a.ExecutionID {
					t.Errorf("call %d ran as execution %s, attempt %d records %s", i+1, calls[i].ExecutionID, i+1, a.ExecutionID)
				}
				if want := tt.wantErrors[i]; (want == "") != (a.Error == "") || !strings.Contains(a.Error, want) {
					t.Errorf("attempt %d error = %q, want it to contain %q", i+1, a.Error, want)
				}
				if tt.wantRaw != nil && a.Raw != tt.wantRaw[i] {
					t.Errorf("attempt %d raw = %q, want %q", i+1, a.Raw, tt.wantRaw[i])
				}
				if i > 0 {
					// The retry waited the backoff after the attempt before it
					// ended. The retry time is taken a moment before the end is
					// recorded, hence the small allowance.
					prev := got.Attempts[i-1]
					want := opt.Backoff.Delay(i, 0) - 5*time.Millisecond
					if wait := a.StartedAt.Sub(*prev.EndedAt); wait < want {
						t.Errorf("attempt %d started %s after attempt %d ended, want at least the backoff %s", i+1, wait, i, opt.Backoff.Delay(i, 0))
					}
				}
			}
			if tt.wantState == store.JobDiscarded {
				if last := got.Attempts[len(got.Attempts)-1].Error; got.LastError != last {
					t.Errorf("LastError = %q, want the last attempt's error %q", got.LastError, last)
				}
			}
		})
	}
}

func TestRunnerUnknownKindDiscards(t *testing.T) {
	st := openStore(t)
	j := testkit.Enqueue(t, st, "from-a-newer-binary", "web:1", 3, time.Now())
	startRunner(t, st, map[string]Kind{}, testOptions())
	got := testkit.WaitJob(t, st, j.ID, store.JobDiscarded)
	if len(got.Attempts) != 1 || !strings.Contains(got.LastError, "from-a-newer-binary") {
		t.Errorf("job = %d attempts, last error %q; want one attempt naming the kind", len(got.Attempts), got.LastError)
	}
}

// TestRunnerWakeStartsWork shows that Wake, not a timer, starts new work:
// the runner is asleep on a 1-hour timer (its only job is due in an hour of
// its clock) when the clock moves on and Wake is called.
func TestRunnerWakeStartsWork(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	clock := testkit.NewClock(now)
	kind := &testkit.KindFunc{Fn: func(context.Context, int, store.Job) error { return nil }}
	var j store.Job
	err := st.Update(context.Background(), func(tx *store.Tx) (err error) {
		j, _, err = tx.Enqueue(store.NewJob{ID: "01JTESTWAKE0000000000000000", Kind: "test", Key: "web:1", MaxAttempts: 1, RunAt: now.Add(time.Hour)}, "c", now)
		return err
	})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	opt := testOptions()
	opt.Now = clock.Now
	r := startRunner(t, st, map[string]Kind{"test": kind}, opt)
	// Start reads the clock to reap, the dispatcher to claim and to set its
	// timer for the job an hour away; after that it sleeps.
	testkit.Eventually(t, 10*time.Second, func() bool { return clock.Reads() >= 3 }, "the runner to set its timer")
	if n := len(kind.Calls()); n != 0 {
		t.Fatalf("the job ran %d times before it was due", n)
	}
	clock.Advance(time.Hour)
	r.Wake()
	testkit.WaitJob(t, st, j.ID, store.JobCompleted)
}

// TestRunnerRunsRetryAtItsTime: nothing wakes the runner; it must set its
// own timer for the retry.
func TestRunnerRunsRetryAtItsTime(t *testing.T) {
	st := openStore(t)
	kind := &testkit.KindFunc{Fn: func(_ context.Context, call int, _ store.Job) error {
		if call == 1 {
			return &RetryLater{Err: errors.New("429"), After: 20 * time.Millisecond}
		}
		return nil
	}}
	j := testkit.Enqueue(t, st, "test", "web:1", 3, time.Now())
	startRunner(t, st, map[string]Kind{"test": kind}, testOptions())
	got := testkit.WaitJob(t, st, j.ID, store.JobCompleted)
	if wait := got.Attempts[1].StartedAt.Sub(got.Attempts[0].StartedAt); wait < 20*time.Millisecond {
		t.Errorf("retry started %s after the first attempt, want at least the 20ms asked for", wait)
	}
}

func TestRunnerManyJobs(t *testing.T) {
	st := openStore(t)
	kind := &testkit.KindFunc{Fn: func(_ context.Context, _ int, j store.Job) error {
		if j.Attempt == 1 && strings.HasSuffix(j.Key, "7") {
			return errors.New("first try fails")
		}
		return nil
	}}
	var ids []string
	for i := range 40 {
		ids = append(ids, testkit.Enqueue(t, st, "test", fmt.Sprint("web:", i), 3, time.Now()).ID)
	}
	opt := testOptions()
	opt.Workers = 4
	startRunner(t, st, map[string]Kind{"test": kind}, opt)
	for _, id := range ids {
		testkit.WaitJob(t, st, id, store.JobCompleted)
	}
	if n := len(kind.Calls()); n != 44 {
		t.Errorf("kind ran %d times, want 44 (40 jobs, 4 of them twice)", n)
	}
}

func TestRunnerStopReleasesBlockedJob(t *testing.T) {
	st := openStore(t)
	started := make(chan struct{})
	kind := &testkit.KindFunc{Fn: func(ctx context.Context, _ int, _ store.Job) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}}
	j := testkit.Enqueue(t, st, "test", "web:1", 3, time.Now())
	r := NewRunner(st, map[string]Kind{"test": kind}, testOptions())
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatalf("the job did not start within 10s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(ctx) }()
	var err error
	select {
	case err = <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("Stop did not return within 10s of its 50ms context")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want an error wrapping context.DeadlineExceeded (a job had to be cancelled)", err)
	}
	got, jerr := st.Job(j.ID)
	if jerr != nil {
		t.Fatalf("Job: %v", jerr)
	}
	if got.State != store.JobRetryable || got.LeaseUntil != nil {
		t.Fatalf("after Stop the job is %s (lease %v), want retryable without a lease", got.State, got.LeaseUntil)
	}
	if len(got.Attempts) != 1 {
		t.Fatalf("job has %d attempts, want 1", len(got.Attempts))
	}
	if a := got.Attempts[0]; a.Outcome != store.OutcomeRetry || !strings.Contains(a.Error, "shutdown") || a.EndedAt == nil {
		t.Errorf("attempt = %+v, want outcome retry with an error mentioning shutdown", a)
	}
	if s, err := st.Stats(); err != nil || s.Leased != 0 {
		t.Errorf("Stats = %+v, %v; want no job leased after Stop", s, err)
	}
	// A second Stop is harmless.
	if err := r.Stop(context.Background()); err != nil {
		t.Errorf("second Stop = %v, want nil", err)
	}
}

func TestRunnerStopWaitsForJobsThatFinish(t *testing.T) {
	st := openStore(t)
	started, release := make(chan struct{}), make(chan struct{})
	kind := &testkit.KindFunc{Fn: func(ctx context.Context, _ int, _ store.Job) error {
		close(started)
		<-release
		return ctx.Err() // nil unless Stop cancelled it
	}}
	j := testkit.Enqueue(t, st, "test", "web:1", 3, time.Now())
	r := NewRunner(st, map[string]Kind{"test": kind}, testOptions())
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start within 10s")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background()) }()
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Stop = %v, want nil (the job finished)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Stop did not return within 10s")
	}
	if got, _ := st.Job(j.ID); got.State != store.JobCompleted {
		t.Errorf("job = %s, want completed (Stop waits for running jobs)", got.State)
	}
}

// TestRunnerStartReapsJobsLeftRunning simulates a process that died with a
// job claimed: the next runner's Start gives it back and runs it again.
func TestRunnerStartReapsJobsLeftRunning(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	j := testkit.Enqueue(t, st, "test", "web:1", 3, now)
	dead, err := st.Claim(context.Background(), now, store.AnyJobs(1), time.Hour)
	if err != nil || len(dead) != 1 {
		t.Fatalf("Claim = %d jobs, %v; want 1", len(dead), err)
	}
	kind := &testkit.KindFunc{Fn: func(context.Context, int, store.Job) error { return nil }}
	startRunner(t, st, map[string]Kind{"test": kind}, testOptions())
	got := testkit.WaitJob(t, st, j.ID, store.JobCompleted)
	if want := []string{store.OutcomeLeaseExpired, store.OutcomeCompleted}; !slices.Equal(outcomes(got), want) {
		t.Errorf("attempt outcomes = %v, want %v", outcomes(got), want)
	}
	calls := kind.Calls()
	if len(calls) != 1 || calls[0].ExecutionID == dead[0].ExecutionID || calls[0].Attempt != 2 {
		t.Errorf("kind calls = %d, want one new execution as attempt 2 (dead execution %s)", len(calls), dead[0].ExecutionID)
	}
	if got.Attempts[0].ExecutionID != dead[0].ExecutionID {
		t.Errorf("first attempt execution = %s, want the dead one %s", got.Attempts[0].ExecutionID, dead[0].ExecutionID)
	}
}

// TestRunnerJobContextFollowsInjectedClock: the job's context must end a
// little before its lease, measured on the runner's clock. With a clock that
// is not the wall clock (tests, replays), the deadline must still be
// "lease minus margin from now", not an absolute wall-clock time computed
// from the injected clock.
func TestRunnerJobContextFollowsInjectedClock(t *testing.T) {
	for _, offset := range []time.Duration{-24 * time.Hour, 0} {
		t.Run(fmt.Sprint("clock offset ", offset), func(t *testing.T) {
			st := openStore(t)
			now := time.Now().Add(offset)
			clock := testkit.NewClock(now)
			type seen struct {
				err  error
				left time.Duration
			}
			got := make(chan seen, 1)
			kind := &testkit.KindFunc{Fn: func(ctx context.Context, _ int, _ store.Job) error {
				dl, _ := ctx.Deadline()
				got <- seen{ctx.Err(), time.Until(dl)}
				return nil
			}}
			j := testkit.Enqueue(t, st, "test", "web:1", 1, now)
			opt := testOptions()
			opt.Now = clock.Now
			opt.Lease = time.Minute
			startRunner(t, st, map[string]Kind{"test": kind}, opt)
			var s seen
			select {
			case s = <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("the job did not run within 10s")
			}
			if s.err != nil {
				t.Errorf("job context at the start of Run: %v, want live (lease 1m)", s.err)
			}
			if s.left <= 50*time.Second || s.left > 55*time.Second {
				t.Errorf("job context ends in %s, want about 55s (lease 1m minus the 5s margin)", s.left)
			}
			testkit.WaitJob(t, st, j.ID, store.JobCompleted)
		})
	}
}

// TestRunnerPoolsPerKind: each kind runs in its own pool. Drafts fill
// their pool of 8 and no more, with 40 waiting, and a deliver job enqueued
// behind all of them still runs at once in its own pool of Workers.
func TestRunnerPoolsPerKind(t *testing.T) {
	st := openStore(t)
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	draft := &testkit.KindFunc{Fn: func(context.Context, int, store.Job) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	}}
	deliver := &testkit.KindFunc{Fn: func(context.Context, int, store.Job) error { return nil }}
	var ids []string
	for i := range 48 {
		ids = append(ids, testkit.Enqueue(t, st, "draft", fmt.Sprint("web:", i), 1, time.Now()).ID)
	}
	opt := testOptions()
	opt.Workers = 1
	opt.Concurrency = map[string]int{"draft": 8}
	r := startRunner(t, st, map[string]Kind{"draft": draft, "deliver": deliver}, opt)
	testkit.Eventually(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return inFlight == 8 }, "8 drafts to run")

	d := testkit.Enqueue(t, st, "deliver", "out:1", 1, time.Now())
	r.Wake() // as every enqueue in handoff does once it commits
	testkit.WaitJob(t, st, d.ID, store.JobCompleted)
	counts, err := st.JobCounts()
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, c := range counts {
		if c.Kind == "draft" && c.State == store.JobRunning {
			running = c.N
		}
	}
	if running != 8 {
		t.Errorf("%d draft jobs claimed while the pool of 8 was full, want 8", running)
	}
	close(release)
	for _, id := range ids {
		testkit.WaitJob(t, st, id, store.JobCompleted)
	}
	if most != 8 {
		t.Errorf("at most %d drafts ran at once, want the pool's 8", most)
	}
}

// TestRunnerLiveCheckUnderIngest: webhooks recorded concurrently (several
// messages per conversation, so turns move queued draft jobs and enqueue
// new ones) while the runner claims and finishes them; a live Check during
// the load and one after it both find the indexes and counts in step.
func TestRunnerLiveCheckUnderIngest(t *testing.T) {
	st := openStore(t)
	work := &testkit.KindFunc{Fn: func(_ context.Context, _ int, j store.Job) error {
		if j.Attempt == 1 && strings.HasSuffix(j.Key, "3") {
			return errors.New("first try fails")
		}
		return nil
	}}
	opt := testOptions()
	opt.Workers = 4
	r := startRunner(t, st, map[string]Kind{store.KindDraft: work}, opt)

	const senders, each = 6, 12
	var wg sync.WaitGroup
	errs := make(chan error, senders*each+64)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				now := time.Now()
				id := ulid.Make().String()
				key := fmt.Sprintf("web:s%d-m%d", s, i)
				ev := store.Event{ID: id, Key: key, Channel: "web", MessageID: key, CorrelationID: id,
					ConversationID: fmt.Sprintf("conv-%d-%d", s, i%3), Text: "hello", ReceivedAt: now}
				nj := store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: key, MaxAttempts: 3, RunAt: now}
				if _, err := leads.RecordEvent(context.Background(), st, ev, nj); err != nil {
					errs <- err
					return
				}
				r.Wake()
			}
		}()
	}
	checks := make(chan struct{})
	go func() {
		defer close(checks)
		for range 8 {
			if err := st.Check(); err != nil {
				errs <- fmt.Errorf("live check during ingest: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	<-checks
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		counts, err := st.JobCounts()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if !c.State.Final() && c.N > 0 {
				return false
			}
		}
		return true
	}, "every draft job to end")
	if err := st.Check(); err != nil {
		t.Fatalf("check after the load: %v", err)
	}
}

// TestRunnerStopLeavesNothingRunning: Stop, called while claims are in
// flight (many pools, jobs that finish at once), returns only after every
// job it leased has ended or been released: no job is left running.
func TestRunnerStopLeavesNothingRunning(t *testing.T) {
	st := openStore(t)
	var ran sync.Map
	quick := &testkit.KindFunc{Fn: func(_ context.Context, _ int, j store.Job) error { ran.Store(j.ID, true); return nil }}
	kinds := map[string]Kind{"a": quick, "b": quick, "c": quick, "d": quick}
	for i := range 400 {
		testkit.Enqueue(t, st, string(rune('a'+i%4)), fmt.Sprint("web:", i), 1, time.Now())
	}
	opt := testOptions()
	opt.Workers = 2
	for round := range 10 {
		r := NewRunner(st, kinds, opt)
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		before := 0
		ran.Range(func(any, any) bool { before++; return true })
		testkit.Eventually(t, 10*time.Second, func() bool {
			n := 0
			ran.Range(func(any, any) bool { n++; return true })
			return n > before || n == 400
		}, "a job to run")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.Stop(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Stop: %v", round, err)
		}
		counts, err := st.JobCounts()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if c.State == store.JobRunning && c.N > 0 {
				t.Fatalf("round %d: %d %s jobs still running after Stop returned", round, c.N, c.Kind)
			}
		}
	}
}

// TestRunnerRestartBesideStop: a restart (what a restore does: Stop, then
// Start) overlapping another Stop (the process shutting down) keeps each
// start's jobs apart: every Stop waits for the jobs of the start it ends,
// and once the last Stop returns no job is running.
func TestRunnerRestartBesideStop(t *testing.T) {
	st := openStore(t)
	quick := &testkit.KindFunc{Fn: func(context.Context, int, store.Job) error { return nil }}
	for i := range 300 {
		testkit.Enqueue(t, st, "test", fmt.Sprint("web:", i), 1, time.Now())
	}
	opt := testOptions()
	opt.Workers = 4
	r := NewRunner(st, map[string]Kind{"test": quick}, opt)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
	for range 20 {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			stop()
			if err := r.Start(context.Background()); err != nil {
				t.Errorf("Start again: %v", err)
			}
		}()
		go func() { defer wg.Done(); stop() }()
		wg.Wait()
	}
	stop()
	counts, err := st.JobCounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if c.State == store.JobRunning && c.N > 0 {
			t.Fatalf("%d %s jobs still running after the last Stop", c.N, c.Kind)
		}
	}
}

// interruptible is a testkit.KindFunc whose attempts a stop cancels at once.
type interruptible struct{ *testkit.KindFunc }

func (interruptible) InterruptedByStop() bool { return true }

// TestRunnerStopInterruptsDrafts: a stop cancels an Interruptible kind's
// attempt at once (its job released, the attempt closed, never
// discarded), while it waits for a send in flight to finish; the next
// start runs the released job again to completion.
func TestRunnerStopInterruptsDrafts(t *testing.T) {
	st := openStore(t)
	draftStarted, sendStarted, sendRelease := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var sendCtxErr error
	draft := interruptible{&testkit.KindFunc{Fn: func(ctx context.Context, call int, _ store.Job) error {
		if call > 1 {
			return nil // after the restart
		}
		close(draftStarted)
		<-ctx.Done() // the model call, aborted
		return ctx.Err()
	}}}
	send := &testkit.KindFunc{Fn: func(ctx context.Context, _ int, _ store.Job) error {
		close(sendStarted)
		<-sendRelease
		sendCtxErr = ctx.Err()
		return nil
	}}
	kinds := map[string]Kind{store.KindDraft: draft, "deliver": send}
	dj := testkit.Enqueue(t, st, store.KindDraft, "web:1", 1, time.Now()) // its last attempt: a release must not discard it
	sj := testkit.Enqueue(t, st, "deliver", "out:1", 3, time.Now())
	r := NewRunner(st, kinds, testOptions())
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		select {
		case <-draftStarted:
		default:
			return false
		}
		select {
		case <-sendStarted:
			return true
		default:
			return false
		}
	}, "both jobs running")
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background()) }() // no deadline: only the send is waited for
	testkit.Eventually(t, 10*time.Second, func() bool {
		j, err := st.Job(dj.ID)
		return err == nil && j.State == store.JobRetryable
	}, "the draft released while the send still runs")
	got, err := st.Job(dj.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Attempts[0]; got.LeaseUntil != nil || a.EndedAt == nil || a.Outcome != store.OutcomeRetry || !strings.Contains(a.Error, "shutdown") {
		t.Errorf("the interrupted draft job: lease %v, attempt %+v; want no lease, its attempt closed as released at shutdown", got.LeaseUntil, a)
	}
	if j, _ := st.Job(sj.ID); j.State != store.JobRunning {
		t.Errorf("the send is %s while the stop waits for it; want running", j.State)
	}
	close(sendRelease)
	if err := <-stopped; err != nil {
		t.Errorf("Stop = %v; want nil (the send finished, the draft was released)", err)
	}
	if sendCtxErr != nil {
		t.Errorf("the send's context ended (%v); the stop must let it finish", sendCtxErr)
	}
	if j, _ := st.Job(sj.ID); j.State != store.JobCompleted {
		t.Errorf("the send's job is %s; want completed", j.State)
	}

	startRunner(t, st, kinds, testOptions())
	if j := testkit.WaitJob(t, st, dj.ID, store.JobCompleted); len(j.Attempts) != 2 {
		t.Errorf("the draft job after the restart has %d attempts; want 2, the released one and the one that drafted", len(j.Attempts))
	}
}

// A job committed while the runner sleeps, due before the job it sleeps
// for, runs at its time with no Wake: its commit told the runner when
// (store.HookDue and WakeAt). Without that the runner would sleep on, for
// the hour until the other job.
func TestRunnerWokenByTheCommitOfAJobDueLater(t *testing.T) {
	st := openStore(t)
	kind := &testkit.KindFunc{Fn: func(context.Context, int, store.Job) error { return nil }}
	now := time.Now()
	clock := testkit.NewClock(now)
	testkit.Enqueue(t, st, "test", "web:an hour away", 1, now.Add(time.Hour))
	opt := testOptions()
	opt.Now = clock.Now
	startRunner(t, st, map[string]Kind{"test": kind}, opt)
	// Start reads the clock to reap, the dispatcher to claim and, after
	// its look at the queue, to set its timer for the job an hour away.
	testkit.Eventually(t, 10*time.Second, func() bool { return clock.Reads() >= 3 }, "the runner to set its timer")
	due := now.Add(150 * time.Millisecond)
	var j store.Job
	if err := st.Update(context.Background(), func(tx *store.Tx) (err error) {
		j, _, err = tx.Enqueue(store.NewJob{ID: "01JTESTDUELATER00000000000", Kind: "test", Key: "web:fish & chips", MaxAttempts: 1, RunAt: due}, "c", now)
		return err
	}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if n := len(kind.Calls()); n != 0 {
		t.Fatalf("a job ran %d times before it was due", n)
	}
	clock.Advance(time.Second)
	got := testkit.WaitJob(t, st, j.ID, store.JobCompleted)
	if at := got.Attempts[0].StartedAt; at.Before(due) {
		t.Errorf("the job started at %s, before it was due at %s", at, due)
	}
}
