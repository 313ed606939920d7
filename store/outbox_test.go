package store

import (
	"context"
	"errors"
	"fmt"
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
	var all []Job
	err := st.View(func(tx *Tx) (err error) { all, err = tx.JobsByCorrelation(corr); return err })
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

// The outbox's transitions are the delivery package's (and tested there);
// delivery imports the store, so the store's own tests cannot call it. The
// tests of leads, stuck alerts and retention need rows in given states and
// a job dismissed, so these fixtures put them there through the same Tx
// operations delivery uses, under the names those tests were written in.

// OutboxResult is the outcome the FinishOutbox fixture records.
type OutboxResult struct {
	Status     OutboxStatus
	ProviderID string
	Note       string
	Attempt    OutboxAttempt
	JobID      string
}

// outboxPrev is what a row held before the ClaimOutbox fixture claimed it.
type outboxPrev struct{ Status OutboxStatus }

// ClaimOutbox (fixture) marks a pending or effect_pending row effect_pending for execID.
func (s *Store) ClaimOutbox(ctx context.Context, id, execID string, now time.Time) (Outbox, outboxPrev, error) {
	var row Outbox
	var prev outboxPrev
	err := s.Update(ctx, func(tx *Tx) error {
		o, err := tx.Outbox(id)
		if err != nil {
			return err
		}
		row, prev = o, outboxPrev{Status: o.Status}
		if o.Status != OutboxPending && o.Status != OutboxEffectPending {
			return nil
		}
		row.Status, row.ExecutionID, row.ClaimedAt, row.UpdatedAt = OutboxEffectPending, execID, now, now
		return tx.PutOutbox(&o, &row)
	})
	return row, prev, err
}

// FinishOutbox (fixture) records r on a row execID claimed: a sent row
// moves its lead (replyFixture), and a settled row completes job r.JobID.
func (s *Store) FinishOutbox(ctx context.Context, id, execID string, now time.Time, r OutboxResult) (Outbox, error) {
	var row Outbox
	err := s.Update(ctx, func(tx *Tx) error {
		o, err := tx.Outbox(id)
		if err != nil {
			return err
		}
		if o.Status != OutboxEffectPending || o.ExecutionID != execID {
			return ErrLeaseLost
		}
		row = o
		row.Attempts = append(row.Attempts, r.Attempt)
		row.Status, row.UpdatedAt = r.Status, now
		if r.Note != "" {
			row.Note = r.Note
		}
		if r.Status == OutboxSent {
			row.ProviderID, row.SentAt, row.ExecutionID, row.Note = r.ProviderID, &now, "", ""
			if err := replyFixture(tx, row, now); err != nil {
				return err
			}
		}
		if r.JobID != "" && r.Status != OutboxEffectPending && r.Status != OutboxPending {
			if err := tx.CompleteJob(r.JobID, execID, now); err != nil && !errors.Is(err, ErrLeaseLost) {
				return err
			}
		}
		return tx.PutOutbox(&o, &row)
	})
	return row, err
}

// DismissDeadLetter (fixture) dismisses the discarded job id.
func (s *Store) DismissDeadLetter(ctx context.Context, id string, d Dismissal) error {
	return s.Update(ctx, func(tx *Tx) error {
		dl, err := tx.DeadLetter(id, nil)
		if err != nil {
			return err
		}
		if dl.Job == nil {
			return fmt.Errorf("fixture: %s is not a discarded job", id)
		}
		return tx.DismissJob(dl.Job, d)
	})
}
