package workers

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// discardLine is the one "job discarded into the dead letters" line of job
// j: at level ERROR, naming its kind, id and correlation id, with a reason
// that contains want.
func discardLine(t *testing.T, logs *testkit.Log, j store.Job, want string) {
	t.Helper()
	var mine []map[string]any
	lines := func() bool {
		mine = mine[:0]
		for _, m := range logs.Lines(t, "job discarded into the dead letters") {
			if m["job_id"] == j.ID {
				mine = append(mine, m)
			}
		}
		return len(mine) > 0
	}
	// The line follows the discard's commit.
	testkit.Eventually(t, 10*time.Second, lines, "the discard of job "+j.ID+" logged")
	if lines(); len(mine) != 1 {
		t.Fatalf("%d discard lines for job %s; want 1", len(mine), j.ID)
	}
	m := mine[0]
	reason, _ := m["reason"].(string)
	if m["level"] != "ERROR" || m["kind"] != j.Kind || m["correlation_id"] != j.CorrelationID || !strings.Contains(reason, want) {
		t.Errorf("discard line %v; want level ERROR, kind %s, correlation id %s, a reason containing %q", m, j.Kind, j.CorrelationID, want)
	}
}

// TestDiscardsAreLogged: every job that goes to the dead letters is one
// log line with its kind, id, correlation id and why — a failure for
// good, a last attempt that failed, a lease that ended on the last
// attempt, and a draft the model refused.
func TestDiscardsAreLogged(t *testing.T) {
	st := openStore(t)
	logs := &testkit.Log{}
	opt := testOptions()
	opt.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	kind := &testkit.KindFunc{Fn: func(_ context.Context, _ int, j store.Job) error {
		if j.Key == "permanent" {
			return &jobs.Discard{Err: errors.New("the record it works on is gone")}
		}
		return errors.New("the provider answered 503")
	}}
	refusing := &countingDrafter{err: &drafter.Refused{Text: "I cannot help with that."}}
	kinds := map[string]jobs.Kind{"test": kind, review.KindDraft: newDraftJob(st, refusing)}
	permanent := testkit.Enqueue(t, st, "test", "permanent", 5, time.Now())
	exhausted := testkit.Enqueue(t, st, "test", "exhausted", 2, time.Now())
	draft := recordDraftEvent(t, st, "web:refused-1", time.Now()).Job

	// A job whose process died on its last attempt: its lease ends.
	leased := testkit.Enqueue(t, st, "other", "leased", 1, time.Now())
	if _, err := st.Claim(context.Background(), time.Now(), store.ClaimLimits{Kinds: map[string]int{"other": 1}}, time.Millisecond); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	r := startRunner(t, st, kinds, opt)
	testkit.WaitJob(t, st, permanent.ID, store.JobDiscarded)
	testkit.WaitJob(t, st, exhausted.ID, store.JobDiscarded)
	testkit.WaitJob(t, st, draft.ID, store.JobDiscarded)
	testkit.WaitJob(t, st, leased.ID, store.JobDiscarded) // the start released it, on its last attempt

	discardLine(t, logs, permanent, "failed for good")
	discardLine(t, logs, exhausted, "last attempt (2 of 2)")
	discardLine(t, logs, draft, "cannot help")
	discardLine(t, logs, leased, "lease ended on its last attempt")

	// The cron reaper says the same of a lease that ends between starts
	// (a hung attempt): a runner that is not started reaps like cron.
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	hung := testkit.Enqueue(t, st, "other", "hung", 1, time.Now())
	if got, err := st.Claim(context.Background(), time.Now(), store.ClaimLimits{Kinds: map[string]int{"other": 1}}, time.Millisecond); err != nil || len(got) != 1 {
		t.Fatalf("Claim = %d jobs, %v; want the hung job", len(got), err)
	}
	late := opt
	late.Now = func() time.Time { return time.Now().Add(time.Minute) } // past the lease
	cron := jobs.NewRunner(st, kinds, late)
	if err := cron.Reap(context.Background()); err != nil {
		t.Fatalf("Reap: %v", err)
	}
	hung, err := st.Job(hung.ID)
	if err != nil || hung.State != store.JobDiscarded {
		t.Fatalf("the hung job is %s, %v; want discarded", hung.State, err)
	}
	discardLine(t, logs, hung, "lease ended on its last attempt")
}
