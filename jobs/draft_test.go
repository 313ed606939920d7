package jobs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/jobs/drafter"
	"github.com/handoff/handoff/store"
	"github.com/oklog/ulid/v2"
)

// countingDrafter counts the calls that reach the wrapped drafter.
type countingDrafter struct {
	next  Drafter
	calls atomic.Int64
	err   error // when set, every call fails with it
}

func (c *countingDrafter) Draft(ctx context.Context, in drafter.Input) (drafter.Output, error) {
	c.calls.Add(1)
	if c.err != nil {
		return drafter.Output{}, c.err
	}
	return c.next.Draft(ctx, in)
}

func newCountingTemplate(t *testing.T) *countingDrafter {
	t.Helper()
	tpl, err := drafter.NewTemplate("Hi {{.Name}}, thanks for your message. {{.Owner}} will get back to you shortly.", "v1", 0)
	if err != nil {
		t.Fatalf("NewTemplate: %v", err)
	}
	return &countingDrafter{next: tpl}
}

// recordDraftEvent records an inbound event with its draft job.
func recordDraftEvent(t *testing.T, st *store.Store, key string, now time.Time) store.Recorded {
	t.Helper()
	rec, err := st.RecordEvent(context.Background(), store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key, CorrelationID: ulid.Make().String(),
		ConversationID: "conv-" + key, Contact: "ada@example.com", Name: "Ada",
		Text: "Hello, please call me on +44 20 7946 0958.", ReceivedAt: now,
	}, store.NewJob{ID: ulid.Make().String(), Kind: KindDraft, Key: key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s): created %v err %v", key, rec.Created, err)
	}
	return rec
}

func claim(t *testing.T, st *store.Store, now time.Time) store.Job {
	t.Helper()
	got, err := st.ClaimJobs(context.Background(), now, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("ClaimJobs = %d jobs, %v; want 1", len(got), err)
	}
	return got[0]
}

func TestDraftJobStoresDraftOnce(t *testing.T) {
	st := openStore(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rec := recordDraftEvent(t, st, "web:m1", now)
	d := newCountingTemplate(t)
	k := &DraftJob{Store: st, Drafter: d}

	first := claim(t, st, now)
	if err := k.Run(context.Background(), first); err != nil {
		t.Fatalf("Run: %v", err)
	}
	stored, err := st.DraftByEvent("web:m1")
	if err != nil {
		t.Fatalf("DraftByEvent: %v", err)
	}
	want := "Hi Ada, thanks for your message. our team will get back to you shortly."
	if stored.Text != want || stored.Drafter != "template" || stored.ExecutionID != first.ExecutionID ||
		stored.CorrelationID != rec.Event.CorrelationID || stored.Fields["phone"] != "+442079460958" {
		t.Errorf("stored draft = %+v, want text %q by the template, execution %s, correlation %s, the phone extracted",
			stored, want, first.ExecutionID, rec.Event.CorrelationID)
	}
	if n := d.calls.Load(); n != 1 {
		t.Fatalf("drafter called %d times, want 1", n)
	}

	// The attempt is lost after the draft was stored (say the process died);
	// the retry finds the draft and does not call the drafter again.
	if _, err := st.FinishJob(context.Background(), first.ID, first.ExecutionID, now, store.Result{Outcome: store.OutcomeRetry, Err: "lost", RetryAt: now}); err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	retry := claim(t, st, now.Add(time.Second))
	if retry.Attempt != 2 {
		t.Fatalf("retry is attempt %d, want 2", retry.Attempt)
	}
	if err := k.Run(context.Background(), retry); err != nil {
		t.Fatalf("Run (retry): %v", err)
	}
	if n := d.calls.Load(); n != 1 {
		t.Errorf("drafter called %d times after a retry, want still 1", n)
	}
	again, err := st.DraftByEvent("web:m1")
	if err != nil || again.ExecutionID != first.ExecutionID || again.Text != stored.Text {
		t.Errorf("draft after retry = %+v %v, want the first one unchanged", again, err)
	}
	if _, err := st.FinishJob(context.Background(), retry.ID, retry.ExecutionID, now, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
}

func TestDraftJobConcurrentRuns(t *testing.T) {
	st := openStore(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	recordDraftEvent(t, st, "web:m1", now)
	job := claim(t, st, now)
	d := newCountingTemplate(t)
	k := &DraftJob{Store: st, Drafter: d}

	const n = 20
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = k.Run(context.Background(), job)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Run %d: %v", i, err)
		}
	}
	s, err := st.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if s.Drafts != 1 {
		t.Errorf("%d drafts stored, want 1", s.Drafts)
	}
	if c := d.calls.Load(); c < 1 || c > n {
		t.Errorf("drafter called %d times, want 1..%d", c, n)
	}
	t.Logf("drafter called %d times by %d concurrent runs", d.calls.Load(), n)
	// Runs racing past the reuse check may each call the drafter (the queue's
	// lease is what keeps one execution per job); the first draft stored
	// wins, and every later run reuses it without a call.
	calls := d.calls.Load()
	if err := k.Run(context.Background(), job); err != nil || d.calls.Load() != calls {
		t.Errorf("a run after the draft was stored: %v, drafter calls %d -> %d; want no new call", err, calls, d.calls.Load())
	}
	if _, err := st.FinishJob(context.Background(), job.ID, job.ExecutionID, now, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
}

func TestDraftJobErrors(t *testing.T) {
	tests := []struct {
		name        string
		record      bool  // record the event first
		drafterErr  error // the drafter fails with this
		wantDiscard bool
		wantRaw     string
	}{
		{name: "event gone", record: false, wantDiscard: true},
		{name: "drafter fails", record: true, drafterErr: errors.New("model timed out")},
		{name: "model answer invalid", record: true, drafterErr: &drafter.InvalidOutput{Err: errors.New("no reply field"), Raw: "{}"}, wantRaw: "{}"},
		{name: "model refuses for good", record: true, drafterErr: &drafter.PermanentError{Err: errors.New("401")}, wantDiscard: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			if tt.record {
				recordDraftEvent(t, st, "web:m1", now)
			} else {
				enqueue(t, st, KindDraft, "web:m1", 3, now)
			}
			job := claim(t, st, now)
			d := newCountingTemplate(t)
			d.err = tt.drafterErr
			err := (&DraftJob{Store: st, Drafter: d}).Run(context.Background(), job)
			if err == nil {
				t.Fatalf("Run = nil, want an error")
			}
			var discard *Discard
			if got := errors.As(err, &discard); got != tt.wantDiscard {
				t.Errorf("Run = %v: discard %v, want %v", err, got, tt.wantDiscard)
			}
			var raw *WithRaw
			if tt.wantRaw != "" && (!errors.As(err, &raw) || raw.Raw != tt.wantRaw) {
				t.Errorf("Run = %v, want WithRaw %q", err, tt.wantRaw)
			}
			if tt.drafterErr != nil && !errors.Is(err, tt.drafterErr) {
				t.Errorf("Run = %v, want it to wrap the drafter's error", err)
			}
			if _, err := st.DraftByEvent("web:m1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("DraftByEvent after a failed run: %v, want ErrNotFound", err)
			}
			if _, err := st.FinishJob(context.Background(), job.ID, job.ExecutionID, now, store.Result{Outcome: store.OutcomeDiscarded, Err: err.Error()}); err != nil {
				t.Fatalf("FinishJob: %v", err)
			}
		})
	}
}

// TestDraftJobThroughRunner: an event recorded while the runner sleeps is
// drafted once Wake is called, and the job completes.
func TestDraftJobThroughRunner(t *testing.T) {
	st := openStore(t)
	d := newCountingTemplate(t)
	r := startRunner(t, st, map[string]Kind{KindDraft: &DraftJob{Store: st, Drafter: d}}, testOptions())
	var ids []string
	for _, k := range []string{"web:a", "web:b", "web:c"} {
		ids = append(ids, recordDraftEvent(t, st, k, time.Now()).Job.ID)
		r.Wake()
	}
	for _, id := range ids {
		waitFinal(t, st, id, store.JobCompleted)
	}
	if n := d.calls.Load(); n != 3 {
		t.Errorf("drafter called %d times for 3 events, want 3", n)
	}
	for _, k := range []string{"web:a", "web:b", "web:c"} {
		if _, err := st.DraftByEvent(k); err != nil {
			t.Errorf("DraftByEvent(%s): %v", k, err)
		}
	}
}
