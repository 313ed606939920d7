package workers

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"

	"github.com/handoff/handoff/testkit"
)

// newDraftJob is the draft job over st with drafter d and the default
// config's review (no channel of the tests' events auto-approves).
func newDraftJob(st *store.Store, d Drafter) *DraftJob {
	return &DraftJob{Store: st, Review: review.New(st, config.Default()), Drafter: d}
}

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
	rec, err := leads.RecordEvent(context.Background(), st, store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key, CorrelationID: ulid.Make().String(),
		ConversationID: "conv-" + key, Contact: "ada@example.com", Name: "Ada",
		Text: "Hello, please call me on +44 20 7946 0958.", ReceivedAt: now,
	}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s): created %v err %v", key, rec.Created, err)
	}
	return rec
}

func claim(t *testing.T, st *store.Store, now time.Time) store.Job {
	t.Helper()
	got, err := st.Claim(context.Background(), now, store.AnyJobs(1), time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim = %d jobs, %v; want 1", len(got), err)
	}
	return got[0]
}

// TestDraftJobStoresDraftOnce: the draft and the job's completion commit
// together; an attempt whose lease was lost meanwhile still stores its
// draft but leaves the job to its next execution, which reuses the draft
// without calling the drafter and completes the job.
func TestDraftJobStoresDraftOnce(t *testing.T) {
	st := openStore(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rec := recordDraftEvent(t, st, "web:m1", now)
	d := newCountingTemplate(t)
	k := newDraftJob(st, d)
	clock := now
	k.Now = func() time.Time { return clock }

	// The first attempt's lease expires and is reaped while it drafts.
	first := claim(t, st, now)
	if reaped, err := st.Reap(context.Background(), now.Add(2*time.Minute), false); err != nil || len(reaped) != 1 {
		t.Fatalf("Reap = %d, %v; want the first attempt reaped", len(reaped), err)
	}
	clock = now.Add(2 * time.Minute)
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
	j, err := st.Job(first.ID)
	if err != nil || j.State != store.JobRetryable || len(j.Attempts) != 1 || j.Attempts[0].Outcome != store.OutcomeLeaseExpired {
		t.Fatalf("job after a run that lost its lease = %s %+v, %v; want retryable, its one attempt lease_expired", j.State, j.Attempts, err)
	}

	// The retry finds the draft, does not call the drafter again, and
	// completes the job in the same commit.
	retry := claim(t, st, now.Add(3*time.Minute))
	if retry.Attempt != 2 {
		t.Fatalf("retry is attempt %d, want 2", retry.Attempt)
	}
	clock = now.Add(3*time.Minute + time.Second)
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
	j, err = st.Job(retry.ID)
	if err != nil || j.State != store.JobCompleted || len(j.Attempts) != 2 || j.Attempts[1].Outcome != store.OutcomeCompleted ||
		j.Attempts[1].EndedAt == nil || !j.Attempts[1].EndedAt.Equal(clock) || j.LeaseUntil != nil {
		t.Fatalf("job after the retry = %s %+v, %v; want completed by attempt 2 at %s, no lease", j.State, j.Attempts, err, clock)
	}
	// The runner's record of the end is the completion already stored.
	fin, err := st.FinishJob(context.Background(), retry.ID, retry.ExecutionID, clock, store.Result{Outcome: store.OutcomeCompleted})
	if err != nil || fin.State != store.JobCompleted {
		t.Fatalf("FinishJob = %s, %v; want the completed job", fin.State, err)
	}
}

func TestDraftJobConcurrentRuns(t *testing.T) {
	st := openStore(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	recordDraftEvent(t, st, "web:m1", now)
	job := claim(t, st, now)
	d := newCountingTemplate(t)
	k := newDraftJob(st, d)

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
				testkit.Enqueue(t, st, review.KindDraft, "web:m1", 3, now)
			}
			job := claim(t, st, now)
			d := newCountingTemplate(t)
			d.err = tt.drafterErr
			err := (newDraftJob(st, d)).Run(context.Background(), job)
			if err == nil {
				t.Fatalf("Run = nil, want an error")
			}
			var discard *jobs.Discard
			if got := errors.As(err, &discard); got != tt.wantDiscard {
				t.Errorf("Run = %v: discard %v, want %v", err, got, tt.wantDiscard)
			}
			var raw *jobs.WithRaw
			if tt.wantRaw != "" && (!errors.As(err, &raw) || raw.Raw != tt.wantRaw) {
				t.Errorf("Run = %v, want jobs.WithRaw %q", err, tt.wantRaw)
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
	r := startRunner(t, st, map[string]jobs.Kind{review.KindDraft: newDraftJob(st, d)}, testOptions())
	var ids []string
	for _, k := range []string{"web:a", "web:b", "web:c"} {
		ids = append(ids, recordDraftEvent(t, st, k, time.Now()).Job.ID)
		r.Wake()
	}
	for _, id := range ids {
		testkit.WaitJob(t, st, id, store.JobCompleted)
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

// TestDraftJobCommitsPerDraft counts the commit rounds a draft costs through
// the runner, from the bbolt file's own transaction id: the claim, and the
// one commit that stores the draft and completes the job. The runner's
// record of the attempt's end is then a read, not a third round (it was:
// claim, save, finish). One worker, so no round is shared between drafts.
func TestDraftJobCommitsPerDraft(t *testing.T) {
	st := openStore(t)
	const n = 20
	var ids []string
	for i := range n {
		ids = append(ids, recordDraftEvent(t, st, fmt.Sprintf("web:c-%02d", i), time.Now()).Job.ID)
	}
	before := commits(t, st)
	opt := testOptions()
	opt.Workers = 1
	r := jobs.NewRunner(st, map[string]jobs.Kind{review.KindDraft: newDraftJob(st, newCountingTemplate(t))}, opt)
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	for _, id := range ids {
		testkit.WaitJob(t, st, id, store.JobCompleted)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// Start reaps leases (one round); a claim that finds nothing due is a
	// read, so the idle runner adds none.
	got := commits(t, st) - before
	t.Logf("%d commit rounds for %d drafts: %.2f per draft", got, n, float64(got)/n)
	if want := 2*n + 1; got != want {
		t.Errorf("%d commit rounds for %d drafts, want %d: a claim and one commit each, and the start's reap", got, n, want)
	}
}

// commits is the transaction id of st's file: bbolt adds one per commit. It
// is read from the newer of the two meta pages (bbolt's layout: a 16-byte
// page header, then magic, version, page size, flags, the root bucket
// (16 bytes), the freelist and high-water page ids, then the txid).
func commits(t testing.TB, st *store.Store) int {
	t.Helper()
	f, err := os.Open(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 32)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	pageSize := int64(binary.LittleEndian.Uint32(head[24:28]))
	txid := uint64(0)
	for _, off := range []int64{0, pageSize} {
		b := make([]byte, 8)
		if _, err := f.ReadAt(b, off+64); err != nil {
			t.Fatal(err)
		}
		txid = max(txid, binary.LittleEndian.Uint64(b))
	}
	return int(txid)
}
