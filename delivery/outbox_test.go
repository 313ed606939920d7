package delivery_test

// The outbox's transitions, its safety rule and the dead-letter replay,
// moved here from the store's tests with the rules they prove. They run on
// a real bbolt file through the exported store API; testStore keeps the
// call shapes the tests were written in, each delegating to delivery.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/workers"
)

// testStore is a store with delivery's operations under the names the tests use.
type testStore struct {
	*store.Store
	ob *delivery.Outbox
}

// openTest opens a store on a real bbolt file in a fresh temporary folder.
// Its cleanup checks the file's consistency, then closes it.
func openTest(t testing.TB) *testStore {
	t.Helper()
	st := testkit.OpenStore(t, "")
	return &testStore{Store: st, ob: delivery.NewForTest(st, 3, func() string { return ulid.Make().String() }).Judging(workers.DeadKinds())}
}

// OutboxResult is how a delivery attempt ended.
type OutboxResult = delivery.Result

func (s *testStore) ClaimOutbox(ctx context.Context, id, execID string, now time.Time) (store.Outbox, delivery.Claim, error) {
	return s.ob.Claim(ctx, id, execID, now)
}

func (s *testStore) FinishOutbox(ctx context.Context, id, execID string, now time.Time, r OutboxResult) (store.Outbox, error) {
	return s.ob.Finish(ctx, id, execID, now, r)
}

// with is the outbox with a delivery job policy of maxAttempts attempts and
// ids from newID, judging the dead letters as the process does.
func (s *testStore) with(maxAttempts int, newID func() string) *delivery.Outbox {
	return delivery.NewForTest(s.Store, maxAttempts, newID).Judging(workers.DeadKinds())
}

// jobCount counts the jobs of one event.
func jobCount(t *testing.T, st *testStore, corr string) int {
	t.Helper()
	var jobs []store.Job
	err := st.View(func(tx *store.Tx) (err error) { jobs, err = tx.JobsByCorrelation(corr); return err })
	if err != nil {
		t.Fatalf("JobsByCorrelation(%s): %v", corr, err)
	}
	return len(jobs)
}

func once(id string) func() string { return func() string { return id } }

func (s *testStore) Reconcile(ctx context.Context, id string, rec store.Reconciliation, jobID string, maxAttempts int) (store.Outbox, error) {
	return s.with(maxAttempts, once(jobID)).Reconcile(ctx, id, rec)
}

func (s *testStore) EnsureDelivery(ctx context.Context, now time.Time, maxAttempts int, newID func() string) (int, error) {
	return s.with(maxAttempts, newID).Resolve(ctx, now)
}

func (s *testStore) ReplayDeadLetter(ctx context.Context, id string, r store.Replay, maxAttempts int, newID string) (store.DeadLetter, error) {
	return s.with(maxAttempts, once(newID)).Replay(ctx, id, r)
}

func (s *testStore) DismissDeadLetter(ctx context.Context, id string, d store.Dismissal) error {
	return s.ob.Dismiss(ctx, id, d)
}

func (s *testStore) DeadLetters(f store.DeadLetterFilter) ([]store.DeadLetter, error) {
	return s.ob.DeadLetters(f)
}

func (s *testStore) DeadLetter(id string) (store.DeadLetter, error) { return s.ob.DeadLetter(id) }

// t0 is the fixed clock every store test starts from; times are passed
// explicitly, never read from the wall clock.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newEvent returns an event for key with fresh ids, received at at.
func newEvent(key string, at time.Time) store.Event {
	return store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key,
		CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
		Contact: "ada@example.com", Name: "Ada", Text: "hello from " + key, ReceivedAt: at,
	}
}

// draftJobFor is the job RecordEvent enqueues with an event.
func draftJobFor(key string, maxAttempts int) store.NewJob {
	return store.NewJob{ID: ulid.Make().String(), Kind: "draft", Key: key, MaxAttempts: maxAttempts}
}

// record stores one event and its job, failing the test on error.
func record(t testing.TB, st *testStore, key string, at time.Time) store.Recorded {
	t.Helper()
	rec, err := leads.RecordEvent(context.Background(), st.Store, newEvent(key, at), draftJobFor(key, 3))
	if err != nil {
		t.Fatalf("RecordEvent(%s): %v", key, err)
	}
	return rec
}

// claimOne claims exactly one job at now, failing the test otherwise.
func claimOne(t testing.TB, st *testStore, now time.Time, lease time.Duration) store.Job {
	t.Helper()
	got, err := st.Claim(context.Background(), now, store.AnyJobs(1), lease)
	if err != nil {
		t.Fatalf("Claim(%s): %v", now, err)
	}
	if len(got) != 1 {
		t.Fatalf("Claim(%s) claimed %d jobs, want 1", now, len(got))
	}
	return got[0]
}

// mustJob reads a job back.
func mustJob(t testing.TB, st *testStore, id string) store.Job {
	t.Helper()
	j, err := st.Job(id)
	if err != nil {
		t.Fatalf("Job(%s): %v", id, err)
	}
	return j
}

func containsString(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// draftFor is a draft of ev as the draft job stores it.
func draftFor(ev store.Event, text, id string) store.Draft {
	return store.Draft{
		ID: id, EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
		ConversationID: ev.ConversationID, Text: text, Drafter: "template", CreatedAt: ev.ReceivedAt,
	}
}

// approvedAt is when the outbox tests approve their drafts: an hour after
// the events, so a claim at t0 only ever takes draft jobs.
var approvedAt = t0.Add(time.Hour)

// approvedReply records an event for key, completes its draft job, stores
// its draft and approves it for the sandbox: one pending outbox row with a
// live delivery job, as the approval API leaves it.
func approvedReply(t *testing.T, st *testStore, key string) (store.Recorded, Approved) {
	t.Helper()
	ctx := context.Background()
	rec := record(t, st, key, t0)
	j := claimOne(t, st, t0, time.Minute)
	if j.Kind != "draft" || j.Key != key {
		t.Fatalf("claimed %s %s, want the draft job of %s", j.Kind, j.Key, key)
	}
	if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob(draft of %s): %v", key, err)
	}
	d, _, err := st.SaveDraft(ctx, draftFor(rec.Event, "Hi Ada, thanks for "+key, ""))
	if err != nil {
		t.Fatalf("SaveDraft(%s): %v", key, err)
	}
	res, err := st.ApproveDraft(ctx, d.ID, approval{
		Decision: store.Decision{By: "alice", At: approvedAt}, Provider: "sandbox",
		JobID: ulid.Make().String(), MaxAttempts: 3,
	})
	if err != nil || !res.Created {
		t.Fatalf("ApproveDraft(%s) = created %v, err %v; want a new outbox row", d.ID, res.Created, err)
	}
	return rec, res
}

// deliverJobs returns the delivery jobs of one event.
func deliverJobs(t *testing.T, st *testStore, corr string) []store.Job {
	t.Helper()
	var all []store.Job
	err := st.View(func(tx *store.Tx) (err error) { all, err = tx.JobsByCorrelation(corr); return err })
	if err != nil {
		t.Fatalf("JobsByCorrelation(%s): %v", corr, err)
	}
	var out []store.Job
	for _, j := range all {
		if j.Kind == store.KindDeliver {
			out = append(out, j)
		}
	}
	return out
}

// outboxRow reads one row back, failing the test on error.
func outboxRow(t *testing.T, st *testStore, id string) store.Outbox {
	t.Helper()
	o, err := st.OutboxRow(id)
	if err != nil {
		t.Fatalf("OutboxRow(%s): %v", id, err)
	}
	return o
}

// leadStatus is the handoff status of the lead of ev.
func leadStatus(t *testing.T, st *testStore, ev store.Event) store.HandoffStatus {
	t.Helper()
	h, err := st.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
	if err != nil {
		t.Fatalf("Handoff(%s): %v", store.LeadKey(ev.Channel, ev.ConversationID), err)
	}
	return h.Status
}

// parkForPerson claims row id for exec and records an unknown outcome that
// needs a person.
func parkForPerson(t *testing.T, st *testStore, id, exec string) store.Outbox {
	t.Helper()
	ctx := context.Background()
	if _, _, err := st.ClaimOutbox(ctx, id, exec, approvedAt); err != nil {
		t.Fatalf("ClaimOutbox(%s): %v", id, err)
	}
	o, err := st.FinishOutbox(ctx, id, exec, approvedAt, OutboxResult{
		Status: store.OutboxNeedsReconciliation, Note: "outcome unknown",
		Attempt: store.OutboxAttempt{ExecutionID: exec, At: approvedAt, Action: "send", Outcome: "ambiguous", Error: "timeout"},
	})
	if err != nil {
		t.Fatalf("FinishOutbox(%s, needs_reconciliation): %v", id, err)
	}
	return o
}

func TestClaimOutbox(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	_, a := approvedReply(t, st, "web:claim")
	id := a.Outbox.ID

	row, prev, err := st.ClaimOutbox(ctx, id, "exec-1", approvedAt)
	if err != nil || prev.Status != store.OutboxPending || prev.ExecutionID != "" || row.Status != store.OutboxEffectPending || row.ExecutionID != "exec-1" || !row.ClaimedAt.Equal(approvedAt) {
		t.Fatalf("first claim = %+v/%s exec %q at %s err %v; want prev pending unclaimed, now effect_pending by exec-1 at %s", prev, row.Status, row.ExecutionID, row.ClaimedAt, err, approvedAt)
	}
	claimed2 := approvedAt.Add(time.Second)
	row, prev, err = st.ClaimOutbox(ctx, id, "exec-2", claimed2)
	if err != nil || prev.Status != store.OutboxEffectPending || prev.ExecutionID != "exec-1" || !prev.At.Equal(approvedAt) || row.Status != store.OutboxEffectPending || row.ExecutionID != "exec-2" {
		t.Fatalf("second claim = %+v/%s exec %q err %v; want prev effect_pending by exec-1 at %s, held by exec-2", prev, row.Status, row.ExecutionID, err, approvedAt)
	}
	if stored := outboxRow(t, st, id); stored.ExecutionID != "exec-2" || stored.Status != store.OutboxEffectPending {
		t.Errorf("stored row %s held by %q, want effect_pending by exec-2", stored.Status, stored.ExecutionID)
	}

	if _, err := st.FinishOutbox(ctx, id, "exec-2", approvedAt, OutboxResult{
		Status: store.OutboxSent, ProviderID: "p-1", Attempt: store.OutboxAttempt{ExecutionID: "exec-2", Action: "send", Outcome: "sent", ProviderID: "p-1"},
	}); err != nil {
		t.Fatalf("FinishOutbox(sent): %v", err)
	}
	before := outboxRow(t, st, id)
	row, prev, err = st.ClaimOutbox(ctx, id, "exec-3", approvedAt.Add(time.Minute))
	if err != nil || prev.Status != store.OutboxSent || row.Status != store.OutboxSent {
		t.Fatalf("claim of a sent row = %s/%s err %v; want it returned sent", prev, row.Status, err)
	}
	if after := outboxRow(t, st, id); !reflect.DeepEqual(before, after) {
		t.Errorf("claiming a sent row changed it:\n before %+v\n after  %+v", before, after)
	}

	if _, _, err := st.ClaimOutbox(ctx, "nobody:d0", "exec-4", approvedAt); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ClaimOutbox(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestFinishOutbox(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	rec, a := approvedReply(t, st, "web:finish")
	id := a.Outbox.ID
	sent := OutboxResult{Status: store.OutboxSent, ProviderID: "p-9", Attempt: store.OutboxAttempt{ExecutionID: "exec-1", Action: "send", Outcome: "sent", ProviderID: "p-9"}}

	// Not claimed yet: nobody holds it.
	if _, err := st.FinishOutbox(ctx, id, "exec-1", approvedAt, sent); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishOutbox on a pending row err = %v, want ErrLeaseLost", err)
	}
	if _, _, err := st.ClaimOutbox(ctx, id, "exec-1", approvedAt); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	if _, _, err := st.ClaimOutbox(ctx, id, "exec-2", approvedAt); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	before := outboxRow(t, st, id)
	if _, err := st.FinishOutbox(ctx, id, "exec-1", approvedAt, sent); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishOutbox by the superseded exec-1 err = %v, want ErrLeaseLost", err)
	}
	if after := outboxRow(t, st, id); !reflect.DeepEqual(before, after) {
		t.Errorf("a refused finish changed the row:\n before %+v\n after  %+v", before, after)
	}
	if s := leadStatus(t, st, rec.Event); s == leads.Replied {
		t.Errorf("lead is replied after a refused finish")
	}

	sent.Attempt.ExecutionID = "exec-2"
	o, err := st.FinishOutbox(ctx, id, "exec-2", approvedAt.Add(time.Second), sent)
	if err != nil {
		t.Fatalf("FinishOutbox by the holder: %v", err)
	}
	stored := outboxRow(t, st, id)
	if stored.Status != store.OutboxSent || stored.ProviderID != "p-9" || stored.ExecutionID != "" || stored.SentAt == nil ||
		len(stored.Attempts) != 1 || stored.Attempts[0].ExecutionID != "exec-2" || o.Status != store.OutboxSent {
		t.Errorf("row after finish %+v, want sent as p-9 with exec-2's one attempt and no holder", stored)
	}
	if s := leadStatus(t, st, rec.Event); s != leads.Replied {
		t.Errorf("lead is %s after the reply was sent, want replied", s)
	}
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	t.Run("not_sent puts the row back with a new delivery job", func(t *testing.T) {
		st := openTest(t)
		rec, a := approvedReply(t, st, "web:not-sent")
		id := a.Outbox.ID
		// The approval's job ran and ended; the row waits for a person.
		j := claimOne(t, st, approvedAt, time.Minute)
		parkForPerson(t, st, id, j.ExecutionID)
		if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, approvedAt, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
			t.Fatalf("FinishJob: %v", err)
		}
		jobID := ulid.Make().String()
		at := approvedAt.Add(time.Hour)
		o, err := st.Reconcile(ctx, id, store.Reconciliation{By: "carol", At: at, Outcome: "not_sent", From: "10.0.0.1"}, jobID, 5)
		if err != nil {
			t.Fatalf("Reconcile(not_sent): %v", err)
		}
		stored := outboxRow(t, st, id)
		if o.Status != store.OutboxPending || stored.Status != store.OutboxPending || stored.ExecutionID != "" || stored.Note != "" {
			t.Errorf("row after not_sent: %s (stored %s, holder %q, note %q), want pending with no holder or note", o.Status, stored.Status, stored.ExecutionID, stored.Note)
		}
		if len(stored.Reconciliations) != 1 || stored.Reconciliations[0].By != "carol" || stored.Reconciliations[0].Outcome != "not_sent" {
			t.Errorf("reconciliations %+v, want carol's not_sent", stored.Reconciliations)
		}
		nj := mustJob(t, st, jobID)
		if nj.Kind != store.KindDeliver || nj.Key != id || nj.State != store.JobAvailable || nj.MaxAttempts != 5 || nj.CorrelationID != rec.Event.CorrelationID {
			t.Errorf("new job %+v, want an available deliver job for %s with 5 attempts and the event's correlation id", nj, id)
		}
		if s := leadStatus(t, st, rec.Event); s == leads.Replied {
			t.Errorf("lead is replied although nothing was sent")
		}
	})

	t.Run("not_sent respects a live delivery job", func(t *testing.T) {
		st := openTest(t)
		rec, a := approvedReply(t, st, "web:live-job")
		id := a.Outbox.ID
		// The approval's job is still live (available) when a person reconciles.
		parkForPerson(t, st, id, "exec-1")
		jobID := ulid.Make().String()
		if _, err := st.Reconcile(ctx, id, store.Reconciliation{By: "carol", At: approvedAt, Outcome: "not_sent"}, jobID, 5); err != nil {
			t.Fatalf("Reconcile(not_sent): %v", err)
		}
		if _, err := st.Job(jobID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Reconcile created job %s beside a live one (err %v)", jobID, err)
		}
		jobs := deliverJobs(t, st, rec.Event.CorrelationID)
		if len(jobs) != 1 || jobs[0].State.Final() {
			t.Errorf("delivery jobs %+v, want only the approval's live job", jobs)
		}
		if outboxRow(t, st, id).Status != store.OutboxPending {
			t.Errorf("row is not pending after not_sent")
		}
	})

	t.Run("sent records the provider id and replies to the lead", func(t *testing.T) {
		st := openTest(t)
		rec, a := approvedReply(t, st, "web:sent")
		id := a.Outbox.ID
		parkForPerson(t, st, id, "exec-1")
		jobsBefore := deliverJobs(t, st, rec.Event.CorrelationID)
		at := approvedAt.Add(time.Hour)
		o, err := st.Reconcile(ctx, id, store.Reconciliation{By: "carol", At: at, Outcome: "sent", ProviderID: "crm-42"}, ulid.Make().String(), 5)
		if err != nil {
			t.Fatalf("Reconcile(sent): %v", err)
		}
		stored := outboxRow(t, st, id)
		if o.Status != store.OutboxSent || stored.Status != store.OutboxSent || stored.ProviderID != "crm-42" || stored.ExecutionID != "" ||
			stored.SentAt == nil || !stored.SentAt.Equal(at) || stored.Note != "" {
			t.Errorf("row after sent: %+v, want sent as crm-42 at %s with no holder or note", stored, at)
		}
		if len(stored.Reconciliations) != 1 || stored.Reconciliations[0].By != "carol" || stored.Reconciliations[0].ProviderID != "crm-42" {
			t.Errorf("reconciliations %+v, want carol's sent crm-42", stored.Reconciliations)
		}
		if s := leadStatus(t, st, rec.Event); s != leads.Replied {
			t.Errorf("lead is %s, want replied", s)
		}
		if after := deliverJobs(t, st, rec.Event.CorrelationID); len(after) != len(jobsBefore) {
			t.Errorf("sent enqueued delivery jobs: %d before, %d after", len(jobsBefore), len(after))
		}
	})
}

func TestReconcileRefusesRowsThatNeedNoPerson(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	_, pending := approvedReply(t, st, "web:pending")
	_, claimed := approvedReply(t, st, "web:claimed")
	if _, _, err := st.ClaimOutbox(ctx, claimed.Outbox.ID, "exec-c", approvedAt); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	_, sent := approvedReply(t, st, "web:sent")
	if _, _, err := st.ClaimOutbox(ctx, sent.Outbox.ID, "exec-s", approvedAt); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	if _, err := st.FinishOutbox(ctx, sent.Outbox.ID, "exec-s", approvedAt, OutboxResult{Status: store.OutboxSent, ProviderID: "p-1"}); err != nil {
		t.Fatalf("FinishOutbox: %v", err)
	}
	tests := []struct {
		name, id, state string
	}{
		{"pending", pending.Outbox.ID, "pending"},
		{"effect_pending", claimed.Outbox.ID, "effect_pending"},
		{"sent", sent.Outbox.ID, "sent"},
	}
	for _, tt := range tests {
		for _, outcome := range []string{"sent", "not_sent"} {
			t.Run(tt.name+"/"+outcome, func(t *testing.T) {
				before := outboxRow(t, st, tt.id)
				jobID := ulid.Make().String()
				pid := ""
				if outcome == "sent" {
					pid = "p-2"
				}
				_, err := st.Reconcile(ctx, tt.id, store.Reconciliation{By: "carol", At: approvedAt, Outcome: outcome, ProviderID: pid}, jobID, 3)
				var se *store.StateError
				if !errors.As(err, &se) || se.State != tt.state || !containsString(err, "needs_reconciliation") {
					t.Fatalf("Reconcile(%s row) err = %v, want a *StateError naming %s and what it needs", tt.name, err, tt.state)
				}
				if after := outboxRow(t, st, tt.id); !reflect.DeepEqual(before, after) {
					t.Errorf("a refused reconciliation changed the row:\n before %+v\n after  %+v", before, after)
				}
				if _, err := st.Job(jobID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("a refused reconciliation enqueued job %s", jobID)
				}
			})
		}
	}

	t.Run("unknown outcome", func(t *testing.T) {
		_, a := approvedReply(t, st, "web:parked")
		parkForPerson(t, st, a.Outbox.ID, "exec-p")
		before := outboxRow(t, st, a.Outbox.ID)
		if _, err := st.Reconcile(ctx, a.Outbox.ID, store.Reconciliation{By: "carol", At: approvedAt, Outcome: "maybe"}, ulid.Make().String(), 3); err == nil || !containsString(err, "maybe") {
			t.Errorf("Reconcile(maybe) err = %v, want an error naming the outcome", err)
		}
		if after := outboxRow(t, st, a.Outbox.ID); !reflect.DeepEqual(before, after) {
			t.Errorf("a refused reconciliation changed the row:\n before %+v\n after  %+v", before, after)
		}
	})

	t.Run("unknown row", func(t *testing.T) {
		if _, err := st.Reconcile(ctx, "nobody:d0", store.Reconciliation{By: "carol", At: approvedAt, Outcome: "not_sent"}, ulid.Make().String(), 3); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Reconcile(unknown) err = %v, want ErrNotFound", err)
		}
	})
}

func TestEnsureDelivery(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	// orphan: effect_pending, and its job ended (a crash loop discarded it).
	orphanRec, orphan := approvedReply(t, st, "web:orphan")
	// covered: effect_pending with its job still live.
	coveredRec, _ := approvedReply(t, st, "web:covered")
	// parked: needs a person; never requeued automatically.
	parkedRec, parked := approvedReply(t, st, "web:parked")

	jobs, err := st.Claim(ctx, approvedAt, store.AnyJobs(10), time.Minute)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("Claim = %d jobs, err %v; want the 3 delivery jobs", len(jobs), err)
	}
	for _, j := range jobs {
		if j.Kind != store.KindDeliver {
			t.Fatalf("claimed a %s job, want only delivery jobs", j.Kind)
		}
		if _, _, err := st.ClaimOutbox(ctx, j.Key, j.ExecutionID, approvedAt); err != nil {
			t.Fatalf("ClaimOutbox(%s): %v", j.Key, err)
		}
		switch j.Key {
		case orphan.Outbox.ID:
			if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, approvedAt, store.Result{Outcome: store.OutcomeDiscarded, Err: "crash loop"}); err != nil {
				t.Fatalf("FinishJob: %v", err)
			}
		case parked.Outbox.ID:
			if _, err := st.FinishOutbox(ctx, j.Key, j.ExecutionID, approvedAt, OutboxResult{Status: store.OutboxNeedsReconciliation}); err != nil {
				t.Fatalf("FinishOutbox: %v", err)
			}
			if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, approvedAt, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
				t.Fatalf("FinishJob: %v", err)
			}
		}
	}

	var minted []string
	newID := func() string {
		id := ulid.Make().String()
		minted = append(minted, id)
		return id
	}
	later := approvedAt.Add(time.Hour)
	n, err := st.EnsureDelivery(ctx, later, 4, newID)
	if err != nil || n != 1 {
		t.Fatalf("EnsureDelivery = %d, %v; want 1 (only the orphaned row)", n, err)
	}
	orphanJobs := deliverJobs(t, st, orphanRec.Event.CorrelationID)
	live := 0
	for _, j := range orphanJobs {
		if !j.State.Final() {
			live++
			if j.Key != orphan.Outbox.ID || j.MaxAttempts != 4 || j.State != store.JobAvailable || !j.RunAt.Equal(later) {
				t.Errorf("requeued job %+v, want an available deliver job for %s with 4 attempts due at %s", j, orphan.Outbox.ID, later)
			}
		}
	}
	if live != 1 {
		t.Errorf("orphan has %d live delivery jobs, want 1", live)
	}
	if got := len(deliverJobs(t, st, coveredRec.Event.CorrelationID)); got != 1 {
		t.Errorf("row with a live job has %d delivery jobs, want 1", got)
	}
	if got := len(deliverJobs(t, st, parkedRec.Event.CorrelationID)); got != 1 {
		t.Errorf("row needing a person has %d delivery jobs, want 1 (none added)", got)
	}

	// Again: the orphan's job is live now, so nothing more is enqueued.
	n, err = st.EnsureDelivery(ctx, later, 4, newID)
	if err != nil || n != 0 {
		t.Errorf("second EnsureDelivery = %d, %v; want 0", n, err)
	}
	if got := len(deliverJobs(t, st, orphanRec.Event.CorrelationID)); got != 2 {
		t.Errorf("orphan has %d delivery jobs after the second pass, want 2 (the ended one and the requeued one)", got)
	}
}

// discardDraftJob records an event whose draft job fails its only attempt
// at at, and returns the discarded job.
func discardDraftJob(t *testing.T, st *testStore, key string, at time.Time, why string) store.Job {
	t.Helper()
	ctx := context.Background()
	rec, err := leads.RecordEvent(ctx, st.Store, newEvent(key, at), draftJobFor(key, 1))
	if err != nil {
		t.Fatalf("RecordEvent(%s): %v", key, err)
	}
	j := claimOne(t, st, at, time.Minute)
	if j.ID != rec.Job.ID {
		t.Fatalf("claimed job %s, want %s", j.ID, rec.Job.ID)
	}
	j, err = st.FinishJob(ctx, j.ID, j.ExecutionID, at, store.Result{Outcome: store.OutcomeRetry, Err: why})
	if err != nil || j.State != store.JobDiscarded {
		t.Fatalf("FinishJob = %s, %v; want discarded", j.State, err)
	}
	return j
}

// parkedRow records an event, drafts and approves it, and leaves its reply
// in status with one attempt of outcome; the delivery job stays queued
// (nothing runs it in a store test).
func parkedRow(t *testing.T, st *testStore, key string, at time.Time, status store.OutboxStatus, outcome, note string) store.Outbox {
	t.Helper()
	ctx := context.Background()
	record(t, st, key, at)
	d, _, err := st.SaveDraft(ctx, store.Draft{EventKey: key, Text: "reply to " + key, Drafter: "template", PromptVersion: "v1", ExecutionID: "x", CreatedAt: at})
	if err != nil {
		t.Fatalf("SaveDraft: %v", err)
	}
	a, err := st.ApproveDraft(ctx, d.ID, approval{Decision: store.Decision{By: "ann", At: at}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
	if err != nil {
		t.Fatalf("ApproveDraft: %v", err)
	}
	exec := ulid.Make().String()
	if _, _, err := st.ClaimOutbox(ctx, a.Outbox.ID, exec, at); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	o, err := st.FinishOutbox(ctx, a.Outbox.ID, exec, at, OutboxResult{Status: status, Note: note, Attempt: store.OutboxAttempt{ExecutionID: exec, At: at, Action: "send", Outcome: outcome, Error: note}})
	if err != nil {
		t.Fatalf("FinishOutbox: %v", err)
	}
	return o
}

func deadIDs(dls []store.DeadLetter) []string {
	out := []string{}
	for _, dl := range dls {
		out = append(out, dl.ID)
	}
	return out
}

func TestDeadLettersListFilterAndSafety(t *testing.T) {
	st := openTest(t)
	job := discardDraftJob(t, st, "web:job-1", t0, "model said 500")
	failed := parkedRow(t, st, "web:row-1", t0.Add(time.Hour), store.OutboxFailed, "permanent", "provider answered 400: bad number")
	unsure := parkedRow(t, st, "web:row-2", t0.Add(2*time.Hour), store.OutboxNeedsReconciliation, "ambiguous", "timed out; cannot look it up")
	parkedRow(t, st, "web:row-3", t0, store.OutboxSent, "sent", "") // not a dead letter

	all, err := st.DeadLetters(store.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := deadIDs(all); len(got) != 3 || got[0] != job.ID || got[1] != failed.ID || got[2] != unsure.ID {
		t.Fatalf("DeadLetters = %v, want [%s %s %s]", got, job.ID, failed.ID, unsure.ID)
	}
	byID := map[string]store.DeadLetter{}
	for _, dl := range all {
		byID[dl.ID] = dl
	}
	checks := []struct {
		id, kind, state, errText, why string
		safe                          bool
	}{
		{job.ID, store.DeadJob, "discarded", "model said 500", "no draft was stored", true},
		{failed.ID, store.DeadOutbox, "failed", "bad number", "refused it permanently", true},
		{unsure.ID, store.DeadOutbox, "needs_reconciliation", "cannot look it up", "may already have this message", false},
	}
	for _, c := range checks {
		dl := byID[c.id]
		if dl.Kind != c.kind || dl.State != c.state || dl.Safe != c.safe || !strings.Contains(dl.Error, c.errText) || !strings.Contains(dl.Why, c.why) {
			t.Errorf("%s = kind %s state %s safe %v error %q why %q; want %s %s %v %q %q", c.id, dl.Kind, dl.State, dl.Safe, dl.Error, dl.Why, c.kind, c.state, c.safe, c.errText, c.why)
		}
		if dl.Channel != "web" || dl.EventKey == "" {
			t.Errorf("%s: channel %q event key %q, want web and its event", c.id, dl.Channel, dl.EventKey)
		}
	}
	if dl := byID[unsure.ID]; len(dl.Effects) < 2 || !strings.Contains(strings.Join(dl.Effects, "; "), "unknown outcome") {
		t.Errorf("effects of %s = %v, want the send with an unknown outcome", unsure.ID, dl.Effects)
	}

	filters := []struct {
		name string
		f    store.DeadLetterFilter
		want []string
	}{
		{"jobs", store.DeadLetterFilter{Kind: store.DeadJob}, []string{job.ID}},
		{"replies", store.DeadLetterFilter{Kind: store.DeadOutbox}, []string{failed.ID, unsure.ID}},
		{"error text, any case", store.DeadLetterFilter{Error: "BAD NUMBER"}, []string{failed.ID}},
		{"other channel", store.DeadLetterFilter{Channel: "sms"}, []string{}},
		{"channel", store.DeadLetterFilter{Channel: "web", Kind: store.DeadJob}, []string{job.ID}},
		{"older than", store.DeadLetterFilter{OlderThan: t0.Add(90 * time.Minute)}, []string{job.ID, failed.ID}},
		{"limit", store.DeadLetterFilter{Limit: 1}, []string{job.ID}},
	}
	for _, tt := range filters {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.DeadLetters(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if ids := deadIDs(got); strings.Join(ids, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %v, want %v", ids, tt.want)
			}
		})
	}
}

func TestReplayDeadJob(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	job := discardDraftJob(t, st, "web:job-1", t0, "boom")
	at := t0.Add(time.Minute)
	dl, err := st.ReplayDeadLetter(ctx, job.ID, store.Replay{By: "boss", At: at, From: "10.0.0.1"}, 4, ulid.Make().String())
	if err != nil {
		t.Fatalf("ReplayDeadLetter: %v", err)
	}
	if dl.ID != job.ID || dl.Kind != store.DeadJob {
		t.Errorf("answer %s %s, want the job", dl.ID, dl.Kind)
	}
	got := mustJob(t, st, job.ID)
	if got.State != store.JobAvailable || got.MaxAttempts != got.Attempt+4 || len(got.Replays) != 1 || got.Replays[0].By != "boss" {
		t.Errorf("job after replay: state %s attempts %d/%d replays %v; want available with 4 more attempts and boss's replay", got.State, got.Attempt, got.MaxAttempts, got.Replays)
	}
	if rest, err := st.DeadLetters(store.DeadLetterFilter{}); err != nil {
		t.Errorf("DeadLetters: %v", err)
	} else if len(rest) != 0 {
		t.Errorf("the list still holds %v", deadIDs(rest))
	}
	// It runs again under the same key, with a new execution id.
	again := claimOne(t, st, at, time.Minute)
	if again.ID != job.ID || again.Key != job.Key || again.ExecutionID == job.Attempts[0].ExecutionID || again.Attempt != 2 {
		t.Errorf("claimed %s key %s exec %s attempt %d; want the same job and key, a new execution, attempt 2", again.ID, again.Key, again.ExecutionID, again.Attempt)
	}
	// A second replay finds nothing to replay.
	if _, err := st.ReplayDeadLetter(ctx, job.ID, store.Replay{By: "boss", At: at}, 4, ulid.Make().String()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second replay: %v, want ErrNotFound", err)
	}
	wantAuditEntry(t, st, "boss", "replay job", job.ID)
}

func TestReplayUnsafeNeedsConfirmation(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	row := parkedRow(t, st, "web:row-1", t0, store.OutboxNeedsReconciliation, "ambiguous", "timed out")
	_, err := st.ReplayDeadLetter(ctx, row.ID, store.Replay{By: "boss", At: t0}, 3, ulid.Make().String())
	var unsafe *delivery.UnsafeReplayError
	if !errors.As(err, &unsafe) || !errors.Is(err, delivery.ErrUnconfirmed) || !strings.Contains(err.Error(), "may already have this message") {
		t.Fatalf("unconfirmed replay: %v, want an UnsafeReplayError saying why", err)
	}
	if o, err := st.OutboxRow(row.ID); err != nil {
		t.Fatalf("OutboxRow(%s): %v", row.ID, err)
	} else if o.Status != store.OutboxNeedsReconciliation || len(o.Replays) != 0 {
		t.Fatalf("a refused replay changed the row: %s %v", o.Status, o.Replays)
	}
	jobsBefore := jobCount(t, st, row.CorrelationID)
	if _, err := st.ReplayDeadLetter(ctx, row.ID, store.Replay{By: "boss", At: t0.Add(time.Minute), Confirmed: true}, 3, ulid.Make().String()); err != nil {
		t.Fatalf("confirmed replay: %v", err)
	}
	o, err := st.OutboxRow(row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != store.OutboxPending || len(o.Replays) != 1 || !o.Replays[0].Confirmed || o.ID != row.ID {
		t.Errorf("row after confirmed replay: %s replays %v, want pending under the same id with a confirmed replay", o.Status, o.Replays)
	}
	// The approval's delivery job was still queued (nothing runs jobs here),
	// so the replay reuses it rather than making a second one.
	if n := jobCount(t, st, row.CorrelationID); n != jobsBefore {
		t.Errorf("jobs: %d, want %d (the live delivery job reused)", n, jobsBefore)
	}
	wantAuditEntry(t, st, "boss", "replay outbox", row.ID)
}

func TestDismissDeadLetter(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	job := discardDraftJob(t, st, "web:job-1", t0, "boom")
	row := parkedRow(t, st, "web:row-1", t0, store.OutboxFailed, "permanent", "refused")
	for _, id := range []string{job.ID, row.ID} {
		if err := st.DismissDeadLetter(ctx, id, store.Dismissal{By: "boss", At: t0, Reason: "spam"}); err != nil {
			t.Fatalf("dismiss %s: %v", id, err)
		}
	}
	// A dismissed job is cancelled and off the list: there is no such dead letter.
	if _, err := st.ReplayDeadLetter(ctx, job.ID, store.Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("replaying the dismissed job: %v, want ErrNotFound", err)
	}
	// A dismissed row still exists: the refusal says it was dismissed.
	var state *store.StateError
	if _, err := st.ReplayDeadLetter(ctx, row.ID, store.Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String()); !errors.As(err, &state) || state.State != "dismissed" {
		t.Errorf("replaying the dismissed row: %v, want a StateError naming dismissed", err)
	}
	if got := mustJob(t, st, job.ID); got.State != store.JobCancelled || got.Dismissed == nil || got.Dismissed.Reason != "spam" {
		t.Errorf("dismissed job: %s %v", got.State, got.Dismissed)
	}
	if rest, err := st.DeadLetters(store.DeadLetterFilter{}); err != nil {
		t.Errorf("DeadLetters: %v", err)
	} else if len(rest) != 0 {
		t.Errorf("the list still holds %v", deadIDs(rest))
	}
	if err := st.DismissDeadLetter(ctx, "nope", store.Dismissal{By: "boss", At: t0, Reason: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("dismissing an unknown id: %v, want ErrNotFound", err)
	}
	wantAuditEntry(t, st, "boss", "cancel job", job.ID)
}

// TestDismissedRowsLeaveTheCount: the navigation's dead-letter count must
// agree with the list once an item is cancelled.
func TestDismissedRowsLeaveTheCount(t *testing.T) {
	st := openTest(t)
	row := parkedRow(t, st, "web:row-1", t0, store.OutboxFailed, "permanent", "refused")
	if err := st.DismissDeadLetter(context.Background(), row.ID, store.Dismissal{By: "boss", At: t0, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	list, err := st.DeadLetters(store.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Counts(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DeadLetters() != len(list) {
		t.Errorf("Counts().DeadLetters() = %d but the list holds %d: a cancelled reply is still counted (FailedReplies %d)", c.DeadLetters(), len(list), c.FailedReplies)
	}
}

// TestFailedAfterAnUnknownOutcomeIsNotSafe: a reply whose earlier send had
// an unknown outcome and that a later send then "failed" (the sandbox
// refuses a second copy of a reference it already has, as a permanent
// 409) may well have reached the customer, so it is not safe to replay.
func TestFailedAfterAnUnknownOutcomeIsNotSafe(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	row := parkedRow(t, st, "web:row-1", t0, store.OutboxNeedsReconciliation, "ambiguous", "timed out after accepting")
	if _, err := st.ReplayDeadLetter(ctx, row.ID, store.Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String()); err != nil {
		t.Fatal(err)
	}
	exec := ulid.Make().String()
	if _, _, err := st.ClaimOutbox(ctx, row.ID, exec, t0); err != nil {
		t.Fatal(err)
	}
	note := "permanent failure (409): sandbox: reference was already delivered; refusing a second copy"
	if _, err := st.FinishOutbox(ctx, row.ID, exec, t0, OutboxResult{Status: store.OutboxFailed, Note: note, Attempt: store.OutboxAttempt{ExecutionID: exec, At: t0, Action: "send", Outcome: "permanent", Error: note}}); err != nil {
		t.Fatal(err)
	}
	dl, err := st.DeadLetter(row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if dl.Safe {
		t.Errorf("%s is marked safe (%q) although an earlier send's outcome was unknown", row.ID, dl.Why)
	}
}

func TestRegenerateKeepsEarlierVersion(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	key := "web:regen"
	rec, err := leads.RecordEvent(ctx, st.Store, newEvent(key, t0), draftJobFor(key, 1))
	if err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, st, t0, time.Minute)
	v1, _, err := st.SaveDraft(ctx, store.Draft{EventKey: key, Text: "first try", Drafter: "openai", Model: "m1", PromptVersion: "p1", InputHash: "h1", ExecutionID: j.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0, store.Result{Outcome: store.OutcomeRetry, Err: "approval failed"}); err != nil {
		t.Fatal(err)
	}
	dl, err := st.DeadLetter(rec.Job.ID)
	if err != nil || !dl.Safe || dl.Draft == nil || !strings.Contains(dl.Why, "reused") {
		t.Fatalf("dead letter with a stored draft: %+v, %v; want safe, the draft reused", dl, err)
	}
	if _, err := st.ReplayDeadLetter(ctx, rec.Job.ID, store.Replay{By: "boss", At: t0.Add(time.Minute), Regenerate: true}, 3, ulid.Make().String()); err != nil {
		t.Fatalf("replay with regenerate: %v", err)
	}
	var p struct {
		RegenerateVersion int `json:"regenerate_version"`
	}
	if got := mustJob(t, st, rec.Job.ID); json.Unmarshal(got.Payload, &p) != nil || p.RegenerateVersion != 2 || !got.Replays[0].Regenerate {
		t.Fatalf("payload %s replays %v, want regenerate_version 2 and a regenerate replay", got.Payload, got.Replays)
	}

	// What the draft job then stores: version 2, twice (a retried attempt).
	at := t0.Add(2 * time.Minute)
	for i := range 2 {
		v2, created, err := st.SaveDraftVersion(ctx, store.Draft{EventKey: key, Text: "second try", Drafter: "openai", Model: "m2", PromptVersion: "p2", InputHash: "h2", ExecutionID: "e2", CreatedAt: at}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if created != (i == 0) || v2.Version != 2 || v2.Replaces != v1.ID || v2.Status != store.DraftPending || v2.ID == v1.ID {
			t.Errorf("save %d: created %v, version %d replaces %q status %s id %s; want version 2 replacing %s, created once", i, created, v2.Version, v2.Replaces, v2.Status, v2.ID, v1.ID)
		}
	}
	var versions []store.Draft
	err = st.View(func(tx *store.Tx) error {
		for n := 1; ; n++ {
			d, err := tx.Draft(store.DraftVersionID(rec.Event.ID, n))
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			versions = append(versions, d)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 2 || versions[0].ID != v1.ID || versions[1].Replaces != v1.ID {
		t.Fatalf("draft versions = %+v, want v1 then v2 replacing it", versions)
	}
	old := versions[0]
	if old.Status != store.DraftRejected || old.Decision == nil || !strings.Contains(old.Decision.Reason, versions[1].ID) || old.Text != "first try" || old.Model != "m1" {
		t.Errorf("v1 after regeneration: %s %+v, want kept as written, rejected with a note naming %s", old.Status, old.Decision, versions[1].ID)
	}
	if cur, err := st.DraftByEvent(key); err != nil {
		t.Errorf("DraftByEvent(%s): %v", key, err)
	} else if cur.ID != versions[1].ID {
		t.Errorf("the event's draft is %s, want %s", cur.ID, versions[1].ID)
	}
	// The queue holds only the new version.
	page, _, err := st.Drafts(store.DraftFilter{Status: store.DraftPending})
	if err != nil || len(page) != 1 || page[0].ID != versions[1].ID {
		t.Errorf("pending drafts %v, %v; want only v2", page, err)
	}
}

func TestRegenerateRefusedOnceApproved(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	key := "web:approved"
	rec, err := leads.RecordEvent(ctx, st.Store, newEvent(key, t0), draftJobFor(key, 1))
	if err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, st, t0, time.Minute)
	d, _, err := st.SaveDraft(ctx, store.Draft{EventKey: key, Text: "hi", ExecutionID: j.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApproveDraft(ctx, d.ID, approval{Decision: store.Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0, store.Result{Outcome: store.OutcomeRetry, Err: "x"}); err != nil {
		t.Fatal(err)
	}
	var state *store.StateError
	if _, err := st.ReplayDeadLetter(ctx, rec.Job.ID, store.Replay{By: "boss", At: t0, Regenerate: true}, 3, ulid.Make().String()); !errors.As(err, &state) {
		t.Errorf("regenerating an approved draft: %v, want a StateError", err)
	}
	if _, _, err := st.SaveDraftVersion(ctx, store.Draft{EventKey: key, Text: "again", CreatedAt: t0}, 2); !errors.As(err, &state) {
		t.Errorf("SaveDraftVersion over an approved draft: %v, want a StateError", err)
	}
	if got := mustJob(t, st, rec.Job.ID); got.State != store.JobDiscarded {
		t.Errorf("a refused replay changed the job to %s", got.State)
	}
}

func wantAuditEntry(t *testing.T, st *testStore, who, action, target string) {
	t.Helper()
	log, err := st.AuditLog(50)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		if e.Who == who && e.Action == action && e.Target == target {
			return
		}
	}
	t.Errorf("no audit entry %q by %s on %s in %+v", action, who, target, log)
}

// TestReplayWhileDeliveryJobFinishes: the delivery job parks its reply
// (FinishOutbox) and only then ends (FinishJob), in two transactions. A
// confirmed replay, or a "not sent" reconciliation, that commits in between
// finds the job still live, so it enqueues nothing, and the job then
// completes: the reply sits pending with no job to send it, until the
// minutely EnsureDelivery sweep.
func TestReplayWhileDeliveryJobFinishes(t *testing.T) {
	requeues := []struct {
		name string
		run  func(st *testStore, id string) error
	}{
		{"confirmed replay", func(st *testStore, id string) error {
			_, err := st.ReplayDeadLetter(context.Background(), id, store.Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String())
			return err
		}},
		{"reconciled as not sent", func(st *testStore, id string) error {
			_, err := st.Reconcile(context.Background(), id, store.Reconciliation{By: "boss", At: t0, Outcome: "not_sent"}, ulid.Make().String(), 3)
			return err
		}},
	}
	for _, rq := range requeues {
		t.Run(rq.name, func(t *testing.T) {
			st := openTest(t)
			ctx := context.Background()
			rec := record(t, st, "web:race", t0)
			draftJob := claimOne(t, st, t0, time.Minute)
			d, _, err := st.SaveDraft(ctx, store.Draft{EventKey: rec.Event.Key, Text: "hi", ExecutionID: draftJob.ExecutionID, CreatedAt: t0})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.FinishJob(ctx, draftJob.ID, draftJob.ExecutionID, t0, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
				t.Fatal(err)
			}
			a, err := st.ApproveDraft(ctx, d.ID, approval{Decision: store.Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			deliver := claimOne(t, st, t0, time.Minute)
			if _, _, err := st.ClaimOutbox(ctx, a.Outbox.ID, deliver.ExecutionID, t0); err != nil {
				t.Fatal(err)
			}
			// The delivery job's protocol: the outcome and the job's end in one transaction.
			if _, err := st.FinishOutbox(ctx, a.Outbox.ID, deliver.ExecutionID, t0, OutboxResult{Status: store.OutboxNeedsReconciliation, Note: "unknown", JobID: deliver.ID, Attempt: store.OutboxAttempt{ExecutionID: deliver.ExecutionID, At: t0, Action: "send", Outcome: "ambiguous"}}); err != nil {
				t.Fatal(err)
			}
			// Here, before the runner records the attempt's end, a person acts.
			if err := rq.run(st, a.Outbox.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := st.FinishJob(ctx, deliver.ID, deliver.ExecutionID, t0, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
				t.Fatal(err)
			}
			o, err := st.OutboxRow(a.Outbox.ID)
			if err != nil {
				t.Fatal(err)
			}
			due, err := st.Claim(ctx, t0.Add(time.Hour), store.AnyJobs(10), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != store.OutboxPending || len(due) != 1 || due[0].Kind != store.KindDeliver || due[0].Key != o.ID {
				t.Errorf("reply %s is %s with %d due jobs; want pending with one delivery job for it", o.ID, o.Status, len(due))
			}
		})
	}
}

// approvedRow records an event, stores its draft, approves it and claims its
// delivery, returning the row and the claimed delivery job.
func approvedRow(t *testing.T, st *testStore, key string) (store.Outbox, store.Job) {
	t.Helper()
	ctx := context.Background()
	rec := record(t, st, key, t0)
	dj := claimOne(t, st, t0, time.Minute)
	d, _, err := st.SaveDraft(ctx, store.Draft{EventKey: rec.Event.Key, Text: "hi", ExecutionID: dj.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, dj.ID, dj.ExecutionID, t0, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	a, err := st.ApproveDraft(ctx, d.ID, approval{Decision: store.Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	job := claimOne(t, st, t0, time.Minute)
	if _, _, err := st.ClaimOutbox(ctx, a.Outbox.ID, job.ExecutionID, t0); err != nil {
		t.Fatal(err)
	}
	return a.Outbox, job
}

// TestDismissedReplyFailingAgainIsListed: a cancelled reply that a person
// requeues and that fails again is back on the list and in the counts; a
// reply being sent cannot be cancelled.
func TestDismissedReplyFailingAgainIsListed(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	o, job := approvedRow(t, st, "web:dismiss-again")
	if err := st.DismissDeadLetter(ctx, o.ID, store.Dismissal{By: "ann", At: t0, Reason: "x"}); err == nil {
		t.Fatal("a row being sent (effect_pending) was cancelled")
	}
	fail := func(job store.Job) {
		t.Helper()
		if _, err := st.FinishOutbox(ctx, o.ID, job.ExecutionID, t0, OutboxResult{Status: store.OutboxFailed, Note: "400", JobID: job.ID}); err != nil {
			t.Fatal(err)
		}
	}
	fail(job)
	if err := st.DismissDeadLetter(ctx, o.ID, store.Dismissal{By: "ann", At: t0, Reason: "customer left"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reconcile(ctx, o.ID, store.Reconciliation{By: "ann", At: t0, Outcome: "not_sent"}, ulid.Make().String(), 3); err != nil {
		t.Fatal(err)
	}
	again := claimOne(t, st, t0.Add(time.Minute), time.Minute)
	if _, _, err := st.ClaimOutbox(ctx, o.ID, again.ExecutionID, t0); err != nil {
		t.Fatal(err)
	}
	fail(again)
	dls, err := st.DeadLetters(store.DeadLetterFilter{Kind: store.DeadOutbox})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Counts(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].ID != o.ID || c.FailedReplies != 1 {
		t.Errorf("after failing again: %d dead letters, FailedReplies %d; want the row listed and counted", len(dls), c.FailedReplies)
	}
}

// TestReplayDeadJobWithPendingRow: a delivery job discarded before it sent
// anything leaves its row pending; the list calls it safe and a replay sends
// it with a fresh job.
func TestReplayDeadJobWithPendingRow(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	rec := record(t, st, "web:pending-dead", t0)
	dj := claimOne(t, st, t0, time.Minute)
	d, _, err := st.SaveDraft(ctx, store.Draft{EventKey: rec.Event.Key, Text: "hi", ExecutionID: dj.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, dj.ID, dj.ExecutionID, t0, store.Result{Outcome: store.OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	a, err := st.ApproveDraft(ctx, d.ID, approval{Decision: store.Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	job := claimOne(t, st, t0, time.Minute)
	if _, err := st.FinishJob(ctx, job.ID, job.ExecutionID, t0, store.Result{Outcome: store.OutcomeDiscarded, Err: "no such provider"}); err != nil {
		t.Fatal(err)
	}
	dl, err := st.DeadLetter(job.ID)
	if err != nil || !dl.Safe {
		t.Fatalf("dead letter %+v, %v; want a safe item", dl, err)
	}
	if _, err := st.ReplayDeadLetter(ctx, job.ID, store.Replay{By: "ann", At: t0}, 3, ulid.Make().String()); err != nil {
		t.Fatalf("replay of a dead delivery job with a pending row: %v", err)
	}
	due, err := st.Claim(ctx, t0.Add(time.Hour), store.AnyJobs(10), time.Minute)
	if err != nil || len(due) != 1 || due[0].Key != a.Outbox.ID {
		t.Errorf("after the replay %d jobs are due (%v); want one delivery job for %s", len(due), err, a.Outbox.ID)
	}
}

// TestFinishOutboxAfterLeaseReaped: a send's known outcome is stored even
// when the delivery job's lease was reaped meanwhile.
func TestFinishOutboxAfterLeaseReaped(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	o, job := approvedRow(t, st, "web:reaped")
	if reaped, err := st.Reap(ctx, t0.Add(time.Hour), false); err != nil || len(reaped) != 1 {
		t.Fatalf("reaped %d, %v; want the delivery job", len(reaped), err)
	}
	if _, err := st.FinishOutbox(ctx, o.ID, job.ExecutionID, t0, OutboxResult{Status: store.OutboxSent, ProviderID: "p-1", JobID: job.ID}); err != nil {
		t.Fatalf("FinishOutbox after the reap: %v", err)
	}
	got, err := st.OutboxRow(o.ID)
	if err != nil || got.Status != store.OutboxSent || got.ProviderID != "p-1" {
		t.Errorf("row %s (%s), %v; want sent as p-1", got.Status, got.ProviderID, err)
	}
}

// TestRegenerateRefusedForAReply: only a discarded draft job can be
// regenerated. A reply is refused with ErrNotRegenerable, before its
// confirmation is asked for and whether or not it was given, and nothing
// changes.
func TestRegenerateRefusedForAReply(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	row := parkedRow(t, st, "web:regen-reply", t0, store.OutboxNeedsReconciliation, "ambiguous", "timed out")
	for _, confirmed := range []bool{false, true} {
		t.Run(fmt.Sprint("confirmed=", confirmed), func(t *testing.T) {
			_, err := st.ReplayDeadLetter(ctx, row.ID, store.Replay{By: "boss", At: t0, Regenerate: true, Confirmed: confirmed}, 3, ulid.Make().String())
			var nr *delivery.NotRegenerableError
			if !errors.Is(err, delivery.ErrNotRegenerable) || !errors.As(err, &nr) || nr.ID != row.ID || !strings.Contains(err.Error(), row.ID+" is a reply (outbox row)") {
				t.Fatalf("regenerating a reply: %v, want ErrNotRegenerable naming %s as a reply", err, row.ID)
			}
			if errors.Is(err, delivery.ErrUnconfirmed) {
				t.Errorf("regenerating a reply: %v, want no request for confirmation", err)
			}
			if o, err := st.OutboxRow(row.ID); err != nil {
				t.Fatalf("OutboxRow(%s): %v", row.ID, err)
			} else if o.Status != store.OutboxNeedsReconciliation || len(o.Replays) != 0 {
				t.Errorf("a refused regenerate changed the row: %s %v", o.Status, o.Replays)
			}
		})
	}
}
