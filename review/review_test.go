package review_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// TestSaveFirstWinsUnderConcurrency: of many concurrent saves of one
// event's draft, exactly one stores it and every caller gets that one back.
func TestSaveFirstWinsUnderConcurrency(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	rec := record(t, st, "web", "web:lead-7", t0)
	const n = 20
	got := make([]store.Draft, n)
	created := make([]bool, n)
	errs := make([]error, n)
	together(n, func(i int) {
		d := draftFor(rec.Event, fmt.Sprint("draft from caller ", i))
		d.Fields, d.ExecutionID = map[string]string{"caller": fmt.Sprint(i)}, fmt.Sprint("exec-", i)
		got[i], created[i], errs[i] = rv.Save(context.Background(), d, 1)
	})
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: Save: %v", i, errs[i])
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("callers %d and %d both stored a draft", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no caller stored the draft")
	}
	want := fmt.Sprint("draft from caller ", winner)
	for i, d := range got {
		if d.Text != want || d.ExecutionID != fmt.Sprint("exec-", winner) || d.Fields["caller"] != fmt.Sprint(winner) || len(d.Fields) != 1 {
			t.Errorf("caller %d got draft %q exec %s fields %v, want the first one %q", i, d.Text, d.ExecutionID, d.Fields, want)
		}
		if d.ID != store.DraftID(rec.Event.ID) || d.Status != store.DraftPending || d.Version != 1 || d.V != 1 {
			t.Errorf("caller %d got id %s status %s version %d (record v%d), want %s %s version 1 (v1)", i, d.ID, d.Status, d.Version, d.V, store.DraftID(rec.Event.ID), store.DraftPending)
		}
	}
	stored, err := st.DraftByEvent(rec.Event.Key)
	if err != nil || stored.Text != want {
		t.Errorf("stored draft = %q, %v; want %q", stored.Text, err, want)
	}
	if s, err := st.Stats(); err != nil || s.Drafts != 1 {
		t.Errorf("%d drafts stored, %v; want 1", s.Drafts, err)
	}
}

func TestSaveUnknownEvent(t *testing.T) {
	st := openStore(t)
	record(t, st, "web", "web:known", t0)
	_, created, err := newReview(st).Save(context.Background(), store.Draft{EventKey: "web:unknown", Text: "hi"}, 1)
	if !errors.Is(err, store.ErrNotFound) || created {
		t.Fatalf("Save for an unknown event = created %v err %v, want ErrNotFound", created, err)
	}
	if _, err := st.DraftByEvent("web:known"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DraftByEvent(known, no draft yet) err = %v, want ErrNotFound", err)
	}
}

// TestSaveVersion: a regeneration keeps the draft it replaces (rejected,
// with a note), becomes the event's current draft, and is stored once; an
// approved draft is not regenerated.
func TestSaveVersion(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	ctx := context.Background()
	rec := record(t, st, "web", "web:regen", t0)
	v1 := saved(t, rv, rec.Event, "first try")
	v2, created, err := rv.Save(ctx, draftFor(rec.Event, "second try"), 2)
	if err != nil || !created || v2.ID != store.DraftVersionID(rec.Event.ID, 2) || v2.Replaces != v1.ID || v2.Version != 2 || v2.Status != store.DraftPending {
		t.Fatalf("Save(v2) = %+v created %v, %v; want version 2 replacing %s", v2, created, err, v1.ID)
	}
	again, created, err := rv.Save(ctx, draftFor(rec.Event, "third try"), 2)
	if err != nil || created || again.ID != v2.ID || again.Text != "second try" {
		t.Errorf("Save(v2) again = %s %q created %v, %v; want version 2 back", again.ID, again.Text, created, err)
	}
	old, err := st.Draft(v1.ID)
	if err != nil || old.Status != store.DraftRejected || old.Decision == nil || old.Decision.Reason != "replaced by "+v2.ID {
		t.Errorf("version 1 = %s %+v, %v; want rejected, replaced by %s", old.Status, old.Decision, err, v2.ID)
	}
	if cur, err := st.DraftByEvent(rec.Event.Key); err != nil || cur.ID != v2.ID {
		t.Errorf("current draft = %s, %v; want %s", cur.ID, err, v2.ID)
	}
	if _, err := rv.Approve(ctx, v2.ID, store.Decision{By: "ann", At: t0}); err != nil {
		t.Fatal(err)
	}
	var state *store.StateError
	if _, _, err := rv.Save(ctx, draftFor(rec.Event, "too late"), 3); !errors.As(err, &state) {
		t.Errorf("Save(v3) over an approved draft: %v, want a StateError", err)
	}
}

// TestApproveConcurrentCallersCreateOnce: of concurrent approvals of one
// draft, one creates the outbox row and its delivery job; the others get
// that row back, and nothing is written twice.
func TestApproveConcurrentCallersCreateOnce(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	rec := record(t, st, "web", "web:approve-race", t0)
	d := saved(t, rv, rec.Event, "Hi Ada")
	const n = 10
	got := make([]review.Approved, n)
	errs := make([]error, n)
	together(n, func(i int) {
		got[i], errs[i] = rv.Approve(context.Background(), d.ID, store.Decision{By: fmt.Sprint("person-", i), At: t0.Add(time.Duration(i) * time.Second)})
	})
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: Approve: %v", i, errs[i])
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
	wantID := store.OutboxID(d.ConversationID, d.ID)
	for i, a := range got {
		if a.Outbox.ID != wantID || a.Draft.Status != store.DraftApproved || a.Draft.Decision.By != fmt.Sprint("person-", winner) || a.Draft.OutboxID != wantID {
			t.Errorf("caller %d: outbox %s, draft %s by %+v; want %s approved by the winner", i, a.Outbox.ID, a.Draft.Status, a.Draft.Decision, wantID)
		}
	}
	o := got[winner].Outbox
	if o.Status != store.OutboxPending || o.Provider != "sandbox" || o.To != "ada@example.com" || o.Text != "Hi Ada" || o.ApprovedBy != fmt.Sprint("person-", winner) {
		t.Errorf("outbox row = %+v; want pending to ada@example.com through the sandbox, the draft's text", o)
	}
	jobs := jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)
	if len(jobs) != 1 || jobs[0].Key != wantID || jobs[0].MaxAttempts != 3 {
		t.Fatalf("delivery jobs = %+v, want one for %s with 3 attempts", jobs, wantID)
	}
	log, err := st.AuditLog(50)
	if err != nil {
		t.Fatal(err)
	}
	approvals := 0
	for _, e := range log {
		if e.Action == "approve draft" && e.Target == d.ID {
			approvals++
		}
	}
	if approvals != 1 {
		t.Errorf("%d audit entries for approving %s, want 1", approvals, d.ID)
	}
}

// TestApproveEdited: an edited reply is sent as edited and recorded so.
func TestApproveEdited(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	rec := record(t, st, "web", "web:edit", t0)
	d := saved(t, rv, rec.Event, "Hi Ada")
	a, err := rv.Approve(context.Background(), d.ID, store.Decision{By: "ann", At: t0, Text: "Hello Ada!"})
	if err != nil || !a.Created || a.Outbox.Text != "Hello Ada!" || !a.Draft.Decision.Edited || a.Draft.Decision.Text != "Hello Ada!" {
		t.Errorf("Approve(edited) = %+v, %v; want the edited text sent and the decision marked edited", a, err)
	}
}

// TestApproveChannelGone: a draft whose channel left the configuration
// cannot be newly approved, but an approval that already happened is still
// answered as one.
func TestApproveChannelGone(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	here := newReview(st)
	gone := review.New(st, &config.Config{Retry: config.Retry{MaxAttempts: 1}})
	var ids []string
	for _, key := range []string{"web:gone-1", "web:gone-2"} {
		rec := record(t, st, "web", key, t0)
		ids = append(ids, saved(t, here, rec.Event, "hi").ID)
	}
	var state *store.StateError
	if _, err := gone.Approve(ctx, ids[0], store.Decision{By: "ann", At: t0}); !errors.As(err, &state) {
		t.Errorf("approving a draft of a removed channel: %v, want a StateError", err)
	}
	first, err := here.Approve(ctx, ids[1], store.Decision{By: "ann", At: t0})
	if err != nil || first.Outbox.Provider != "sandbox" {
		t.Fatalf("approve: %v, provider %q", err, first.Outbox.Provider)
	}
	again, err := gone.Approve(ctx, ids[1], store.Decision{By: "bob", At: t0})
	if err != nil || again.Created || again.Outbox.ID != first.Outbox.ID || again.Draft.Decision.By != "ann" {
		t.Errorf("a second approval after the channel went: %+v, %v; want the first approval back", again, err)
	}
}

// TestDecisionsConflict: approving a rejected draft and rejecting an
// approved one are conflicts that name the earlier decision.
func TestDecisionsConflict(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	ctx := context.Background()
	a := saved(t, rv, record(t, st, "web", "web:c-1", t0).Event, "hi")
	b := saved(t, rv, record(t, st, "web", "web:c-2", t0).Event, "hi")
	if _, err := rv.Approve(ctx, a.ID, store.Decision{By: "alice", At: t0}); err != nil {
		t.Fatal(err)
	}
	var conflict *store.ConflictError
	if _, err := rv.Reject(ctx, a.ID, store.Decision{By: "bob", At: t0}); !errors.As(err, &conflict) || conflict.Draft.Decision.By != "alice" {
		t.Errorf("Reject(approved) = %v, want a ConflictError naming alice", err)
	}
	if _, err := rv.Reject(ctx, b.ID, store.Decision{By: "bob", At: t0, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Approve(ctx, b.ID, store.Decision{By: "alice", At: t0}); !errors.As(err, &conflict) || conflict.Draft.Decision.By != "bob" {
		t.Errorf("Approve(rejected) = %v, want a ConflictError naming bob", err)
	}
	if _, err := rv.Approve(ctx, "d-none", store.Decision{By: "alice", At: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Approve(unknown) = %v, want ErrNotFound", err)
	}
}

// TestRejectDecidesOnce: of concurrent rejections of one draft, exactly
// one reports that it made the decision; the others get that decision back,
// and a later rejection by the same person is answered as already made.
func TestRejectDecidesOnce(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	ctx := context.Background()
	rec := record(t, st, "web", "web:reject-race", t0)
	d := saved(t, rv, rec.Event, "Hi Ada")
	const n = 2
	got := make([]review.Rejected, n)
	errs := make([]error, n)
	together(n, func(i int) {
		got[i], errs[i] = rv.Reject(ctx, d.ID, store.Decision{By: fmt.Sprint("person-", i), At: t0.Add(time.Duration(i) * time.Second), Reason: fmt.Sprint("reason ", i)})
	})
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: Reject: %v", i, errs[i])
		}
		if got[i].Decided {
			if winner >= 0 {
				t.Fatalf("callers %d and %d both report they rejected the draft", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no caller reports it rejected the draft")
	}
	by := fmt.Sprint("person-", winner)
	for i, r := range got {
		if r.ID != d.ID || r.Status != store.DraftRejected || r.Decision == nil || r.Decision.By != by {
			t.Errorf("caller %d: draft %s %s decided by %+v; want %s rejected by the winner %s", i, r.ID, r.Status, r.Decision, d.ID, by)
		}
	}
	again, err := rv.Reject(ctx, d.ID, store.Decision{By: by, At: t0.Add(time.Hour), Reason: "once more"})
	if err != nil || again.Decided || again.Decision.By != by || !again.Decision.At.Equal(got[winner].Decision.At) || again.Decision.Reason != got[winner].Decision.Reason {
		t.Errorf("the same person rejecting again: %+v, %v; want the first rejection back, not decided by this call", again, err)
	}
	log, err := st.AuditLog(50)
	if err != nil {
		t.Fatal(err)
	}
	rejections := 0
	for _, e := range log {
		if e.Action == "reject draft" && e.Target == d.ID {
			rejections++
		}
	}
	if rejections != 1 {
		t.Errorf("%d audit entries for rejecting %s, want 1", rejections, d.ID)
	}
}

// TestRecord: the draft job's one commit stores the draft, approves it on
// an auto-approving channel (outbox row and delivery job included) and
// completes the job as of now; run again it stores and approves nothing.
func TestRecord(t *testing.T) {
	for _, tt := range []struct {
		channel  string
		approved bool
	}{{"web", false}, {"auto", true}} {
		t.Run(tt.channel, func(t *testing.T) {
			st := openStore(t)
			rv := newReview(st)
			ctx := context.Background()
			rec := record(t, st, tt.channel, tt.channel+":r-1", t0)
			job := claim(t, st, t0)
			d := draftFor(rec.Event, "Hi Ada")
			d.ExecutionID = job.ExecutionID
			end := t0.Add(time.Second)
			got, err := rv.Record(ctx, job, &d, 1, end, nil)
			if err != nil {
				t.Fatalf("Record: %v", err)
			}
			if want := map[bool]store.DraftStatus{false: store.DraftPending, true: store.DraftApproved}[tt.approved]; got.Status != want {
				t.Errorf("draft %s, want %s", got.Status, want)
			}
			j, err := st.Job(job.ID)
			if err != nil || j.State != store.JobCompleted || len(j.Attempts) != 1 || j.Attempts[0].Outcome != store.OutcomeCompleted ||
				j.Attempts[0].EndedAt == nil || !j.Attempts[0].EndedAt.Equal(end) || j.LeaseUntil != nil || j.ExecutionID != "" {
				t.Errorf("draft job = %s %+v lease %v, %v; want completed by its one attempt at %s", j.State, j.Attempts, j.LeaseUntil, err, end)
			}
			deliveries := jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)
			if tt.approved && (len(deliveries) != 1 || got.Decision == nil || got.Decision.By != "auto-approve" || got.OutboxID == "") {
				t.Errorf("auto-approved draft %+v with delivery jobs %+v; want approved by auto-approve with one delivery job", got, deliveries)
			}
			if !tt.approved && len(deliveries) != 0 {
				t.Errorf("%d delivery jobs for a channel that does not auto-approve, want 0", len(deliveries))
			}
			// Run again (a replay's new execution): the stored draft is reused.
			again, err := rv.Record(ctx, job, nil, 0, end, nil)
			if err != nil || again.ID != got.ID || again.Status != got.Status {
				t.Errorf("Record again = %+v, %v; want the same draft", again, err)
			}
			if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != len(deliveries) {
				t.Errorf("%d delivery jobs after a second Record, want %d", n, len(deliveries))
			}
		})
	}
}

// TestRecordLeaseLost: a job reaped while it drafted is not this
// execution's to complete, but its draft is still stored; the job stays as
// the reaper left it, for its next execution.
func TestRecordLeaseLost(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	ctx := context.Background()
	rec := record(t, st, "auto", "auto:lost", t0)
	job := claim(t, st, t0)
	if reaped, err := st.Reap(ctx, t0.Add(2*time.Minute), false); err != nil || len(reaped) != 1 {
		t.Fatalf("Reap = %d, %v; want 1", len(reaped), err)
	}
	d := draftFor(rec.Event, "Hi Ada")
	got, err := rv.Record(ctx, job, &d, 1, t0.Add(3*time.Minute), nil)
	if err != nil || got.Status != store.DraftApproved {
		t.Fatalf("Record after the lease was lost = %s, %v; want the draft stored and auto-approved", got.Status, err)
	}
	j, err := st.Job(job.ID)
	if err != nil || j.State != store.JobRetryable || len(j.Attempts) != 1 || j.Attempts[0].Outcome != store.OutcomeLeaseExpired {
		t.Errorf("job = %s %+v, %v; want retryable with its attempt lease_expired, as the reaper left it", j.State, j.Attempts, err)
	}
	if _, err := st.FinishJob(ctx, job.ID, job.ExecutionID, t0.Add(3*time.Minute), store.Result{Outcome: store.OutcomeCompleted}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishJob by the execution that lost the lease = %v, want ErrLeaseLost", err)
	}
}

// TestAutoApproveLeavesDecisions: a draft a person rejected is not
// auto-approved when its job runs again.
func TestAutoApproveLeavesDecisions(t *testing.T) {
	st := openStore(t)
	rv := newReview(st)
	ctx := context.Background()
	rec := record(t, st, "auto", "auto:rejected", t0)
	job := claim(t, st, t0)
	d := saved(t, rv, rec.Event, "Hi")
	if _, err := rv.Reject(ctx, d.ID, store.Decision{By: "ann", At: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := rv.Record(ctx, job, nil, 0, t0, nil)
	if err != nil || got.Status != store.DraftRejected || got.Decision.By != "ann" {
		t.Errorf("Record over a rejected draft = %s by %+v, %v; want ann's rejection to stand", got.Status, got.Decision, err)
	}
	if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != 0 {
		t.Errorf("%d delivery jobs, want 0", n)
	}
}
