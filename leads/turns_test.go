package leads_test

import (
	"context"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// leadMessage records message id of lead conv on channel web at at, its
// draft job due at once.
func leadMessage(t *testing.T, st *store.Store, conv, id string, at time.Time) store.Recorded {
	t.Helper()
	key := "web:" + id
	rec, err := leads.RecordEvent(context.Background(), st, store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: id, CorrelationID: ulid.Make().String(),
		ConversationID: conv, Contact: "ada@example.com", Name: "Ada", Text: "part " + id, ReceivedAt: at,
	}, draftJobFor(key, 3))
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = created %v, %v", key, rec.Created, err)
	}
	return rec
}

// TestHeldDraftJobReleasedByEveryEnd: a message that arrives while its
// lead's draft job runs gets its job held back behind it (due no sooner
// than the running job's lease ends), later messages join the held job,
// and however the running attempt ends — its draft stored, an error to
// retry, released at shutdown, a failure for good, its lease reaped — that
// end releases the held job at its own due time in the same transaction.
// The running job, whose work the held one took over, is not retried.
func TestHeldDraftJobReleasedByEveryEnd(t *testing.T) {
	const lease = time.Minute
	ends := []struct {
		name string
		end  func(t *testing.T, st *store.Store, k store.Job, at time.Time)
		want store.JobState // the running job's state after its end
	}{
		{"its draft stored", func(t *testing.T, st *store.Store, k store.Job, at time.Time) {
			if err := st.Update(context.Background(), func(tx *store.Tx) error { return tx.CompleteJob(k.ID, k.ExecutionID, at) }); err != nil {
				t.Fatalf("CompleteJob: %v", err)
			}
		}, store.JobCompleted},
		{"an error to retry", func(t *testing.T, st *store.Store, k store.Job, at time.Time) {
			if _, err := st.FinishJob(context.Background(), k.ID, k.ExecutionID, at, store.Result{Outcome: store.OutcomeRetry, Err: "model: 500", RetryAt: at.Add(time.Second)}); err != nil {
				t.Fatalf("FinishJob: %v", err)
			}
		}, store.JobCompleted},
		{"released at shutdown", func(t *testing.T, st *store.Store, k store.Job, at time.Time) {
			if _, err := st.FinishJob(context.Background(), k.ID, k.ExecutionID, at, store.Result{Outcome: store.OutcomeRetry, Err: "released at shutdown: context canceled", RetryAt: at, Released: true}); err != nil {
				t.Fatalf("FinishJob: %v", err)
			}
		}, store.JobCompleted},
		{"a failure for good", func(t *testing.T, st *store.Store, k store.Job, at time.Time) {
			if _, err := st.FinishJob(context.Background(), k.ID, k.ExecutionID, at, store.Result{Outcome: store.OutcomeDiscarded, Err: "permanent: refused"}); err != nil {
				t.Fatalf("FinishJob: %v", err)
			}
		}, store.JobDiscarded},
		{"its lease reaped", func(t *testing.T, st *store.Store, k store.Job, at time.Time) {
			if reaped, err := st.Reap(context.Background(), k.LeaseUntil.Add(time.Second), false); err != nil || len(reaped) != 1 {
				t.Fatalf("Reap = %d, %v; want 1", len(reaped), err)
			}
		}, store.JobCompleted},
		{"released at start", func(t *testing.T, st *store.Store, k store.Job, at time.Time) {
			if reaped, err := st.Reap(context.Background(), at, true); err != nil || len(reaped) != 1 {
				t.Fatalf("Reap(all) = %d, %v; want 1", len(reaped), err)
			}
		}, store.JobCompleted},
	}
	for _, tc := range ends {
		t.Run(tc.name, func(t *testing.T) {
			st := openTest(t)
			first := leadMessage(t, st, "c1", "m1", t0)
			k := claimOne(t, st, t0, lease)
			if k.ID != first.Job.ID {
				t.Fatalf("claimed %s, want the first message's job %s", k.ID, first.Job.ID)
			}
			second := leadMessage(t, st, "c1", "m2", t0.Add(time.Second))
			third := leadMessage(t, st, "c1", "m3", t0.Add(2*time.Second))
			held := mustJob(t, st, second.Job.ID)
			if third.Job.ID != held.ID {
				t.Errorf("the third message's job is %s; want it to join the held job %s", third.Job.ID, held.ID)
			}
			if held.Waits == nil || held.Waits.Job != k.ID || !held.Waits.RunAt.Equal(t0.Add(2*time.Second)) || !held.RunAt.Equal(*k.LeaseUntil) {
				t.Fatalf("the held job waits %+v, due %s; want it waiting for %s, its own due %s, due at the lease's end %s", held.Waits, held.RunAt, k.ID, t0.Add(2*time.Second), k.LeaseUntil)
			}
			if got := mustJob(t, st, k.ID); got.FollowedBy != held.ID {
				t.Errorf("the running job is followed by %q; want %s", got.FollowedBy, held.ID)
			}
			// Its own due time passed, but the running job has not ended:
			// nothing to claim.
			if got, err := st.Claim(context.Background(), t0.Add(10*time.Second), store.AnyJobs(10), lease); err != nil || len(got) != 0 {
				t.Fatalf("Claim while the first job runs = %d jobs, %v; want none", len(got), err)
			}

			tc.end(t, st, k, t0.Add(20*time.Second))
			if got := mustJob(t, st, k.ID); got.State != tc.want || got.FollowedBy != "" {
				t.Errorf("the first job is %s followed by %q (%q); want %s, followed by none", got.State, got.FollowedBy, got.LastError, tc.want)
			}
			released := mustJob(t, st, held.ID)
			if released.Waits != nil || !released.RunAt.Equal(t0.Add(2*time.Second)) || released.State != store.JobAvailable {
				t.Errorf("after the first job's end the held job is %s waiting %+v, due %s; want available, waiting for nothing, due at %s", released.State, released.Waits, released.RunAt, t0.Add(2*time.Second))
			}
			got := claimOne(t, st, t0.Add(21*time.Second), lease)
			if got.ID != held.ID {
				t.Errorf("claimed %s; want the released job %s", got.ID, held.ID)
			}
			h, err := st.Handoff(store.LeadKey("web", "c1"))
			if err != nil || h.TurnDraft != second.Event.Key || len(h.TurnEvents) != 3 || h.DraftJob != held.ID {
				t.Errorf("lead: turn draft %q of %v, draft job %q, %v; want %s of 3 messages, job %s", h.TurnDraft, h.TurnEvents, h.DraftJob, err, second.Event.Key, held.ID)
			}
		})
	}
}

// TestDraftJobWaitsAcrossEndedTurn: a lead closed while its draft job runs
// ends the turn; a message then starts the next turn, whose job still
// waits for the running one (the lead's DraftJob), so the lead's drafts
// are never written two at a time.
func TestDraftJobWaitsAcrossEndedTurn(t *testing.T) {
	st := openTest(t)
	leadMessage(t, st, "c1", "m1", t0)
	k := claimOne(t, st, t0, time.Minute)
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		h, err := tx.Handoff(store.LeadKey("web", "c1"))
		if err != nil {
			return err
		}
		_, err = leads.CloseTx(tx, h, store.Closure{By: "ada", At: t0.Add(time.Second), Reason: "spam"})
		return err
	})
	if err != nil {
		t.Fatalf("close the lead: %v", err)
	}
	next := leadMessage(t, st, "c1", "m2", t0.Add(2*time.Second))
	if j := mustJob(t, st, next.Job.ID); j.Waits == nil || j.Waits.Job != k.ID {
		t.Fatalf("the next turn's job waits %+v; want it waiting for the running job %s", j.Waits, k.ID)
	}
	if _, err := st.FinishJob(context.Background(), k.ID, k.ExecutionID, t0.Add(3*time.Second), store.Result{Outcome: store.OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	if got := claimOne(t, st, t0.Add(3*time.Second), time.Minute); got.ID != next.Job.ID {
		t.Errorf("claimed %s; want the next turn's job %s", got.ID, next.Job.ID)
	}
}

// TestHeldDraftJobConcurrentMessages: messages of one lead recorded at
// once while its draft job runs are one held job, whichever commits first.
func TestHeldDraftJobConcurrentMessages(t *testing.T) {
	st := openTest(t)
	leadMessage(t, st, "c1", "m-first", t0)
	k := claimOne(t, st, t0, time.Minute)
	const n = 32
	jobs := make([]string, n)
	together(n, func(i int) {
		jobs[i] = leadMessage(t, st, "c1", "m-"+ulid.Make().String(), t0.Add(time.Second)).Job.ID
	})
	for _, id := range jobs[1:] {
		if id != jobs[0] {
			t.Fatalf("the messages' jobs are %v; want one", jobs)
		}
	}
	j := mustJob(t, st, jobs[0])
	if j.Waits == nil || j.Waits.Job != k.ID {
		t.Errorf("the job of the burst waits %+v; want it waiting for %s", j.Waits, k.ID)
	}
	h, err := st.Handoff(store.LeadKey("web", "c1"))
	if err != nil || len(h.TurnEvents) != n+1 {
		t.Errorf("the turn holds %d messages, %v; want %d", len(h.TurnEvents), err, n+1)
	}
	var live store.Job
	if err := st.View(func(tx *store.Tx) (err error) { live, err = tx.LiveJob(store.KindDraft, h.TurnDraft); return err }); err != nil || live.ID != jobs[0] {
		t.Errorf("the turn's live draft job is %s, %v; want the burst's %s", live.ID, err, jobs[0])
	}
}

// TestHeldDraftJobDueAtTheLeaseEnd: were the running job's end never
// recorded (its record lost, say), the held job is still due once that
// job's lease has ended, and claiming it clears what it waited for.
func TestHeldDraftJobDueAtTheLeaseEnd(t *testing.T) {
	st := openTest(t)
	leadMessage(t, st, "c1", "m1", t0)
	k := claimOne(t, st, t0, time.Minute)
	held := leadMessage(t, st, "c1", "m2", t0.Add(time.Second)).Job
	if got, err := st.Claim(context.Background(), k.LeaseUntil.Add(-time.Nanosecond), store.AnyJobs(10), time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("Claim before the lease ends = %d jobs, %v; want none", len(got), err)
	}
	got := claimOne(t, st, *k.LeaseUntil, time.Minute)
	if got.ID != held.ID || got.Waits != nil {
		t.Errorf("claimed %s waiting %+v; want the held job %s, waiting for nothing", got.ID, got.Waits, held.ID)
	}
}
