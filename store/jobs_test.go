package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/storetest"
)

func TestEnqueueUniqueUnderConcurrency(t *testing.T) {
	st := openTest(t)
	const n = 50
	jobs := make([]Job, n)
	created := make([]bool, n)
	errs := make([]error, n)
	together(n, func(i int) {
		nj := NewJob{ID: ulid.Make().String(), Kind: "send", Key: "web:lead-1", MaxAttempts: 3}
		errs[i] = st.Update(context.Background(), func(tx *Tx) (err error) { jobs[i], created[i], err = tx.Enqueue(nj, "corr-1", t0); return err })
	})
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: Enqueue: %v", i, errs[i])
		}
		if created[i] {
			nCreated++
		}
		if jobs[i].ID != jobs[0].ID {
			t.Errorf("caller %d got job %s, caller 0 got %s: want the same live job", i, jobs[i].ID, jobs[0].ID)
		}
	}
	if nCreated != 1 {
		t.Fatalf("%d callers created a job, want exactly 1", nCreated)
	}
	if got := countKeys(t, st, bucketJobs); got != 1 {
		t.Fatalf("jobs bucket holds %d jobs, want 1", got)
	}
	first := jobs[0]

	// A running job is still live: enqueueing again returns it.
	run := claimOne(t, st, t0, time.Minute)
	var again Job
	var ok bool
	err := st.Update(context.Background(), func(tx *Tx) (err error) {
		again, ok, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "send", Key: "web:lead-1"}, "corr-1", t0)
		return err
	})
	if err != nil || ok || again.ID != first.ID {
		t.Fatalf("Enqueue while running = %s created %v err %v, want the running job %s", again.ID, ok, err, first.ID)
	}
	// The same key under another kind is another job.
	var other Job
	err = st.Update(context.Background(), func(tx *Tx) (err error) {
		other, ok, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "draft", Key: "web:lead-1"}, "corr-1", t0)
		return err
	})
	if err != nil || !ok || other.ID == first.ID {
		t.Fatalf("Enqueue of another kind = %s created %v err %v, want a new job", other.ID, ok, err)
	}

	if _, err := st.FinishJob(context.Background(), run.ID, run.ExecutionID, t0.Add(time.Second), Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	var next Job
	err = st.Update(context.Background(), func(tx *Tx) (err error) {
		next, ok, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "send", Key: "web:lead-1"}, "corr-1", t0.Add(2*time.Second))
		return err
	})
	if err != nil || !ok || next.ID == first.ID {
		t.Fatalf("Enqueue after the job completed = %s created %v err %v, want a new job", next.ID, ok, err)
	}
	if next.State != JobAvailable || !next.RunAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("new job state %s run at %s, want available at %s (RunAt defaults to now)", next.State, next.RunAt, t0.Add(2*time.Second))
	}
}

func TestClaimAnyJobs(t *testing.T) {
	now := t0.Add(time.Hour)
	// Offsets of RunAt from now; positive ones are not due.
	offsets := []time.Duration{3 * time.Second, -time.Second, 0, -10 * time.Minute, 10 * time.Second, -2 * time.Second, time.Nanosecond}
	tests := []struct {
		name string
		max  int
		want []time.Duration // the RunAt offsets claimed, in order
	}{
		{"all due", 10, []time.Duration{-10 * time.Minute, -2 * time.Second, -time.Second, 0}},
		{"at most max", 2, []time.Duration{-10 * time.Minute, -2 * time.Second}},
		{"one", 1, []time.Duration{-10 * time.Minute}},
		{"none asked", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openTest(t)
			byRunAt := map[time.Time]Job{}
			for _, off := range offsets {
				j := enqueueAt(t, st, now.Add(off), 3)
				byRunAt[j.RunAt] = j
			}
			const lease = 90 * time.Second
			got, err := st.Claim(context.Background(), now, AnyJobs(tt.max), lease)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			var gotOffsets []time.Duration
			for _, j := range got {
				gotOffsets = append(gotOffsets, j.RunAt.Sub(now))
			}
			if !slices.Equal(gotOffsets, tt.want) {
				t.Fatalf("claimed jobs due at %v, want %v", gotOffsets, tt.want)
			}
			execs := map[string]bool{}
			for _, j := range got {
				checkClaimed(t, j, now, lease, 1)
				if execs[j.ExecutionID] {
					t.Errorf("execution id %s given to two jobs", j.ExecutionID)
				}
				execs[j.ExecutionID] = true
				if stored := mustJob(t, st, j.ID); stored.State != JobRunning || stored.ExecutionID != j.ExecutionID || len(stored.Attempts) != 1 {
					t.Errorf("stored job %s = %s exec %s attempts %d, want running exec %s with 1 attempt", j.ID, stored.State, stored.ExecutionID, len(stored.Attempts), j.ExecutionID)
				}
			}
			// What was not claimed is still available, and the not-due jobs are never claimed now.
			claimed := len(got)
			rest, err := st.Claim(context.Background(), now, AnyJobs(100), lease)
			if err != nil {
				t.Fatalf("second Claim: %v", err)
			}
			if want := 4 - claimed; len(rest) != want {
				t.Errorf("second Claim claimed %d, want the %d due jobs left", len(rest), want)
			}
			for _, j := range rest {
				if j.RunAt.After(now) {
					t.Errorf("claimed job %s due at %s, after now %s", j.ID, j.RunAt, now)
				}
			}
			for _, off := range offsets {
				if off > 0 {
					if j := mustJob(t, st, byRunAt[now.Add(off)].ID); j.State != JobAvailable {
						t.Errorf("job due at now%+v is %s, want available", off, j.State)
					}
				}
			}
		})
	}
}

func TestClaimSameRunAtInIDOrder(t *testing.T) {
	st := openTest(t)
	var ids []string
	for range 5 {
		ids = append(ids, enqueueAt(t, st, t0, 1).ID)
	}
	got, err := st.Claim(context.Background(), t0, AnyJobs(10), time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	var gotIDs []string
	for _, j := range got {
		gotIDs = append(gotIDs, j.ID)
	}
	if !slices.Equal(gotIDs, ids) {
		t.Errorf("claimed %v, want %v (ULID order)", gotIDs, ids)
	}
}

func checkClaimed(t *testing.T, j Job, now time.Time, lease time.Duration, attempt int) {
	t.Helper()
	if j.State != JobRunning {
		t.Errorf("claimed job %s state = %s, want running", j.ID, j.State)
	}
	if j.Attempt != attempt {
		t.Errorf("claimed job %s Attempt = %d, want %d", j.ID, j.Attempt, attempt)
	}
	if j.ExecutionID == "" {
		t.Errorf("claimed job %s has no execution id", j.ID)
	}
	if j.LeaseUntil == nil || !j.LeaseUntil.Equal(now.Add(lease)) {
		t.Errorf("claimed job %s LeaseUntil = %v, want %s", j.ID, j.LeaseUntil, now.Add(lease))
	}
	if len(j.Attempts) != attempt {
		t.Fatalf("claimed job %s has %d attempt records, want %d", j.ID, len(j.Attempts), attempt)
	}
	a := j.Attempts[attempt-1]
	if a.ExecutionID != j.ExecutionID || a.Number != attempt || !a.StartedAt.Equal(now) || a.EndedAt != nil || a.Outcome != "" {
		t.Errorf("claimed job %s attempt record = %+v, want execution %s number %d started %s, not ended", j.ID, a, j.ExecutionID, attempt, now)
	}
}

func TestFinishJobLeaseLost(t *testing.T) {
	st := openTest(t)
	j := enqueueAt(t, st, t0, 3)
	run := claimOne(t, st, t0, time.Minute)
	ctx := context.Background()

	_, err := st.FinishJob(ctx, j.ID, "not-the-execution", t0.Add(time.Second), Result{Outcome: OutcomeCompleted})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("FinishJob with a wrong execution id: err = %v, want ErrLeaseLost", err)
	}
	if got := mustJob(t, st, j.ID); got.State != JobRunning || got.ExecutionID != run.ExecutionID {
		t.Fatalf("after a refused FinishJob the job is %s exec %s, want still running exec %s", got.State, got.ExecutionID, run.ExecutionID)
	}
	done, err := st.FinishJob(ctx, j.ID, run.ExecutionID, t0.Add(time.Second), Result{Outcome: OutcomeCompleted})
	if err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	if done.State != JobCompleted || done.LeaseUntil != nil || done.ExecutionID != "" {
		t.Errorf("finished job = %s lease %v exec %q, want completed with no lease", done.State, done.LeaseUntil, done.ExecutionID)
	}
	if a := done.Attempts[0]; a.Outcome != OutcomeCompleted || a.EndedAt == nil || !a.EndedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("attempt = %+v, want completed, ended at %s", a, t0.Add(time.Second))
	}
	// A second completion by the same execution is an answer, not an error:
	// a kind may complete its job in its own transaction before the runner does.
	again, err := st.FinishJob(ctx, j.ID, run.ExecutionID, t0.Add(2*time.Second), Result{Outcome: OutcomeCompleted})
	if err != nil || again.State != JobCompleted || !again.Attempts[0].EndedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("second completion of the same execution = %s (ended %v), %v; want the first completion unchanged", again.State, again.Attempts[0].EndedAt, err)
	}
	if _, err = st.FinishJob(ctx, j.ID, run.ExecutionID, t0.Add(2*time.Second), Result{Outcome: OutcomeRetry, Err: "late"}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a retry after the job completed: err = %v, want ErrLeaseLost", err)
	}
	_, err = st.FinishJob(ctx, "no-such-job", "x", t0, Result{Outcome: OutcomeCompleted})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishJob of an unknown job: err = %v, want ErrNotFound", err)
	}
}

func TestRetryIsNotClaimableBeforeRunAt(t *testing.T) {
	st := openTest(t)
	j := enqueueAt(t, st, t0, 3)
	first := claimOne(t, st, t0, time.Minute)
	retryAt := t0.Add(10 * time.Second)
	got, err := st.FinishJob(context.Background(), j.ID, first.ExecutionID, t0.Add(time.Second),
		Result{Outcome: OutcomeRetry, Err: "provider said 503", RetryAt: retryAt})
	if err != nil {
		t.Fatalf("FinishJob(retry): %v", err)
	}
	if got.State != JobRetryable || !got.RunAt.Equal(retryAt) || got.LastError != "provider said 503" {
		t.Fatalf("after retry job = %s run at %s last error %q, want retryable at %s with the error", got.State, got.RunAt, got.LastError, retryAt)
	}
	if a := got.Attempts[0]; a.Outcome != OutcomeRetry || a.Error != "provider said 503" {
		t.Errorf("attempt = %+v, want outcome retry with the error", a)
	}
	if next, ok, err := st.NextRunAt(AnyJobs(1)); err != nil || !ok || !next.Equal(retryAt) {
		t.Errorf("NextRunAt = %s %v %v, want %s", next, ok, err, retryAt)
	}
	for _, at := range []time.Time{t0.Add(time.Second), retryAt.Add(-time.Nanosecond)} {
		early, err := st.Claim(context.Background(), at, AnyJobs(10), time.Minute)
		if err != nil || len(early) != 0 {
			t.Fatalf("Claim at %s (before RunAt %s) = %d jobs, err %v; want none", at, retryAt, len(early), err)
		}
	}
	second := claimOne(t, st, retryAt, time.Minute)
	checkClaimed(t, second, retryAt, time.Minute, 2)
	if second.ExecutionID == first.ExecutionID {
		t.Errorf("second attempt reused execution id %s", first.ExecutionID)
	}
	if _, err := st.FinishJob(context.Background(), j.ID, second.ExecutionID, retryAt, Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
}

func TestRetryOnLastAttemptDiscards(t *testing.T) {
	for _, maxAttempts := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("max ", maxAttempts), func(t *testing.T) {
			st := openTest(t)
			j := enqueueAt(t, st, t0, maxAttempts)
			now := t0
			var last Job
			for a := 1; a <= maxAttempts; a++ {
				run := claimOne(t, st, now, time.Minute)
				var err error
				last, err = st.FinishJob(context.Background(), j.ID, run.ExecutionID, now,
					Result{Outcome: OutcomeRetry, Err: fmt.Sprint("failure ", a), RetryAt: now.Add(time.Second)})
				if err != nil {
					t.Fatalf("attempt %d: FinishJob: %v", a, err)
				}
				want := JobRetryable
				if a == maxAttempts {
					want = JobDiscarded
				}
				if last.State != want {
					t.Fatalf("after attempt %d of %d the job is %s, want %s", a, maxAttempts, last.State, want)
				}
				now = now.Add(time.Second)
			}
			var outcomes []string
			for _, a := range last.Attempts {
				outcomes = append(outcomes, a.Outcome)
			}
			wantOutcomes := append(slices.Repeat([]string{OutcomeRetry}, maxAttempts-1), OutcomeDiscarded)
			if !slices.Equal(outcomes, wantOutcomes) {
				t.Errorf("attempt outcomes = %v, want %v", outcomes, wantOutcomes)
			}
			if want := fmt.Sprint("failure ", maxAttempts); last.LastError != want {
				t.Errorf("LastError = %q, want %q", last.LastError, want)
			}
			if got, err := st.Claim(context.Background(), now.Add(time.Hour), AnyJobs(10), time.Minute); err != nil || len(got) != 0 {
				t.Errorf("Claim after discard = %d jobs, err %v; want none", len(got), err)
			}
			// A discarded job no longer holds its key.
			var created bool
			err := st.Update(context.Background(), func(tx *Tx) (err error) {
				_, created, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: j.Kind, Key: j.Key}, "c", now)
				return err
			})
			if err != nil || !created {
				t.Errorf("Enqueue after discard: created %v err %v, want a new job", created, err)
			}
		})
	}
}

func TestDiscardOutcomeEndsAtOnce(t *testing.T) {
	st := openTest(t)
	j := enqueueAt(t, st, t0, 5)
	run := claimOne(t, st, t0, time.Minute)
	got, err := st.FinishJob(context.Background(), j.ID, run.ExecutionID, t0, Result{Outcome: OutcomeDiscarded, Err: "invalid input"})
	if err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	if got.State != JobDiscarded || got.Attempt != 1 {
		t.Errorf("job = %s after attempt %d, want discarded after attempt 1", got.State, got.Attempt)
	}
}

func TestReap(t *testing.T) {
	type leased struct {
		name  string
		lease time.Duration // claimed at t0 with this lease
	}
	tests := []struct {
		name   string
		jobs   []leased
		at     time.Duration // reap at t0+at
		all    bool
		reaped []string
	}{
		{"lease running", []leased{{"a", time.Minute}}, 30 * time.Second, false, nil},
		{"lease expired", []leased{{"a", time.Minute}}, 61 * time.Second, false, []string{"a"}},
		{"only the expired", []leased{{"a", time.Minute}, {"b", 10 * time.Minute}, {"c", 30 * time.Second}}, 61 * time.Second, false, []string{"a", "c"}},
		{"all at start", []leased{{"a", time.Minute}, {"b", 10 * time.Minute}, {"c", time.Hour}}, 0, true, []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openTest(t)
			ids := map[string]string{}
			execs := map[string]string{}
			for _, l := range tt.jobs {
				j := enqueueAt(t, st, t0, 3)
				run := claimOne(t, st, t0, l.lease)
				ids[l.name], execs[l.name] = j.ID, run.ExecutionID
			}
			now := t0.Add(tt.at)
			reaped, err := st.Reap(context.Background(), now, tt.all)
			if err != nil {
				t.Fatalf("Reap: %v", err)
			}
			if len(reaped) != len(tt.reaped) {
				t.Errorf("Reap reaped %d, want %d", len(reaped), len(tt.reaped))
			}
			for _, l := range tt.jobs {
				j := mustJob(t, st, ids[l.name])
				if !slices.Contains(tt.reaped, l.name) {
					if j.State != JobRunning || j.ExecutionID != execs[l.name] {
						t.Errorf("job %s = %s exec %s, want still running", l.name, j.State, j.ExecutionID)
					}
					continue
				}
				if j.State != JobRetryable || !j.RunAt.Equal(now) || j.LeaseUntil != nil || j.ExecutionID != "" {
					t.Errorf("reaped job %s = %s run at %s lease %v, want retryable at %s without a lease", l.name, j.State, j.RunAt, j.LeaseUntil, now)
				}
				if len(j.Attempts) != 1 {
					t.Fatalf("reaped job %s has %d attempts, want 1", l.name, len(j.Attempts))
				}
				if a := j.Attempts[0]; a.Outcome != OutcomeLeaseExpired || a.EndedAt == nil || a.Error == "" {
					t.Errorf("reaped job %s attempt = %+v, want outcome lease_expired, ended, with a reason", l.name, a)
				}
				if _, err := st.FinishJob(context.Background(), j.ID, execs[l.name], now, Result{Outcome: OutcomeCompleted}); !errors.Is(err, ErrLeaseLost) {
					t.Errorf("FinishJob from the reaped execution of %s: err = %v, want ErrLeaseLost", l.name, err)
				}
			}
		})
	}
}

func TestReapedJobRunsAgainAndOldExecutionIsRefused(t *testing.T) {
	st := openTest(t)
	j := enqueueAt(t, st, t0, 3)
	old := claimOne(t, st, t0, time.Minute)
	if reaped, err := st.Reap(context.Background(), t0.Add(61*time.Second), false); err != nil || len(reaped) != 1 {
		t.Fatalf("Reap = %d, %v; want 1", len(reaped), err)
	}
	now := t0.Add(62 * time.Second)
	fresh := claimOne(t, st, now, time.Minute)
	checkClaimed(t, fresh, now, time.Minute, 2)
	if fresh.ExecutionID == old.ExecutionID {
		t.Fatalf("new execution reuses the old id %s", old.ExecutionID)
	}
	// The hung worker wakes up and reports: it must not overwrite the new execution.
	if _, err := st.FinishJob(context.Background(), j.ID, old.ExecutionID, now, Result{Outcome: OutcomeCompleted}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("FinishJob from the old execution: err = %v, want ErrLeaseLost", err)
	}
	if got := mustJob(t, st, j.ID); got.State != JobRunning || got.ExecutionID != fresh.ExecutionID {
		t.Fatalf("job after the refused finish = %s exec %s, want running exec %s", got.State, got.ExecutionID, fresh.ExecutionID)
	}
	done, err := st.FinishJob(context.Background(), j.ID, fresh.ExecutionID, now, Result{Outcome: OutcomeCompleted})
	if err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	var outcomes []string
	for _, a := range done.Attempts {
		outcomes = append(outcomes, a.Outcome)
	}
	if want := []string{OutcomeLeaseExpired, OutcomeCompleted}; !slices.Equal(outcomes, want) {
		t.Errorf("attempt outcomes = %v, want %v", outcomes, want)
	}
}

func TestLastAttemptLeaseExpiryDiscards(t *testing.T) {
	st := openTest(t)
	j := enqueueAt(t, st, t0, 1)
	run := claimOne(t, st, t0, time.Minute)
	if reaped, err := st.Reap(context.Background(), t0.Add(2*time.Minute), false); err != nil || len(reaped) != 1 {
		t.Fatalf("Reap = %d, %v; want 1", len(reaped), err)
	}
	got := mustJob(t, st, j.ID)
	if got.State != JobDiscarded {
		t.Fatalf("job after its last lease expired = %s, want discarded", got.State)
	}
	if a := got.Attempts[0]; a.Outcome != OutcomeLeaseExpired || a.ExecutionID != run.ExecutionID || a.EndedAt == nil {
		t.Errorf("attempt = %+v, want the lease_expired end of %s", a, run.ExecutionID)
	}
	if !strings.Contains(got.LastError, "lease expired") {
		t.Errorf("LastError = %q, want it to say the lease expired", got.LastError)
	}
	if c, err := st.Claim(context.Background(), t0.Add(time.Hour), AnyJobs(10), time.Minute); err != nil || len(c) != 0 {
		t.Errorf("Claim after discard = %d jobs, err %v; want none", len(c), err)
	}
	if _, err := st.FinishJob(context.Background(), j.ID, run.ExecutionID, t0.Add(3*time.Minute), Result{Outcome: OutcomeCompleted}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("FinishJob after discard: err = %v, want ErrLeaseLost", err)
	}
}

func TestReapMoreThanOneChunk(t *testing.T) {
	st := openTest(t)
	const n = reapChunk + 3
	for range n {
		enqueueAt(t, st, t0, 2)
	}
	got, err := st.Claim(context.Background(), t0, AnyJobs(n), time.Minute)
	if err != nil || len(got) != n {
		t.Fatalf("Claim = %d jobs, err %v; want %d", len(got), err, n)
	}
	reaped, err := st.Reap(context.Background(), t0, true)
	if err != nil || len(reaped) != n {
		t.Fatalf("Reap(all) = %d, %v; want %d", len(reaped), err, n)
	}
	if k := countKeys(t, st, bucketJobsLeased); k != 0 {
		t.Errorf("idx_jobs_leased holds %d keys after reaping all, want 0", k)
	}
}

func TestNextRunAt(t *testing.T) {
	st := openTest(t)
	if _, ok, err := st.NextRunAt(AnyJobs(1)); err != nil || ok {
		t.Fatalf("NextRunAt on an empty queue = ok %v err %v, want none", ok, err)
	}
	steps := []struct {
		name string
		do   func(t *testing.T)
		want time.Time
	}{
		{"one job", func(t *testing.T) { enqueueAt(t, st, t0.Add(5*time.Second), 2) }, t0.Add(5 * time.Second)},
		{"an earlier job", func(t *testing.T) { enqueueAt(t, st, t0.Add(2*time.Second), 2) }, t0.Add(2 * time.Second)},
		{"a later job", func(t *testing.T) { enqueueAt(t, st, t0.Add(9*time.Second), 2) }, t0.Add(2 * time.Second)},
		{"earliest claimed", func(t *testing.T) { claimOne(t, st, t0.Add(2*time.Second), time.Minute) }, t0.Add(5 * time.Second)},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do(t)
			got, ok, err := st.NextRunAt(AnyJobs(1))
			if err != nil || !ok || !got.Equal(s.want) {
				t.Errorf("NextRunAt = %s ok %v err %v, want %s", got, ok, err, s.want)
			}
		})
	}
}

func TestJobsByCorrelation(t *testing.T) {
	st := openTest(t)
	a := record(t, st, "web:a", t0)
	b := record(t, st, "web:b", t0)
	corr := a.Event.CorrelationID
	var send Job
	var created bool
	err := st.Update(context.Background(), func(tx *Tx) (err error) {
		send, created, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "send", Key: "web:a"}, corr, t0.Add(time.Second))
		return err
	})
	if err != nil || !created {
		t.Fatalf("Enqueue: created %v err %v", created, err)
	}
	tests := []struct {
		corr string
		want []string
	}{
		{corr, []string{a.Job.ID, send.ID}},
		{b.Event.CorrelationID, []string{b.Job.ID}},
		{"no-such-correlation", nil},
		{corr[:5], nil}, // a prefix of a correlation id is not that correlation
	}
	for _, tt := range tests {
		t.Run(tt.corr, func(t *testing.T) {
			var got []Job
			err := st.View(func(tx *Tx) (err error) { got, err = tx.JobsByCorrelation(tt.corr); return err })
			if err != nil {
				t.Fatalf("JobsByCorrelation: %v", err)
			}
			var ids []string
			for _, j := range got {
				ids = append(ids, j.ID)
				if j.CorrelationID != tt.corr {
					t.Errorf("job %s has correlation %s, want %s", j.ID, j.CorrelationID, tt.corr)
				}
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("JobsByCorrelation(%s) = %v, want %v", tt.corr, ids, tt.want)
			}
		})
	}
}

// enqueueKind adds a job of kind with a fresh key, due at runAt.
func enqueueKind(t testing.TB, st *Store, kind string, runAt time.Time) Job {
	t.Helper()
	var j Job
	err := st.Update(context.Background(), func(tx *Tx) (err error) {
		j, _, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: kind, Key: ulid.Make().String(), MaxAttempts: 3, RunAt: runAt}, "corr", runAt)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestClaimPerKind: each kind's limit is its own, so a backlog of one kind
// neither takes another kind's room nor hides its due jobs; kinds the
// limits do not name share Other; AnyJobs takes the earliest due of all.
func TestClaimPerKind(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	var drafts []Job
	for i := range 50 {
		drafts = append(drafts, enqueueKind(t, st, "draft", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	deliver := enqueueKind(t, st, "deliver", t0.Add(time.Second)) // after every draft
	bulk := enqueueKind(t, st, "bulk", t0.Add(2*time.Second))
	later := enqueueKind(t, st, "deliver", t0.Add(time.Hour)) // not due
	now := t0.Add(time.Minute)

	got, err := st.Claim(ctx, now, ClaimLimits{Kinds: map[string]int{"draft": 0, "deliver": 4}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != deliver.ID {
		t.Fatalf("deliver-only claim behind 50 drafts = %v, want only %s", ids(got), deliver.ID)
	}
	got, err = st.Claim(ctx, now, ClaimLimits{Kinds: map[string]int{"draft": 3, "deliver": 0}, Other: 5}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{drafts[0].ID, drafts[1].ID, drafts[2].ID, bulk.ID}
	if !slices.Equal(ids(got), want) {
		t.Errorf("claim of 3 drafts and up to 5 others = %v, want %v (earliest first)", ids(got), want)
	}
	if next, ok, err := st.NextRunAt(ClaimLimits{Kinds: map[string]int{"deliver": 1}}); err != nil || !ok || !next.Equal(later.RunAt) {
		t.Errorf("NextRunAt(deliver) = %s %v %v, want %s: the drafts due earlier are not its kind", next, ok, err, later.RunAt)
	}
	if next, ok, err := st.NextRunAt(ClaimLimits{Kinds: map[string]int{"draft": 0, "deliver": 0}}); err != nil || ok {
		t.Errorf("NextRunAt with no room = %s %v %v, want none", next, ok, err)
	}
	got, err = st.Claim(ctx, now, AnyJobs(100), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want = nil
	for _, d := range drafts[3:] {
		want = append(want, d.ID)
	}
	if !slices.Equal(ids(got), want) {
		t.Errorf("Claim(100) took %d jobs, want the 47 drafts left in order, not the deliver job due in an hour", len(got))
	}
	counts, err := st.JobCounts()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(counts, func(a, b JobCount) int { return strings.Compare(a.Kind+string(a.State), b.Kind+string(b.State)) })
	wantCounts := []JobCount{{"bulk", JobRunning, 1}, {"deliver", JobAvailable, 1}, {"deliver", JobRunning, 1}, {"draft", JobRunning, 50}}
	if !slices.Equal(counts, wantCounts) {
		t.Errorf("JobCounts = %v, want %v", counts, wantCounts)
	}
}

func ids(jobs []Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestJobCountsUnderConcurrency: writers enqueue, claim, finish, retry,
// discard and retire jobs of two kinds at once, and retention-style
// deletes remove finished ones; the counts the writes kept in their own
// transactions match a full scan (Check at the end), and JobCounts
// agrees with the records.
func TestJobCountsUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	const writers, each = 8, 40
	now := t0
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			kind := []string{"draft", "deliver"}[w%2]
			for i := range each {
				if err := st.Update(ctx, func(tx *Tx) (err error) {
					_, _, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: kind, Key: fmt.Sprintf("%d-%d", w, i), MaxAttempts: 2}, "corr", now)
					return err
				}); err != nil {
					errs <- err
					return
				}
				got, err := st.Claim(ctx, now, ClaimLimits{Kinds: map[string]int{kind: 1}}, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				for _, j := range got {
					res := []Result{{Outcome: OutcomeCompleted}, {Outcome: OutcomeRetry, Err: "x", RetryAt: now}, {Outcome: OutcomeDiscarded, Err: "x"}}[i%3]
					fin, err := st.FinishJob(ctx, j.ID, j.ExecutionID, now, res)
					if err != nil {
						errs <- err
						return
					}
					if fin.State.Final() && i%2 == 0 {
						if err := st.Update(ctx, func(tx *Tx) error {
							j, err := tx.Job(fin.ID)
							if err != nil {
								return err
							}
							return tx.DeleteJob(&j)
						}); err != nil {
							errs <- err
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("Check after concurrent job writes: %v", err)
	}
	var scanned, stored map[[2]string]int
	_ = st.View(func(tx *Tx) error { scanned, stored = recountJobs(tx), storedJobCounts(tx); return nil })
	for k, n := range scanned {
		if stored[k] != n {
			t.Errorf("%s %s: stored count %d, the records %d", k[0], k[1], stored[k], n)
		}
	}
	if len(scanned) < 4 {
		t.Errorf("the writes left jobs in only %d kind-and-state pairs (%v): the test did not exercise the transitions", len(scanned), scanned)
	}
}

// TestCheckCatchesWrongJobCount: a job count that drifted from the records
// fails Check, naming the kind and state; so does one for jobs that are gone.
func TestCheckCatchesWrongJobCount(t *testing.T) {
	st := openTest(t)
	enqueueKind(t, st, "draft", t0)
	for _, key := range [][]byte{jobCountKey("draft", JobAvailable), jobCountKey("ghost", JobRunning)} {
		bump := func(delta int) {
			t.Helper()
			if err := st.raw(func(tx engine.Tx) error { return addCount(&Tx{tx: tx}, key, delta) }); err != nil {
				t.Fatal(err)
			}
		}
		bump(1)
		err := st.Check()
		if err == nil || !strings.Contains(err.Error(), "jobs") {
			t.Errorf("Check with count %q one too high = %v, want an error naming it", key, err)
		}
		bump(-1) // repaired, so the next step and the cleanup's Check pass
		if err := st.Check(); err != nil {
			t.Errorf("Check after the repair: %v", err)
		}
	}
}

// TestCheckInARoundAfterWrites: a live Check that the group commit puts in
// the same round as writes before it (an event recorded, its job claimed)
// checks the committed state and finds nothing wrong. The round's own
// transaction would not do: bbolt reads its fresh "" index entries as
// absent and Stats counts only committed pages, so a check of it reports
// the indexes as broken.
func TestCheckInARoundAfterWrites(t *testing.T) {
	st := openTest(t)
	now := time.Now()
	id := ulid.Make().String()
	ev := Event{ID: id, Key: "web:m1", Channel: "web", MessageID: "m1", CorrelationID: id, ConversationID: "c1", ReceivedAt: now}
	e, err := EncodeEvent(ev, NewJob{ID: ulid.Make().String(), Kind: KindDraft, Key: ev.Key, MaxAttempts: 3, RunAt: now})
	if err != nil {
		t.Fatal(err)
	}
	var inRound error
	batch := []*writeReq{
		{done: make(chan error, 1), fn: func(tx *Tx) error {
			_, err := recordRaw(tx, &e.ev, e.evRaw, &e.j, e.jobRaw)
			return err
		}},
		{done: make(chan error, 1), fn: func(tx *Tx) error {
			j, err := tx.Job(e.j.ID)
			if err != nil {
				return err
			}
			old, until := j, now.Add(time.Minute)
			j.State, j.Attempt, j.ExecutionID, j.LeaseUntil = JobRunning, 1, "exec-1", &until
			j.Attempts = []Attempt{{ExecutionID: "exec-1", Number: 1, StartedAt: now}}
			return tx.PutJob(&old, &j)
		}},
		{done: make(chan error, 1), fn: func(tx *Tx) error { inRound = check(tx); return nil }},
		{done: make(chan error, 1), fn: st.checkCommitted},
	}
	st.commit(slices.Clone(batch))
	for i, r := range batch {
		if err := <-r.done; err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	// bbolt's quirks are what this test guards against; an engine that
	// reads its own writes (PostgreSQL's) checks the round's own
	// transaction cleanly too.
	switch bolt := storetest.Chosen(t).Name == storetest.Bolt; {
	case bolt && inRound == nil:
		t.Error("a check of the round's own transaction found nothing: this test no longer sets up the case it guards")
	case !bolt && inRound != nil:
		t.Errorf("a check of the round's own transaction on %s: %v", storetest.Chosen(t).Name, inRound)
	}
	if err := st.Check(); err != nil {
		t.Errorf("check after the round: %v", err)
	}
}
