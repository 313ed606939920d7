package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// stuckAfter are the thresholds of the stuck tests (stuck.received, .matched, .owned).
var stuckAfter = map[HandoffStatus]time.Duration{
	HandoffReceived: 10 * time.Minute,
	HandoffMatched:  30 * time.Minute,
	HandoffOwned:    4 * time.Hour,
}

// flagAt runs FlagStuck at now and returns the keys of the leads it flagged.
func flagAt(t *testing.T, st *Store, now time.Time, alert *StuckAlert) []string {
	t.Helper()
	hs, err := st.FlagStuck(context.Background(), now, stuckAfter, alert)
	if err != nil {
		t.Fatalf("FlagStuck(%s): %v", now, err)
	}
	var keys []string
	for _, h := range hs {
		keys = append(keys, fmt.Sprintf("%s@%s", h.Key, h.Status))
	}
	return keys
}

func wantFlagged(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: flagged %v, want %v", what, got, want)
	}
}

// TestFlagStuckOncePerStay walks one lead through received and matched on
// an injected clock: flagged only past each threshold, once per stay, and
// again for a new stay in the next status.
func TestFlagStuckOncePerStay(t *testing.T) {
	st := openTest(t)
	const conv = "conv-stuck"
	lead := "web:" + conv + "@"
	ev := hoReceive(t, st, "web:stuck-1", conv, "", hoT0)

	wantFlagged(t, "received, t0+9m", flagAt(t, st, hoT0.Add(9*time.Minute), nil))
	if h := hoLead(t, st, conv); h.Stuck() {
		t.Errorf("at t0+9m the lead reads as stuck: %+v", h)
	}
	wantFlagged(t, "received, t0+10m (exactly the threshold)", flagAt(t, st, hoT0.Add(10*time.Minute), nil))
	wantFlagged(t, "received, t0+11m", flagAt(t, st, hoT0.Add(11*time.Minute), nil), lead+"received")
	h := hoLead(t, st, conv)
	if !h.Stuck() || !h.StuckSince.Equal(hoT0) || !h.StuckAt.Equal(hoT0.Add(11*time.Minute)) {
		t.Errorf("after flagging: stuck %v since %v at %v; want stuck since t0, flagged at t0+11m", h.Stuck(), h.StuckSince, h.StuckAt)
	}
	wantFlagged(t, "received, t0+20m (same stay)", flagAt(t, st, hoT0.Add(20*time.Minute), nil))
	wantFlagged(t, "received, t0+5h (same stay)", flagAt(t, st, hoT0.Add(5*time.Hour), nil))

	// A contact is identified: a new stay, in matched.
	matchedAt := hoT0.Add(6 * time.Hour)
	hoSaveDraft(t, st, ev, "", map[string]string{"email": "ada@example.com"}, matchedAt)
	h = hoLead(t, st, conv)
	if h.Status != HandoffMatched || h.Stuck() {
		t.Fatalf("after the draft: %s, stuck %v; want matched and not stuck", h.Status, h.Stuck())
	}
	wantFlagged(t, "matched, +29m", flagAt(t, st, matchedAt.Add(29*time.Minute), nil))
	wantFlagged(t, "matched, +31m", flagAt(t, st, matchedAt.Add(31*time.Minute), nil), lead+"matched")
	wantFlagged(t, "matched, +3h (same stay)", flagAt(t, st, matchedAt.Add(3*time.Hour), nil))
	if h := hoLead(t, st, conv); !h.Stuck() || !h.StuckSince.Equal(matchedAt) {
		t.Errorf("matched stay: stuck %v since %v; want since %v", h.Stuck(), h.StuckSince, matchedAt)
	}
	// Flagging changes nothing of the lead's status or history.
	if h := hoLead(t, st, conv); h.Status != HandoffMatched || len(h.History) != 2 {
		t.Errorf("flagging moved the lead: %s with %d transitions", h.Status, len(h.History))
	}
}

// TestFlagStuckThresholdPerStatus flags each lead by its own status's threshold.
func TestFlagStuckThresholdPerStatus(t *testing.T) {
	st := openTest(t)
	hoReceive(t, st, "web:r", "conv-r", "", hoT0)
	m := hoReceive(t, st, "web:m", "conv-m", "", hoT0)
	hoSaveDraft(t, st, m, "", map[string]string{"phone": "+15550001"}, hoT0)
	o := hoReceive(t, st, "web:o", "conv-o", "+15550002", hoT0)
	hoSaveDraft(t, st, o, "sales", nil, hoT0)
	done := hoReceive(t, st, "web:done", "conv-done", "+15550003", hoT0)
	hoSend(t, st, hoSaveDraft(t, st, done, "sales", nil, hoT0), hoT0)

	wantFlagged(t, "t0+11m", flagAt(t, st, hoT0.Add(11*time.Minute), nil), "web:conv-r@received")
	wantFlagged(t, "t0+31m", flagAt(t, st, hoT0.Add(31*time.Minute), nil), "web:conv-m@matched")
	wantFlagged(t, "t0+4h1m", flagAt(t, st, hoT0.Add(4*time.Hour+time.Minute), nil), "web:conv-o@owned")
	// A replied lead is never stuck.
	wantFlagged(t, "a year on", flagAt(t, st, hoT0.Add(365*24*time.Hour), nil))
}

// alertRows returns the alert rows in the outbox, by status pending.
func alertRows(t *testing.T, st *Store) []Outbox {
	t.Helper()
	var out []Outbox
	for _, status := range []OutboxStatus{OutboxPending, OutboxEffectPending, OutboxSent, OutboxFailed, OutboxNeedsReconciliation} {
		rows, err := st.OutboxByStatus(status, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rows {
			if o.Kind == OutboxAlert {
				out = append(out, o)
			}
		}
	}
	return out
}

// TestFlagStuckAlertOnceAcrossRestarts: with an alert provider, flagging a
// lead creates one alert row "stuck:<lead>:<since>" and one delivery job in
// the same transaction; flagging again, even after closing and reopening
// the store, creates nothing more.
func TestFlagStuckAlertOnceAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const conv = "conv-alert"
	ev := hoReceive(t, st, "web:alert-1", conv, "", hoT0)
	// The draft job is done (say the drafter found nothing to draft), so
	// the only job left to count is the alert's.
	if got := runDue(t, st, hoT0, OutcomeCompleted); len(got) != 1 {
		t.Fatalf("ran %d jobs, want the draft job", len(got))
	}
	alert := &StuckAlert{Provider: "pager", MaxAttempts: 4, NewJobID: func() string { return ulid.Make().String() }}
	wantID := fmt.Sprintf("stuck:web:%s:%d", conv, hoT0.Unix())

	wantFlagged(t, "t0+9m", flagAt(t, st, hoT0.Add(9*time.Minute), alert))
	if rows := alertRows(t, st); len(rows) != 0 {
		t.Fatalf("alert rows before the lead is stuck: %v", rows)
	}
	wantFlagged(t, "t0+11m", flagAt(t, st, hoT0.Add(11*time.Minute), alert), "web:"+conv+"@received")
	check := func(when string) {
		t.Helper()
		rows := alertRows(t, st)
		if len(rows) != 1 {
			t.Fatalf("%s: %d alert rows, want 1", when, len(rows))
		}
		o := rows[0]
		if o.ID != wantID || o.Provider != "pager" || o.Status != OutboxPending || o.EventKey != ev.Key || o.To != "team" {
			t.Errorf("%s: alert row %+v; want id %s, provider pager, pending, event %s, to team", when, o, wantID, ev.Key)
		}
		if !strings.Contains(o.Text, "web:"+conv) || !strings.Contains(o.Text, "received") {
			t.Errorf("%s: alert text %q does not name the lead and its status", when, o.Text)
		}
		jobs, err := st.JobsByCorrelation("alert:web:" + conv)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Kind != KindDeliver || jobs[0].Key != wantID || jobs[0].MaxAttempts != 4 {
			t.Fatalf("%s: alert jobs %+v; want one delivery job for %s with 4 attempts", when, jobs, wantID)
		}
	}
	check("after flagging")
	wantFlagged(t, "t0+12m", flagAt(t, st, hoT0.Add(12*time.Minute), alert))
	check("after flagging again")

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		st.Close()
	})
	wantFlagged(t, "after a restart, t0+13m", flagAt(t, st, hoT0.Add(13*time.Minute), alert))
	check("after a restart")
	if h := hoLead(t, st, conv); h.Status != HandoffReceived || !h.Stuck() {
		t.Errorf("lead after the alert: %s, stuck %v; want still received and stuck", h.Status, h.Stuck())
	}
}

// TestPruneOutside: a sent stuck-lead alert (its row and its job) and old
// sandbox messages go once they are older than the cutoff; a pending alert
// and newer messages stay.
func TestPruneOutside(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	hoReceive(t, st, "web:po-1", "conv-po-1", "", hoT0)
	hoReceive(t, st, "web:po-2", "conv-po-2", "", hoT0.Add(time.Minute))
	if got := runDue(t, st, hoT0.Add(time.Minute), OutcomeCompleted); len(got) != 2 {
		t.Fatalf("ran %d draft jobs, want 2", len(got))
	}
	alert := &StuckAlert{Provider: "pager", MaxAttempts: 2, NewJobID: func() string { return ulid.Make().String() }}
	wantFlagged(t, "t0+11m", flagAt(t, st, hoT0.Add(11*time.Minute), alert), "web:conv-po-1@received")
	wantFlagged(t, "t0+12m", flagAt(t, st, hoT0.Add(12*time.Minute), alert), "web:conv-po-2@received")
	// Deliver the first alert only.
	sent := alertRows(t, st)[0]
	j := claimOne(t, st, hoT0.Add(11*time.Minute), time.Minute)
	if j.Key != sent.ID {
		t.Fatalf("claimed %s, want the first alert %s", j.Key, sent.ID)
	}
	if _, _, err := st.ClaimOutbox(ctx, sent.ID, j.ExecutionID, hoT0.Add(11*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishOutbox(ctx, sent.ID, j.ExecutionID, hoT0.Add(11*time.Minute), OutboxResult{Status: OutboxSent, ProviderID: "p-1", JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Time{hoT0, hoT0.Add(time.Hour)} {
		if _, _, err := st.SandboxAccept(ctx, SandboxMessage{Ref: fmt.Sprint("ref-", i), ID: fmt.Sprint("sbx-", i), ReceivedAt: at}); err != nil {
			t.Fatal(err)
		}
	}

	if n, err := st.PruneOutside(ctx, hoT0); err != nil || n != 0 {
		t.Fatalf("PruneOutside before anything is old = %d, %v; want 0", n, err)
	}
	n, err := st.PruneOutside(ctx, hoT0.Add(30*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("PruneOutside = %d, %v; want 2 (the sent alert and the old sandbox message)", n, err)
	}
	rows := alertRows(t, st)
	if len(rows) != 1 || rows[0].ID == sent.ID || rows[0].Status != OutboxPending {
		t.Errorf("alert rows left %+v; want only the pending one", rows)
	}
	if _, err := st.Job(j.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("the sent alert's job: %v, want it deleted", err)
	}
	msgs, err := st.SandboxMessages(10)
	if err != nil || len(msgs) != 1 || msgs[0].Ref != "ref-1" {
		t.Errorf("sandbox messages left %+v, %v; want only ref-1", msgs, err)
	}
}
