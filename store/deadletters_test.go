package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// discardDraftJob records an event whose draft job fails its only attempt
// at at, and returns the discarded job.
func discardDraftJob(t *testing.T, st *Store, key string, at time.Time, why string) Job {
	t.Helper()
	ctx := context.Background()
	rec, err := st.RecordEvent(ctx, newEvent(key, at), draftJobFor(key, 1))
	if err != nil {
		t.Fatalf("RecordEvent(%s): %v", key, err)
	}
	j := claimOne(t, st, at, time.Minute)
	if j.ID != rec.Job.ID {
		t.Fatalf("claimed job %s, want %s", j.ID, rec.Job.ID)
	}
	j, err = st.FinishJob(ctx, j.ID, j.ExecutionID, at, Result{Outcome: OutcomeRetry, Err: why})
	if err != nil || j.State != JobDiscarded {
		t.Fatalf("FinishJob = %s, %v; want discarded", j.State, err)
	}
	return j
}

// parkedRow records an event, drafts and approves it, and leaves its reply
// in status with one attempt of outcome; the delivery job stays queued
// (nothing runs it in a store test).
func parkedRow(t *testing.T, st *Store, key string, at time.Time, status OutboxStatus, outcome, note string) Outbox {
	t.Helper()
	ctx := context.Background()
	record(t, st, key, at)
	d, _, err := st.SaveDraft(ctx, Draft{EventKey: key, Text: "reply to " + key, Drafter: "template", PromptVersion: "v1", ExecutionID: "x", CreatedAt: at})
	if err != nil {
		t.Fatalf("SaveDraft: %v", err)
	}
	a, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "ann", At: at}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
	if err != nil {
		t.Fatalf("ApproveDraft: %v", err)
	}
	exec := ulid.Make().String()
	if _, _, err := st.ClaimOutbox(ctx, a.Outbox.ID, exec, at); err != nil {
		t.Fatalf("ClaimOutbox: %v", err)
	}
	o, err := st.FinishOutbox(ctx, a.Outbox.ID, exec, at, OutboxResult{Status: status, Note: note, Attempt: OutboxAttempt{ExecutionID: exec, At: at, Action: "send", Outcome: outcome, Error: note}})
	if err != nil {
		t.Fatalf("FinishOutbox: %v", err)
	}
	return o
}

func deadIDs(dls []DeadLetter) []string {
	out := []string{}
	for _, dl := range dls {
		out = append(out, dl.ID)
	}
	return out
}

func TestDeadLettersListFilterAndSafety(t *testing.T) {
	st := openTest(t)
	job := discardDraftJob(t, st, "web:job-1", t0, "model said 500")
	failed := parkedRow(t, st, "web:row-1", t0.Add(time.Hour), OutboxFailed, "permanent", "provider answered 400: bad number")
	unsure := parkedRow(t, st, "web:row-2", t0.Add(2*time.Hour), OutboxNeedsReconciliation, "ambiguous", "timed out; cannot look it up")
	parkedRow(t, st, "web:row-3", t0, OutboxSent, "sent", "") // not a dead letter

	all, err := st.DeadLetters(DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := deadIDs(all); len(got) != 3 || got[0] != job.ID || got[1] != failed.ID || got[2] != unsure.ID {
		t.Fatalf("DeadLetters = %v, want [%s %s %s]", got, job.ID, failed.ID, unsure.ID)
	}
	byID := map[string]DeadLetter{}
	for _, dl := range all {
		byID[dl.ID] = dl
	}
	checks := []struct {
		id, kind, state, errText, why string
		safe                          bool
	}{
		{job.ID, DeadJob, "discarded", "model said 500", "no draft was stored", true},
		{failed.ID, DeadOutbox, "failed", "bad number", "refused it permanently", true},
		{unsure.ID, DeadOutbox, "needs_reconciliation", "cannot look it up", "may already have this message", false},
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
		f    DeadLetterFilter
		want []string
	}{
		{"jobs", DeadLetterFilter{Kind: DeadJob}, []string{job.ID}},
		{"replies", DeadLetterFilter{Kind: DeadOutbox}, []string{failed.ID, unsure.ID}},
		{"error text, any case", DeadLetterFilter{Error: "BAD NUMBER"}, []string{failed.ID}},
		{"other channel", DeadLetterFilter{Channel: "sms"}, []string{}},
		{"channel", DeadLetterFilter{Channel: "web", Kind: DeadJob}, []string{job.ID}},
		{"older than", DeadLetterFilter{OlderThan: t0.Add(90 * time.Minute)}, []string{job.ID, failed.ID}},
		{"limit", DeadLetterFilter{Limit: 1}, []string{job.ID}},
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
	dl, err := st.ReplayDeadLetter(ctx, job.ID, Replay{By: "boss", At: at, From: "10.0.0.1"}, 4, ulid.Make().String())
	if err != nil {
		t.Fatalf("ReplayDeadLetter: %v", err)
	}
	if dl.ID != job.ID || dl.Kind != DeadJob {
		t.Errorf("answer %s %s, want the job", dl.ID, dl.Kind)
	}
	got := mustJob(t, st, job.ID)
	if got.State != JobAvailable || got.MaxAttempts != got.Attempt+4 || len(got.Replays) != 1 || got.Replays[0].By != "boss" {
		t.Errorf("job after replay: state %s attempts %d/%d replays %v; want available with 4 more attempts and boss's replay", got.State, got.Attempt, got.MaxAttempts, got.Replays)
	}
	if rest, err := st.DeadLetters(DeadLetterFilter{}); err != nil {
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
	if _, err := st.ReplayDeadLetter(ctx, job.ID, Replay{By: "boss", At: at}, 4, ulid.Make().String()); !errors.Is(err, ErrNotFound) {
		t.Errorf("second replay: %v, want ErrNotFound", err)
	}
	wantAuditEntry(t, st, "boss", "replay job", job.ID)
}

func TestReplayUnsafeNeedsConfirmation(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	row := parkedRow(t, st, "web:row-1", t0, OutboxNeedsReconciliation, "ambiguous", "timed out")
	_, err := st.ReplayDeadLetter(ctx, row.ID, Replay{By: "boss", At: t0}, 3, ulid.Make().String())
	var unsafe *UnsafeReplayError
	if !errors.As(err, &unsafe) || !errors.Is(err, ErrUnconfirmed) || !strings.Contains(err.Error(), "may already have this message") {
		t.Fatalf("unconfirmed replay: %v, want an UnsafeReplayError saying why", err)
	}
	if o, err := st.OutboxRow(row.ID); err != nil {
		t.Fatalf("OutboxRow(%s): %v", row.ID, err)
	} else if o.Status != OutboxNeedsReconciliation || len(o.Replays) != 0 {
		t.Fatalf("a refused replay changed the row: %s %v", o.Status, o.Replays)
	}
	jobsBefore := countKeys(t, st, bucketJobs)
	if _, err := st.ReplayDeadLetter(ctx, row.ID, Replay{By: "boss", At: t0.Add(time.Minute), Confirmed: true}, 3, ulid.Make().String()); err != nil {
		t.Fatalf("confirmed replay: %v", err)
	}
	o, err := st.OutboxRow(row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != OutboxPending || len(o.Replays) != 1 || !o.Replays[0].Confirmed || o.ID != row.ID {
		t.Errorf("row after confirmed replay: %s replays %v, want pending under the same id with a confirmed replay", o.Status, o.Replays)
	}
	// The approval's delivery job was still queued (nothing runs jobs here),
	// so the replay reuses it rather than making a second one.
	if n := countKeys(t, st, bucketJobs); n != jobsBefore {
		t.Errorf("jobs: %d, want %d (the live delivery job reused)", n, jobsBefore)
	}
	wantAuditEntry(t, st, "boss", "replay outbox", row.ID)
}

func TestDismissDeadLetter(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	job := discardDraftJob(t, st, "web:job-1", t0, "boom")
	row := parkedRow(t, st, "web:row-1", t0, OutboxFailed, "permanent", "refused")
	for _, id := range []string{job.ID, row.ID} {
		if err := st.DismissDeadLetter(ctx, id, Dismissal{By: "boss", At: t0, Reason: "spam"}); err != nil {
			t.Fatalf("dismiss %s: %v", id, err)
		}
	}
	// A dismissed job is cancelled and off the list: there is no such dead letter.
	if _, err := st.ReplayDeadLetter(ctx, job.ID, Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String()); !errors.Is(err, ErrNotFound) {
		t.Errorf("replaying the dismissed job: %v, want ErrNotFound", err)
	}
	// A dismissed row still exists: the refusal says it was dismissed.
	var state *StateError
	if _, err := st.ReplayDeadLetter(ctx, row.ID, Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String()); !errors.As(err, &state) || state.State != "dismissed" {
		t.Errorf("replaying the dismissed row: %v, want a StateError naming dismissed", err)
	}
	if got := mustJob(t, st, job.ID); got.State != JobCancelled || got.Dismissed == nil || got.Dismissed.Reason != "spam" {
		t.Errorf("dismissed job: %s %v", got.State, got.Dismissed)
	}
	if rest, err := st.DeadLetters(DeadLetterFilter{}); err != nil {
		t.Errorf("DeadLetters: %v", err)
	} else if len(rest) != 0 {
		t.Errorf("the list still holds %v", deadIDs(rest))
	}
	if err := st.DismissDeadLetter(ctx, "nope", Dismissal{By: "boss", At: t0, Reason: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("dismissing an unknown id: %v, want ErrNotFound", err)
	}
	wantAuditEntry(t, st, "boss", "cancel job", job.ID)
}

// TestDismissedRowsLeaveTheCount: the navigation's dead-letter count must
// agree with the list once an item is cancelled.
func TestDismissedRowsLeaveTheCount(t *testing.T) {
	st := openTest(t)
	row := parkedRow(t, st, "web:row-1", t0, OutboxFailed, "permanent", "refused")
	if err := st.DismissDeadLetter(context.Background(), row.ID, Dismissal{By: "boss", At: t0, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	list, err := st.DeadLetters(DeadLetterFilter{})
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
	row := parkedRow(t, st, "web:row-1", t0, OutboxNeedsReconciliation, "ambiguous", "timed out after accepting")
	if _, err := st.ReplayDeadLetter(ctx, row.ID, Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String()); err != nil {
		t.Fatal(err)
	}
	exec := ulid.Make().String()
	if _, _, err := st.ClaimOutbox(ctx, row.ID, exec, t0); err != nil {
		t.Fatal(err)
	}
	note := "permanent failure (409): sandbox: reference was already delivered; refusing a second copy"
	if _, err := st.FinishOutbox(ctx, row.ID, exec, t0, OutboxResult{Status: OutboxFailed, Note: note, Attempt: OutboxAttempt{ExecutionID: exec, At: t0, Action: "send", Outcome: "permanent", Error: note}}); err != nil {
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
	rec, err := st.RecordEvent(ctx, newEvent(key, t0), draftJobFor(key, 1))
	if err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, st, t0, time.Minute)
	v1, _, err := st.SaveDraft(ctx, Draft{EventKey: key, Text: "first try", Drafter: "openai", Model: "m1", PromptVersion: "p1", InputHash: "h1", ExecutionID: j.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0, Result{Outcome: OutcomeRetry, Err: "approval failed"}); err != nil {
		t.Fatal(err)
	}
	dl, err := st.DeadLetter(rec.Job.ID)
	if err != nil || !dl.Safe || dl.Draft == nil || !strings.Contains(dl.Why, "reused") {
		t.Fatalf("dead letter with a stored draft: %+v, %v; want safe, the draft reused", dl, err)
	}
	if _, err := st.ReplayDeadLetter(ctx, rec.Job.ID, Replay{By: "boss", At: t0.Add(time.Minute), Regenerate: true}, 3, ulid.Make().String()); err != nil {
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
		v2, created, err := st.SaveDraftVersion(ctx, Draft{EventKey: key, Text: "second try", Drafter: "openai", Model: "m2", PromptVersion: "p2", InputHash: "h2", ExecutionID: "e2", CreatedAt: at}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if created != (i == 0) || v2.Version != 2 || v2.Replaces != v1.ID || v2.Status != DraftPending || v2.ID == v1.ID {
			t.Errorf("save %d: created %v, version %d replaces %q status %s id %s; want version 2 replacing %s, created once", i, created, v2.Version, v2.Replaces, v2.Status, v2.ID, v1.ID)
		}
	}
	versions, err := st.DraftVersions(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 2 || versions[0].ID != v1.ID || versions[1].Replaces != v1.ID {
		t.Fatalf("DraftVersions = %+v, want v1 then v2 replacing it", versions)
	}
	old := versions[0]
	if old.Status != DraftRejected || old.Decision == nil || !strings.Contains(old.Decision.Reason, versions[1].ID) || old.Text != "first try" || old.Model != "m1" {
		t.Errorf("v1 after regeneration: %s %+v, want kept as written, rejected with a note naming %s", old.Status, old.Decision, versions[1].ID)
	}
	if cur, err := st.DraftByEvent(key); err != nil {
		t.Errorf("DraftByEvent(%s): %v", key, err)
	} else if cur.ID != versions[1].ID {
		t.Errorf("the event's draft is %s, want %s", cur.ID, versions[1].ID)
	}
	// The queue holds only the new version.
	page, _, err := st.Drafts(DraftFilter{Status: DraftPending})
	if err != nil || len(page) != 1 || page[0].ID != versions[1].ID {
		t.Errorf("pending drafts %v, %v; want only v2", page, err)
	}
}

func TestRegenerateRefusedOnceApproved(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	key := "web:approved"
	rec, err := st.RecordEvent(ctx, newEvent(key, t0), draftJobFor(key, 1))
	if err != nil {
		t.Fatal(err)
	}
	j := claimOne(t, st, t0, time.Minute)
	d, _, err := st.SaveDraft(ctx, Draft{EventKey: key, Text: "hi", ExecutionID: j.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0, Result{Outcome: OutcomeRetry, Err: "x"}); err != nil {
		t.Fatal(err)
	}
	var state *StateError
	if _, err := st.ReplayDeadLetter(ctx, rec.Job.ID, Replay{By: "boss", At: t0, Regenerate: true}, 3, ulid.Make().String()); !errors.As(err, &state) {
		t.Errorf("regenerating an approved draft: %v, want a StateError", err)
	}
	if _, _, err := st.SaveDraftVersion(ctx, Draft{EventKey: key, Text: "again", CreatedAt: t0}, 2); !errors.As(err, &state) {
		t.Errorf("SaveDraftVersion over an approved draft: %v, want a StateError", err)
	}
	if got := mustJob(t, st, rec.Job.ID); got.State != JobDiscarded {
		t.Errorf("a refused replay changed the job to %s", got.State)
	}
}

func wantAuditEntry(t *testing.T, st *Store, who, action, target string) {
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
		run  func(st *Store, id string) error
	}{
		{"confirmed replay", func(st *Store, id string) error {
			_, err := st.ReplayDeadLetter(context.Background(), id, Replay{By: "boss", At: t0, Confirmed: true}, 3, ulid.Make().String())
			return err
		}},
		{"reconciled as not sent", func(st *Store, id string) error {
			_, err := st.Reconcile(context.Background(), id, Reconciliation{By: "boss", At: t0, Outcome: "not_sent"}, ulid.Make().String(), 3)
			return err
		}},
	}
	for _, rq := range requeues {
		t.Run(rq.name, func(t *testing.T) {
			st := openTest(t)
			ctx := context.Background()
			rec := record(t, st, "web:race", t0)
			draftJob := claimOne(t, st, t0, time.Minute)
			d, _, err := st.SaveDraft(ctx, Draft{EventKey: rec.Event.Key, Text: "hi", ExecutionID: draftJob.ExecutionID, CreatedAt: t0})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.FinishJob(ctx, draftJob.ID, draftJob.ExecutionID, t0, Result{Outcome: OutcomeCompleted}); err != nil {
				t.Fatal(err)
			}
			a, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			deliver := claimOne(t, st, t0, time.Minute)
			if _, _, err := st.ClaimOutbox(ctx, a.Outbox.ID, deliver.ExecutionID, t0); err != nil {
				t.Fatal(err)
			}
			// The delivery job's protocol: the outcome and the job's end in one transaction.
			if _, err := st.FinishOutbox(ctx, a.Outbox.ID, deliver.ExecutionID, t0, OutboxResult{Status: OutboxNeedsReconciliation, Note: "unknown", JobID: deliver.ID, Attempt: OutboxAttempt{ExecutionID: deliver.ExecutionID, At: t0, Action: "send", Outcome: "ambiguous"}}); err != nil {
				t.Fatal(err)
			}
			// Here, before the runner records the attempt's end, a person acts.
			if err := rq.run(st, a.Outbox.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := st.FinishJob(ctx, deliver.ID, deliver.ExecutionID, t0, Result{Outcome: OutcomeCompleted}); err != nil {
				t.Fatal(err)
			}
			o, err := st.OutboxRow(a.Outbox.ID)
			if err != nil {
				t.Fatal(err)
			}
			due, err := st.ClaimJobs(ctx, t0.Add(time.Hour), 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != OutboxPending || len(due) != 1 || due[0].Kind != KindDeliver || due[0].Key != o.ID {
				t.Errorf("reply %s is %s with %d due jobs; want pending with one delivery job for it", o.ID, o.Status, len(due))
			}
		})
	}
}

// approvedRow records an event, stores its draft, approves it and claims its
// delivery, returning the row and the claimed delivery job.
func approvedRow(t *testing.T, st *Store, key string) (Outbox, Job) {
	t.Helper()
	ctx := context.Background()
	rec := record(t, st, key, t0)
	dj := claimOne(t, st, t0, time.Minute)
	d, _, err := st.SaveDraft(ctx, Draft{EventKey: rec.Event.Key, Text: "hi", ExecutionID: dj.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, dj.ID, dj.ExecutionID, t0, Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	a, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 3})
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
	if err := st.DismissDeadLetter(ctx, o.ID, Dismissal{By: "ann", At: t0, Reason: "x"}); err == nil {
		t.Fatal("a row being sent (effect_pending) was cancelled")
	}
	fail := func(job Job) {
		t.Helper()
		if _, err := st.FinishOutbox(ctx, o.ID, job.ExecutionID, t0, OutboxResult{Status: OutboxFailed, Note: "400", JobID: job.ID}); err != nil {
			t.Fatal(err)
		}
	}
	fail(job)
	if err := st.DismissDeadLetter(ctx, o.ID, Dismissal{By: "ann", At: t0, Reason: "customer left"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reconcile(ctx, o.ID, Reconciliation{By: "ann", At: t0, Outcome: "not_sent"}, ulid.Make().String(), 3); err != nil {
		t.Fatal(err)
	}
	again := claimOne(t, st, t0.Add(time.Minute), time.Minute)
	if _, _, err := st.ClaimOutbox(ctx, o.ID, again.ExecutionID, t0); err != nil {
		t.Fatal(err)
	}
	fail(again)
	dls, err := st.DeadLetters(DeadLetterFilter{Kind: DeadOutbox})
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
	d, _, err := st.SaveDraft(ctx, Draft{EventKey: rec.Event.Key, Text: "hi", ExecutionID: dj.ExecutionID, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, dj.ID, dj.ExecutionID, t0, Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	a, err := st.ApproveDraft(ctx, d.ID, Approval{Decision: Decision{By: "ann", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	job := claimOne(t, st, t0, time.Minute)
	if _, err := st.FinishJob(ctx, job.ID, job.ExecutionID, t0, Result{Outcome: OutcomeDiscarded, Err: "no such provider"}); err != nil {
		t.Fatal(err)
	}
	dl, err := st.DeadLetter(job.ID)
	if err != nil || !dl.Safe {
		t.Fatalf("dead letter %+v, %v; want a safe item", dl, err)
	}
	if _, err := st.ReplayDeadLetter(ctx, job.ID, Replay{By: "ann", At: t0}, 3, ulid.Make().String()); err != nil {
		t.Fatalf("replay of a dead delivery job with a pending row: %v", err)
	}
	due, err := st.ClaimJobs(ctx, t0.Add(time.Hour), 10, time.Minute)
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
	if n, err := st.ReapLeases(ctx, t0.Add(time.Hour), false); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v; want the delivery job", n, err)
	}
	if _, err := st.FinishOutbox(ctx, o.ID, job.ExecutionID, t0, OutboxResult{Status: OutboxSent, ProviderID: "p-1", JobID: job.ID}); err != nil {
		t.Fatalf("FinishOutbox after the reap: %v", err)
	}
	got, err := st.OutboxRow(o.ID)
	if err != nil || got.Status != OutboxSent || got.ProviderID != "p-1" {
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
	row := parkedRow(t, st, "web:regen-reply", t0, OutboxNeedsReconciliation, "ambiguous", "timed out")
	for _, confirmed := range []bool{false, true} {
		t.Run(fmt.Sprint("confirmed=", confirmed), func(t *testing.T) {
			_, err := st.ReplayDeadLetter(ctx, row.ID, Replay{By: "boss", At: t0, Regenerate: true, Confirmed: confirmed}, 3, ulid.Make().String())
			var nr *NotRegenerableError
			if !errors.Is(err, ErrNotRegenerable) || !errors.As(err, &nr) || nr.ID != row.ID || !strings.Contains(err.Error(), row.ID+" is a reply (outbox row)") {
				t.Fatalf("regenerating a reply: %v, want ErrNotRegenerable naming %s as a reply", err, row.ID)
			}
			if errors.Is(err, ErrUnconfirmed) {
				t.Errorf("regenerating a reply: %v, want no request for confirmation", err)
			}
			if o, err := st.OutboxRow(row.ID); err != nil {
				t.Fatalf("OutboxRow(%s): %v", row.ID, err)
			} else if o.Status != OutboxNeedsReconciliation || len(o.Replays) != 0 {
				t.Errorf("a refused regenerate changed the row: %s %v", o.Status, o.Replays)
			}
		})
	}
}
