package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// approvedAt is when the outbox tests approve their drafts: an hour after
// the events, so a claim at t0 only ever takes draft jobs.
var approvedAt = t0.Add(time.Hour)

// approvedReply records an event for key, completes its draft job, stores
// its draft and approves it for the sandbox: one pending outbox row with a
// live delivery job, as the approval API leaves it.
func approvedReply(t *testing.T, st *Store, key string) (Recorded, Approved) {
	t.Helper()
	ctx := context.Background()
	rec := record(t, st, key, t0)
	j := claimOne(t, st, t0, time.Minute)
	if j.Kind != "draft" || j.Key != key {
		t.Fatalf("claimed %s %s, want the draft job of %s", j.Kind, j.Key, key)
	}
	if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0, Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatalf("FinishJob(draft of %s): %v", key, err)
	}
	d, _, err := st.SaveDraft(ctx, draftFor(rec.Event, "Hi Ada, thanks for "+key, ""))
	if err != nil {
		t.Fatalf("SaveDraft(%s): %v", key, err)
	}
	res, err := st.ApproveDraft(ctx, d.ID, Approval{
		Decision: Decision{By: "alice", At: approvedAt}, Provider: "sandbox",
		JobID: ulid.Make().String(), MaxAttempts: 3,
	})
	if err != nil || !res.Created {
		t.Fatalf("ApproveDraft(%s) = created %v, err %v; want a new outbox row", d.ID, res.Created, err)
	}
	return rec, res
}

// deliverJobs returns the delivery jobs of one event.
func deliverJobs(t *testing.T, st *Store, corr string) []Job {
	t.Helper()
	all, err := st.JobsByCorrelation(corr)
	if err != nil {
		t.Fatalf("JobsByCorrelation(%s): %v", corr, err)
	}
	var out []Job
	for _, j := range all {
		if j.Kind == KindDeliver {
			out = append(out, j)
		}
	}
	return out
}

// outboxRow reads one row back, failing the test on error.
func outboxRow(t *testing.T, st *Store, id string) Outbox {
	t.Helper()
	o, err := st.OutboxRow(id)
	if err != nil {
		t.Fatalf("OutboxRow(%s): %v", id, err)
	}
	return o
}

// leadStatus is the handoff status of the lead of ev.
func leadStatus(t *testing.T, st *Store, ev Event) HandoffStatus {
	t.Helper()
	h, err := st.Handoff(LeadKey(ev.Channel, ev.ConversationID))
	if err != nil {
		t.Fatalf("Handoff(%s): %v", LeadKey(ev.Channel, ev.ConversationID), err)
	}
	return h.Status
}

// parkForPerson claims row id for exec and records an unknown outcome that
// needs a person.
func parkForPerson(t *testing.T, st *Store, id, exec string) Outbox {
	t.Helper()
	ctx := context.Background()
	if _, _, err := st.ClaimOutbox(ctx, id, exec, approvedAt); err != nil {
		t.Fatalf("ClaimOutbox(%s): %v", id, err)
	}
	o, err := st.FinishOutbox(ctx, id, exec, approvedAt, OutboxResult{
		Status: OutboxNeedsReconciliation, Note: "outcome unknown",
		Attempt: OutboxAttempt{ExecutionID: exec, At: approvedAt, Action: "send", Outcome: "ambiguous", Error: "timeout"},
	})
	if err != nil {
		t.Fatalf("FinishOutbox(%s, needs_reconciliation): %v", id, err)
	}
	return o
}

func TestApproveDraftConcurrentCallersCreateOnce(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	rec := record(t, st, "web:lead-1", t0)
	d, _, err := st.SaveDraft(ctx, draftFor(rec.Event, "Hi Ada", ""))
	if err != nil {
		t.Fatalf("SaveDraft: %v", err)
	}
	const n = 20
	got := make([]Approved, n)
	errs := make([]error, n)
	jobIDs := make([]string, n)
	for i := range jobIDs {
		jobIDs[i] = ulid.Make().String()
	}
	together(n, func(i int) {
		got[i], errs[i] = st.ApproveDraft(ctx, d.ID, Approval{
			Decision: Decision{By: fmt.Sprint("person-", i), At: t0.Add(time.Duration(i) * time.Second)},
			Provider: "sandbox", JobID: jobIDs[i], MaxAttempts: 3,
		})
	})
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: ApproveDraft: %v", i, errs[i])
		}
		if got[i].Created {
			if winner >= 0 {
				t.Fatalf("callers %d and %d both created the outbox row", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no caller created the outbox row")
	}
	wantID := OutboxID(rec.Event.ConversationID, d.ID)
	if wantID != "conv-web:lead-1:"+d.ID {
		t.Errorf("OutboxID = %q, want <conversation id>:<draft id>", wantID)
	}
	by := fmt.Sprint("person-", winner)
	for i, a := range got {
		if a.Outbox.ID != wantID || a.Draft.OutboxID != wantID {
			t.Errorf("caller %d: outbox %q, draft.outbox_id %q; want %q", i, a.Outbox.ID, a.Draft.OutboxID, wantID)
		}
		if a.Draft.Status != DraftApproved || a.Draft.Decision == nil || a.Draft.Decision.By != by || a.Outbox.ApprovedBy != by {
			t.Errorf("caller %d: draft %s decided by %+v, outbox approved by %q; want approved by the winner %s", i, a.Draft.Status, a.Draft.Decision, a.Outbox.ApprovedBy, by)
		}
	}
	if k := countKeys(t, st, bucketOutbox); k != 1 {
		t.Errorf("outbox holds %d rows, want 1", k)
	}
	jobs := deliverJobs(t, st, rec.Event.CorrelationID)
	if len(jobs) != 1 || jobs[0].ID != jobIDs[winner] || jobs[0].Key != wantID || jobs[0].State != JobAvailable {
		t.Fatalf("delivery jobs %+v, want one available job %s keyed %s", jobs, jobIDs[winner], wantID)
	}
	for i, id := range jobIDs {
		if i == winner {
			continue
		}
		if _, err := st.Job(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("the losing caller %d's job %s: err %v, want ErrNotFound", i, id, err)
		}
	}
	o := outboxRow(t, st, wantID)
	if o.Status != OutboxPending || o.Text != "Hi Ada" || o.To != rec.Event.Contact || o.CorrelationID != rec.Event.CorrelationID {
		t.Errorf("row %+v, want pending, the draft's text, to the contact, with the event's correlation id", o)
	}
}

func TestApproveAndRejectConflict(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	_, approved := approvedReply(t, st, "web:approved")
	_, err := st.RejectDraft(ctx, approved.Draft.ID, Decision{By: "bob", At: approvedAt})
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Draft.Decision.By != "alice" || !containsString(err, "alice") {
		t.Errorf("RejectDraft(approved) err = %v, want a *ConflictError naming alice", err)
	}
	if d, err := st.Draft(approved.Draft.ID); err != nil {
		t.Errorf("Draft(%s): %v", approved.Draft.ID, err)
	} else if d.Status != DraftApproved {
		t.Errorf("draft after refused rejection is %s, want approved", d.Status)
	}

	rec := record(t, st, "web:rejected", t0)
	d, _, err := st.SaveDraft(ctx, draftFor(rec.Event, "Hi", ""))
	if err != nil {
		t.Fatalf("SaveDraft: %v", err)
	}
	for range 2 {
		r, err := st.RejectDraft(ctx, d.ID, Decision{By: "bob", At: approvedAt, Reason: "spam"})
		if err != nil || r.Status != DraftRejected || r.Decision.By != "bob" {
			t.Fatalf("RejectDraft = %s by %+v, err %v; want rejected by bob both times", r.Status, r.Decision, err)
		}
	}
	jobID := ulid.Make().String()
	_, err = st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "alice", At: approvedAt}, Provider: "sandbox", JobID: jobID, MaxAttempts: 3})
	if !errors.As(err, &conflict) || !containsString(err, "bob") {
		t.Errorf("ApproveDraft(rejected) err = %v, want a *ConflictError naming bob", err)
	}
	if _, err := st.OutboxRow(OutboxID(rec.Event.ConversationID, d.ID)); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused approval left an outbox row (err %v)", err)
	}
	if _, err := st.Job(jobID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused approval left a delivery job (err %v)", err)
	}
}

func TestClaimOutbox(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	_, a := approvedReply(t, st, "web:claim")
	id := a.Outbox.ID

	row, prev, err := st.ClaimOutbox(ctx, id, "exec-1", approvedAt)
	if err != nil || prev.Status != OutboxPending || prev.ExecutionID != "" || row.Status != OutboxEffectPending || row.ExecutionID != "exec-1" || !row.ClaimedAt.Equal(approvedAt) {
		t.Fatalf("first claim = %+v/%s exec %q at %s err %v; want prev pending unclaimed, now effect_pending by exec-1 at %s", prev, row.Status, row.ExecutionID, row.ClaimedAt, err, approvedAt)
	}
	claimed2 := approvedAt.Add(time.Second)
	row, prev, err = st.ClaimOutbox(ctx, id, "exec-2", claimed2)
	if err != nil || prev.Status != OutboxEffectPending || prev.ExecutionID != "exec-1" || !prev.At.Equal(approvedAt) || row.Status != OutboxEffectPending || row.ExecutionID != "exec-2" {
		t.Fatalf("second claim = %+v/%s exec %q err %v; want prev effect_pending by exec-1 at %s, held by exec-2", prev, row.Status, row.ExecutionID, err, approvedAt)
	}
	if stored := outboxRow(t, st, id); stored.ExecutionID != "exec-2" || stored.Status != OutboxEffectPending {
		t.Errorf("stored row %s held by %q, want effect_pending by exec-2", stored.Status, stored.ExecutionID)
	}

	if _, err := st.FinishOutbox(ctx, id, "exec-2", approvedAt, OutboxResult{
		Status: OutboxSent, ProviderID: "p-1", Attempt: OutboxAttempt{ExecutionID: "exec-2", Action: "send", Outcome: "sent", ProviderID: "p-1"},
	}); err != nil {
		t.Fatalf("FinishOutbox(sent): %v", err)
	}
	before := outboxRow(t, st, id)
	row, prev, err = st.ClaimOutbox(ctx, id, "exec-3", approvedAt.Add(time.Minute))
	if err != nil || prev.Status != OutboxSent || row.Status != OutboxSent {
		t.Fatalf("claim of a sent row = %s/%s err %v; want it returned sent", prev, row.Status, err)
	}
	if after := outboxRow(t, st, id); !reflect.DeepEqual(before, after) {
		t.Errorf("claiming a sent row changed it:\n before %+v\n after  %+v", before, after)
	}

	if _, _, err := st.ClaimOutbox(ctx, "nobody:d0", "exec-4", approvedAt); !errors.Is(err, ErrNotFound) {
		t.Errorf("ClaimOutbox(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestFinishOutbox(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	rec, a := approvedReply(t, st, "web:finish")
	id := a.Outbox.ID
	sent := OutboxResult{Status: OutboxSent, ProviderID: "p-9", Attempt: OutboxAttempt{ExecutionID: "exec-1", Action: "send", Outcome: "sent", ProviderID: "p-9"}}

	// Not claimed yet: nobody holds it.
	if _, err := st.FinishOutbox(ctx, id, "exec-1", approvedAt, sent); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("FinishOutbox on a pending row err = %v, want ErrLeaseLost", err)
	}
	if _, _, err := st.ClaimOutbox(ctx, id, "exec-1", approvedAt); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	if _, _, err := st.ClaimOutbox(ctx, id, "exec-2", approvedAt); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	before := outboxRow(t, st, id)
	if _, err := st.FinishOutbox(ctx, id, "exec-1", approvedAt, sent); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("FinishOutbox by the superseded exec-1 err = %v, want ErrLeaseLost", err)
	}
	if after := outboxRow(t, st, id); !reflect.DeepEqual(before, after) {
		t.Errorf("a refused finish changed the row:\n before %+v\n after  %+v", before, after)
	}
	if s := leadStatus(t, st, rec.Event); s == HandoffReplied {
		t.Errorf("lead is replied after a refused finish")
	}

	sent.Attempt.ExecutionID = "exec-2"
	o, err := st.FinishOutbox(ctx, id, "exec-2", approvedAt.Add(time.Second), sent)
	if err != nil {
		t.Fatalf("FinishOutbox by the holder: %v", err)
	}
	stored := outboxRow(t, st, id)
	if stored.Status != OutboxSent || stored.ProviderID != "p-9" || stored.ExecutionID != "" || stored.SentAt == nil ||
		len(stored.Attempts) != 1 || stored.Attempts[0].ExecutionID != "exec-2" || o.Status != OutboxSent {
		t.Errorf("row after finish %+v, want sent as p-9 with exec-2's one attempt and no holder", stored)
	}
	if s := leadStatus(t, st, rec.Event); s != HandoffReplied {
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
		if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, approvedAt, Result{Outcome: OutcomeCompleted}); err != nil {
			t.Fatalf("FinishJob: %v", err)
		}
		jobID := ulid.Make().String()
		at := approvedAt.Add(time.Hour)
		o, err := st.Reconcile(ctx, id, Reconciliation{By: "carol", At: at, Outcome: "not_sent", From: "10.0.0.1"}, jobID, 5)
		if err != nil {
			t.Fatalf("Reconcile(not_sent): %v", err)
		}
		stored := outboxRow(t, st, id)
		if o.Status != OutboxPending || stored.Status != OutboxPending || stored.ExecutionID != "" || stored.Note != "" {
			t.Errorf("row after not_sent: %s (stored %s, holder %q, note %q), want pending with no holder or note", o.Status, stored.Status, stored.ExecutionID, stored.Note)
		}
		if len(stored.Reconciliations) != 1 || stored.Reconciliations[0].By != "carol" || stored.Reconciliations[0].Outcome != "not_sent" {
			t.Errorf("reconciliations %+v, want carol's not_sent", stored.Reconciliations)
		}
		nj := mustJob(t, st, jobID)
		if nj.Kind != KindDeliver || nj.Key != id || nj.State != JobAvailable || nj.MaxAttempts != 5 || nj.CorrelationID != rec.Event.CorrelationID {
			t.Errorf("new job %+v, want an available deliver job for %s with 5 attempts and the event's correlation id", nj, id)
		}
		if s := leadStatus(t, st, rec.Event); s == HandoffReplied {
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
		if _, err := st.Reconcile(ctx, id, Reconciliation{By: "carol", At: approvedAt, Outcome: "not_sent"}, jobID, 5); err != nil {
			t.Fatalf("Reconcile(not_sent): %v", err)
		}
		if _, err := st.Job(jobID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Reconcile created job %s beside a live one (err %v)", jobID, err)
		}
		jobs := deliverJobs(t, st, rec.Event.CorrelationID)
		if len(jobs) != 1 || jobs[0].State.Final() {
			t.Errorf("delivery jobs %+v, want only the approval's live job", jobs)
		}
		if outboxRow(t, st, id).Status != OutboxPending {
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
		o, err := st.Reconcile(ctx, id, Reconciliation{By: "carol", At: at, Outcome: "sent", ProviderID: "crm-42"}, ulid.Make().String(), 5)
		if err != nil {
			t.Fatalf("Reconcile(sent): %v", err)
		}
		stored := outboxRow(t, st, id)
		if o.Status != OutboxSent || stored.Status != OutboxSent || stored.ProviderID != "crm-42" || stored.ExecutionID != "" ||
			stored.SentAt == nil || !stored.SentAt.Equal(at) || stored.Note != "" {
			t.Errorf("row after sent: %+v, want sent as crm-42 at %s with no holder or note", stored, at)
		}
		if len(stored.Reconciliations) != 1 || stored.Reconciliations[0].By != "carol" || stored.Reconciliations[0].ProviderID != "crm-42" {
			t.Errorf("reconciliations %+v, want carol's sent crm-42", stored.Reconciliations)
		}
		if s := leadStatus(t, st, rec.Event); s != HandoffReplied {
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
	if _, err := st.FinishOutbox(ctx, sent.Outbox.ID, "exec-s", approvedAt, OutboxResult{Status: OutboxSent, ProviderID: "p-1"}); err != nil {
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
				_, err := st.Reconcile(ctx, tt.id, Reconciliation{By: "carol", At: approvedAt, Outcome: outcome, ProviderID: pid}, jobID, 3)
				var se *StateError
				if !errors.As(err, &se) || se.State != tt.state || !containsString(err, "needs_reconciliation") {
					t.Fatalf("Reconcile(%s row) err = %v, want a *StateError naming %s and what it needs", tt.name, err, tt.state)
				}
				if after := outboxRow(t, st, tt.id); !reflect.DeepEqual(before, after) {
					t.Errorf("a refused reconciliation changed the row:\n before %+v\n after  %+v", before, after)
				}
				if _, err := st.Job(jobID); !errors.Is(err, ErrNotFound) {
					t.Errorf("a refused reconciliation enqueued job %s", jobID)
				}
			})
		}
	}

	t.Run("unknown outcome", func(t *testing.T) {
		_, a := approvedReply(t, st, "web:parked")
		parkForPerson(t, st, a.Outbox.ID, "exec-p")
		before := outboxRow(t, st, a.Outbox.ID)
		if _, err := st.Reconcile(ctx, a.Outbox.ID, Reconciliation{By: "carol", At: approvedAt, Outcome: "maybe"}, ulid.Make().String(), 3); err == nil || !containsString(err, "maybe") {
			t.Errorf("Reconcile(maybe) err = %v, want an error naming the outcome", err)
		}
		if after := outboxRow(t, st, a.Outbox.ID); !reflect.DeepEqual(before, after) {
			t.Errorf("a refused reconciliation changed the row:\n before %+v\n after  %+v", before, after)
		}
	})

	t.Run("unknown row", func(t *testing.T) {
		if _, err := st.Reconcile(ctx, "nobody:d0", Reconciliation{By: "carol", At: approvedAt, Outcome: "not_sent"}, ulid.Make().String(), 3); !errors.Is(err, ErrNotFound) {
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

	jobs, err := st.ClaimJobs(ctx, approvedAt, 10, time.Minute)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("ClaimJobs = %d jobs, err %v; want the 3 delivery jobs", len(jobs), err)
	}
	for _, j := range jobs {
		if j.Kind != KindDeliver {
			t.Fatalf("claimed a %s job, want only delivery jobs", j.Kind)
		}
		if _, _, err := st.ClaimOutbox(ctx, j.Key, j.ExecutionID, approvedAt); err != nil {
			t.Fatalf("ClaimOutbox(%s): %v", j.Key, err)
		}
		switch j.Key {
		case orphan.Outbox.ID:
			if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, approvedAt, Result{Outcome: OutcomeDiscarded, Err: "crash loop"}); err != nil {
				t.Fatalf("FinishJob: %v", err)
			}
		case parked.Outbox.ID:
			if _, err := st.FinishOutbox(ctx, j.Key, j.ExecutionID, approvedAt, OutboxResult{Status: OutboxNeedsReconciliation}); err != nil {
				t.Fatalf("FinishOutbox: %v", err)
			}
			if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, approvedAt, Result{Outcome: OutcomeCompleted}); err != nil {
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
			if j.Key != orphan.Outbox.ID || j.MaxAttempts != 4 || j.State != JobAvailable || !j.RunAt.Equal(later) {
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
