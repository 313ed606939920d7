package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// retention is the dedup window of these tests (retention.events).
const retention = 30 * 24 * time.Hour

// runDue claims every job due at now and ends each with outcome; it
// returns them. The tests build one event at a time, so the jobs due are
// that event's.
func runDue(t *testing.T, st *Store, now time.Time, outcome string) []Job {
	t.Helper()
	jobs, err := st.Claim(context.Background(), now, AnyJobs(100), time.Minute)
	if err != nil {
		t.Fatalf("Claim(%s): %v", now, err)
	}
	for _, j := range jobs {
		if _, err := st.FinishJob(context.Background(), j.ID, j.ExecutionID, now, Result{Outcome: outcome, Err: errText(outcome)}); err != nil {
			t.Fatalf("FinishJob(%s %s): %v", j.Kind, j.Key, err)
		}
	}
	return jobs
}

func errText(outcome string) string {
	if outcome == OutcomeDiscarded {
		return "the model kept failing"
	}
	return ""
}

// lifecycle is what happens to one test event after it is received.
type lifecycle int

const (
	sentReply      lifecycle = iota // drafted, approved, sent, its jobs completed
	rejectedDraft                   // drafted and rejected
	waitingDraft                    // drafted, waiting for a person
	deadDraftJob                    // the draft job was discarded: on the dead-letter list
	dismissedJob                    // discarded, then dismissed by a person
	replyInFlight                   // approved, its delivery not yet run
	replyUncertain                  // approved, delivery outcome unknown: needs reconciliation
)

// builtEvent is one event made by buildEvent and the ids hanging off it.
type builtEvent struct {
	Event    Event
	DraftID  string
	OutboxID string
}

// buildEvent records key at at and takes it through lc, all at at (plus a
// minute per step), through the store's own API.
func buildEvent(t *testing.T, st *Store, key string, at time.Time, lc lifecycle) builtEvent {
	t.Helper()
	ctx := context.Background()
	rec := record(t, st, key, at)
	b := builtEvent{Event: rec.Event}
	if lc == deadDraftJob || lc == dismissedJob {
		if got := runDue(t, st, at, OutcomeDiscarded); len(got) != 1 {
			t.Fatalf("%s: ran %d jobs, want its draft job", key, len(got))
		}
		if lc == dismissedJob {
			if err := st.DismissDeadLetter(ctx, rec.Job.ID, Dismissal{By: "alice", At: at, Reason: "spam"}); err != nil {
				t.Fatalf("DismissDeadLetter(%s): %v", rec.Job.ID, err)
			}
		}
		return b
	}
	if got := runDue(t, st, at, OutcomeCompleted); len(got) != 1 {
		t.Fatalf("%s: ran %d jobs, want its draft job", key, len(got))
	}
	d, _, err := st.SaveDraft(ctx, draftFor(rec.Event, "Hi Ada, about "+key, ""))
	if err != nil {
		t.Fatalf("SaveDraft(%s): %v", key, err)
	}
	b.DraftID = d.ID
	switch lc {
	case waitingDraft:
		return b
	case rejectedDraft:
		if _, err := st.RejectDraft(ctx, d.ID, Decision{By: "alice", At: at, Reason: "spam"}); err != nil {
			t.Fatalf("RejectDraft(%s): %v", d.ID, err)
		}
		return b
	}
	step := at.Add(time.Minute)
	if lc == replyInFlight {
		// Approved "later", so the events built after this one do not
		// claim its delivery job.
		step = at.Add(100 * 24 * time.Hour)
	}
	ap, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "alice", At: step}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
	if err != nil {
		t.Fatalf("ApproveDraft(%s): %v", d.ID, err)
	}
	b.OutboxID = ap.Outbox.ID
	if lc == replyInFlight {
		return b
	}
	step = step.Add(time.Minute)
	jobs, err := st.Claim(ctx, step, AnyJobs(10), time.Minute)
	if err != nil || len(jobs) != 1 || jobs[0].Kind != KindDeliver {
		t.Fatalf("%s: claimed %v, %v; want its delivery job", key, jobs, err)
	}
	dj := jobs[0]
	if _, _, err := st.ClaimOutbox(ctx, b.OutboxID, dj.ExecutionID, step); err != nil {
		t.Fatalf("ClaimOutbox(%s): %v", b.OutboxID, err)
	}
	res := OutboxResult{Status: OutboxSent, ProviderID: "prov-" + key, Attempt: OutboxAttempt{ExecutionID: dj.ExecutionID, At: step, Action: "send", Outcome: "sent"}}
	if lc == replyUncertain {
		res = OutboxResult{Status: OutboxNeedsReconciliation, Note: "unknown", Attempt: OutboxAttempt{ExecutionID: dj.ExecutionID, At: step, Action: "send", Outcome: "ambiguous"}}
	}
	if _, err := st.FinishOutbox(ctx, b.OutboxID, dj.ExecutionID, step, res); err != nil {
		t.Fatalf("FinishOutbox(%s): %v", b.OutboxID, err)
	}
	if _, err := st.FinishJob(ctx, dj.ID, dj.ExecutionID, step, Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob(delivery of %s): %v", key, err)
	}
	return b
}

// gone reports whether nothing of b is left: event, key index, jobs, drafts, outbox row.
func gone(t *testing.T, st *Store, b builtEvent) []string {
	t.Helper()
	var left []string
	if _, err := st.EventByKey(b.Event.Key); !errors.Is(err, ErrNotFound) {
		left = append(left, fmt.Sprintf("event (%v)", err))
	}
	var jobs []Job
	if err := st.View(func(tx *Tx) (err error) { jobs, err = tx.JobsByCorrelation(b.Event.CorrelationID); return err }); err != nil || len(jobs) != 0 {
		left = append(left, fmt.Sprintf("%d jobs (%v)", len(jobs), err))
	}
	if b.DraftID != "" {
		if _, err := st.Draft(b.DraftID); !errors.Is(err, ErrNotFound) {
			left = append(left, fmt.Sprintf("draft (%v)", err))
		}
	}
	if b.OutboxID != "" {
		if _, err := st.OutboxRow(b.OutboxID); !errors.Is(err, ErrNotFound) {
			left = append(left, fmt.Sprintf("outbox row (%v)", err))
		}
	}
	return left
}

// TestPruneEvents builds events on both sides of the dedup window in every
// state, prunes, and checks what went and what stayed; the store's cleanup
// runs the index check over what is left.
func TestPruneEvents(t *testing.T) {
	st := openTest(t)
	now := t0.Add(60 * 24 * time.Hour)
	old, young := now.Add(-retention-time.Hour), now.Add(-retention+time.Hour)
	cutoff := now.Add(-retention)

	cases := []struct {
		name string
		at   time.Time
		lc   lifecycle
		kept bool
	}{
		{"old, reply sent", old, sentReply, false},
		{"old, draft rejected", old, rejectedDraft, false},
		{"old, dead letter dismissed", old.Add(time.Second), dismissedJob, false},
		{"old, draft waiting for a person", old.Add(2 * time.Second), waitingDraft, true},
		{"old, draft job on the dead-letter list", old.Add(3 * time.Second), deadDraftJob, true},
		{"old, reply approved and not yet sent", old.Add(4 * time.Second), replyInFlight, true},
		{"old, reply needs reconciliation", old.Add(5 * time.Second), replyUncertain, true},
		{"young, reply sent", young, sentReply, true},
		{"young, draft rejected", young, rejectedDraft, true},
	}
	built := make([]builtEvent, len(cases))
	var queued Recorded
	for i, c := range cases {
		if c.at.Equal(young) && queued.Event.Key == "" {
			// A job still queued for an old event keeps it too. (Due
			// later, so building the young events does not run it.)
			nj := draftJobFor("web:ret-queued", 3)
			nj.RunAt = now.Add(time.Hour)
			var err error
			if queued, err = st.RecordEvent(context.Background(), newEvent("web:ret-queued", old.Add(6*time.Second)), nj); err != nil {
				t.Fatal(err)
			}
		}
		built[i] = buildEvent(t, st, fmt.Sprintf("web:ret-%d", i), c.at, c.lc)
	}

	n, err := st.PruneEvents(context.Background(), cutoff)
	if err != nil {
		t.Fatalf("PruneEvents: %v", err)
	}
	if n != 3 {
		t.Errorf("PruneEvents deleted %d events, want 3 (the finished old ones)", n)
	}
	for i, c := range cases {
		left := gone(t, st, built[i])
		switch {
		case c.kept && len(left) == 0:
			t.Errorf("%s: deleted, want it kept", c.name)
		case c.kept:
			if _, err := st.EventByKey(built[i].Event.Key); err != nil {
				t.Errorf("%s: event: %v", c.name, err)
			}
		case len(left) > 0:
			t.Errorf("%s: want everything deleted, left: %v", c.name, left)
		}
		// Leads and their history are kept whatever happens to the events.
		if _, err := st.Handoff(LeadKey("web", built[i].Event.ConversationID)); err != nil {
			t.Errorf("%s: the lead: %v", c.name, err)
		}
	}
	if _, err := st.EventByKey(queued.Event.Key); err != nil {
		t.Errorf("an old event whose draft job is still queued was deleted: %v", err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("Check after pruning: %v", err)
	}

	// Pruning again finds nothing more.
	if n, err := st.PruneEvents(context.Background(), cutoff); err != nil || n != 0 {
		t.Errorf("second PruneEvents = %d, %v; want 0", n, err)
	}
}

// TestPruneEventsIsTheEndOfTheDedupWindow: inside the window a re-sent id is
// a duplicate; once pruned, it is a new event with a new correlation id.
func TestPruneEventsIsTheEndOfTheDedupWindow(t *testing.T) {
	st := openTest(t)
	now := t0.Add(60 * 24 * time.Hour)
	oldEv := buildEvent(t, st, "web:window-old", now.Add(-retention-time.Minute), sentReply)
	youngEv := buildEvent(t, st, "web:window-young", now.Add(-retention+time.Minute), sentReply)
	edgeEv := buildEvent(t, st, "web:window-edge", now.Add(-retention), sentReply) // exactly at the cutoff: kept

	if _, err := st.PruneEvents(context.Background(), now.Add(-retention)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ev      builtEvent
		created bool
	}{{youngEv, false}, {edgeEv, false}, {oldEv, true}} {
		rec, err := st.RecordEvent(context.Background(), newEvent(c.ev.Event.Key, now), draftJobFor(c.ev.Event.Key, 3))
		if err != nil {
			t.Fatalf("re-send %s: %v", c.ev.Event.Key, err)
		}
		if rec.Created != c.created {
			t.Errorf("re-send %s: created %v, want %v", c.ev.Event.Key, rec.Created, c.created)
		}
		if !c.created && rec.Event.CorrelationID != c.ev.Event.CorrelationID {
			t.Errorf("re-send %s inside the window: correlation id %s, want the first one's %s", c.ev.Event.Key, rec.Event.CorrelationID, c.ev.Event.CorrelationID)
		}
		if c.created {
			if rec.Event.CorrelationID == c.ev.Event.CorrelationID {
				t.Errorf("re-send %s after the window kept the old correlation id", c.ev.Event.Key)
			}
			if rec.Job.ID == "" || rec.Job.State != JobAvailable {
				t.Errorf("re-send %s after the window: draft job %+v, want a new available job", c.ev.Event.Key, rec.Job)
			}
		}
	}
}

// TestPruneEventsManyChunks prunes more events than one transaction takes.
func TestPruneEventsManyChunks(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	const n = 2*retentionChunk + 17
	// Recorded and run from many goroutines at once, so group commit
	// keeps the setup quick.
	together(n, func(i int) { record(t, st, fmt.Sprintf("web:bulk-%04d", i), t0) })
	for {
		jobs, err := st.Claim(ctx, t0, AnyJobs(100), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 0 {
			break
		}
		together(len(jobs), func(i int) {
			if _, err := st.FinishJob(ctx, jobs[i].ID, jobs[i].ExecutionID, t0, Result{Outcome: OutcomeCompleted}); err != nil {
				t.Error(err)
			}
		})
	}
	keep := buildEvent(t, st, "web:bulk-waiting", t0.Add(time.Hour), waitingDraft)
	got, err := st.PruneEvents(ctx, t0.Add(2*time.Hour))
	if err != nil || got != n {
		t.Fatalf("PruneEvents = %d, %v; want %d", got, err, n)
	}
	stats, err := st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Events != 1 || stats.Drafts != 1 || stats.Jobs != 1 {
		t.Errorf("after pruning: %+v; want only the waiting event, its draft and its job", stats)
	}
	if _, err := st.EventByKey(keep.Event.Key); err != nil {
		t.Errorf("the waiting event: %v", err)
	}
}

// TestPruneKeysDeletesExpiredCompletedKeysOnly: a completed key lives
// exactly retention.keys; a key that never completed is never pruned, how
// old its lease may be.
func TestPruneKeysDeletesExpiredCompletedKeysOnly(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	const keep = 72 * time.Hour
	var completed []string
	for i := range 5 {
		completed = append(completed, fmt.Sprintf("done-%d", i))
	}
	all := append(slices.Clone(completed), "late-done", "started", "effect")
	for _, k := range all {
		if _, outcome := claim(t, st, k, "hash-"+k, t0, time.Minute); outcome != ClaimCreated {
			t.Fatalf("ClaimKey(%s) = %s, want %s", k, outcome, ClaimCreated)
		}
	}
	for _, k := range completed {
		move(t, st, k, KeyTransition{To: KeyCompleted, Result: []byte(`{"ok":true}`), Keep: keep}, t0)
	}
	move(t, st, "late-done", KeyTransition{To: KeyCompleted, Result: []byte(`{}`), Keep: keep}, t0.Add(time.Hour))
	move(t, st, "effect", KeyTransition{To: KeyEffectPending, Lease: time.Minute}, t0)

	present := func() []string {
		t.Helper()
		var out []string
		for _, k := range all {
			if err := st.View(func(tx *Tx) error { _, err := tx.IdemKey(k); return err }); err == nil {
				out = append(out, k)
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
		}
		return out
	}

	if n, err := st.PruneKeys(ctx, t0.Add(keep-time.Second), 2); err != nil || n != 0 {
		t.Errorf("PruneKeys a second before expiry = %d, %v; want 0", n, err)
	}
	// A chunk of 2 makes it take several transactions.
	if n, err := st.PruneKeys(ctx, t0.Add(keep), 2); err != nil || n != 5 {
		t.Errorf("PruneKeys at expiry = %d, %v; want the 5 keys completed at t0", n, err)
	}
	if got, want := present(), []string{"late-done", "started", "effect"}; !slices.Equal(got, want) {
		t.Errorf("keys left %v, want %v", got, want)
	}
	if n, err := st.PruneKeys(ctx, t0.Add(365*24*time.Hour), 2); err != nil || n != 1 {
		t.Errorf("PruneKeys a year on = %d, %v; want only late-done", n, err)
	}
	if got, want := present(), []string{"started", "effect"}; !slices.Equal(got, want) {
		t.Errorf("keys left %v, want the unfinished %v", got, want)
	}
	// A pruned key can be claimed afresh.
	if _, outcome := claim(t, st, "done-0", "hash-done-0", t0.Add(365*24*time.Hour), time.Minute); outcome != ClaimCreated {
		t.Errorf("ClaimKey(done-0) after pruning = %s, want %s", outcome, ClaimCreated)
	}
}
