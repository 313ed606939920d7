package leads_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// TestFlagStuckOncePerStay walks one lead through received and matched on
// an injected clock: flagged only past each threshold, once per stay, and
// again for a new stay in the next status.
func TestFlagStuckOncePerStay(t *testing.T) {
	st := openStore(t, t.TempDir())
	const conv = "conv-stuck"
	key := "web:" + conv + "@"
	ev := receive(t, st, "stuck-1", conv, "", t0)

	wantFlagged(t, "received, t0+9m", flagAt(t, st, t0.Add(9*time.Minute), nil))
	if h := lead(t, st, conv); h.Stuck() {
		t.Errorf("at t0+9m the lead reads as stuck: %+v", h)
	}
	wantFlagged(t, "received, t0+10m (exactly the threshold)", flagAt(t, st, t0.Add(10*time.Minute), nil))
	wantFlagged(t, "received, t0+11m", flagAt(t, st, t0.Add(11*time.Minute), nil), key+"received")
	h := lead(t, st, conv)
	if !h.Stuck() || !h.StuckSince.Equal(t0) || !h.StuckAt.Equal(t0.Add(11*time.Minute)) {
		t.Errorf("after flagging: stuck %v since %v at %v; want stuck since t0, flagged at t0+11m", h.Stuck(), h.StuckSince, h.StuckAt)
	}
	wantFlagged(t, "received, t0+20m (same stay)", flagAt(t, st, t0.Add(20*time.Minute), nil))
	wantFlagged(t, "received, t0+5h (same stay)", flagAt(t, st, t0.Add(5*time.Hour), nil))

	// A contact is identified: a new stay, in matched.
	matchedAt := t0.Add(6 * time.Hour)
	saveDraft(t, st, ev, "", map[string]string{"email": "ada@example.com"}, matchedAt)
	if h := lead(t, st, conv); h.Status != leads.Matched || h.Stuck() {
		t.Fatalf("after the draft: %s, stuck %v; want matched and not stuck", h.Status, h.Stuck())
	}
	wantFlagged(t, "matched, +29m", flagAt(t, st, matchedAt.Add(29*time.Minute), nil))
	wantFlagged(t, "matched, +31m", flagAt(t, st, matchedAt.Add(31*time.Minute), nil), key+"matched")
	wantFlagged(t, "matched, +3h (same stay)", flagAt(t, st, matchedAt.Add(3*time.Hour), nil))
	h = lead(t, st, conv)
	if !h.Stuck() || !h.StuckSince.Equal(matchedAt) {
		t.Errorf("matched stay: stuck %v since %v; want since %v", h.Stuck(), h.StuckSince, matchedAt)
	}
	// Flagging changes nothing of the lead's status or history.
	if h.Status != leads.Matched || len(h.History) != 2 {
		t.Errorf("flagging moved the lead: %s with %d transitions", h.Status, len(h.History))
	}
}

// TestFlagStuckThresholdPerStatus flags each lead by its own status's
// threshold, and Stuck lists the same leads before they are flagged.
func TestFlagStuckThresholdPerStatus(t *testing.T) {
	st := openStore(t, t.TempDir())
	receive(t, st, "r", "conv-r", "", t0)
	m := receive(t, st, "m", "conv-m", "", t0)
	saveDraft(t, st, m, "", map[string]string{"phone": "+15550001"}, t0)
	o := receive(t, st, "o", "conv-o", "+15550002", t0)
	saveDraft(t, st, o, "sales", nil, t0)
	done := receive(t, st, "done", "conv-done", "+15550003", t0)
	send(t, st, saveDraft(t, st, done, "sales", nil, t0), t0)

	cases := []struct {
		at   time.Duration
		want string
	}{
		{11 * time.Minute, "web:conv-r@received"},
		{31 * time.Minute, "web:conv-m@matched"},
		{4*time.Hour + time.Minute, "web:conv-o@owned"},
		{365 * 24 * time.Hour, ""}, // a replied lead is never stuck
	}
	listed := []string{}
	for _, c := range cases {
		t.Run(c.at.String(), func(t *testing.T) {
			now := t0.Add(c.at)
			if c.want != "" {
				listed = append(listed, c.want)
			}
			hs, err := leads.Stuck(st, nil, now, stuckAfter, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hs {
				got = append(got, fmt.Sprintf("%s@%s", h.Key, h.Status))
			}
			if g, w := strings.Join(got, ","), strings.Join(listed, ","); g != w {
				t.Errorf("Stuck at t0+%s = %q, want %q", c.at, g, w)
			}
			if c.want == "" {
				wantFlagged(t, "t0+"+c.at.String(), flagAt(t, st, now, nil))
			} else {
				wantFlagged(t, "t0+"+c.at.String(), flagAt(t, st, now, nil), c.want)
			}
		})
	}
}

// TestFlagStuckAlertOnceAcrossRestarts: with an alert, flagging a lead
// creates one alert row "stuck:<lead>:<since>" and one delivery job in the
// same transaction; flagging again, even after closing and reopening the
// store, creates nothing more.
func TestFlagStuckAlertOnceAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const conv = "conv-alert"
	ev := receive(t, st, "alert-1", conv, "", t0)
	wantID := delivery.AlertID("web:"+conv, t0)
	if want := fmt.Sprintf("stuck:web:%s:%d", conv, t0.Unix()); wantID != want {
		t.Fatalf("AlertID = %s, want %s", wantID, want)
	}

	wantFlagged(t, "t0+9m", flagAt(t, st, t0.Add(9*time.Minute), pager))
	if rows := alertRows(t, st); len(rows) != 0 {
		t.Fatalf("alert rows before the lead is stuck: %v", rows)
	}
	wantFlagged(t, "t0+11m", flagAt(t, st, t0.Add(11*time.Minute), pager), "web:"+conv+"@received")
	check := func(when string, st *store.Store) {
		t.Helper()
		rows := alertRows(t, st)
		if len(rows) != 1 {
			t.Fatalf("%s: %d alert rows, want 1", when, len(rows))
		}
		o := rows[0]
		if o.ID != wantID || o.Provider != "pager" || o.Status != store.OutboxPending || o.EventKey != ev.Key || o.To != "team" {
			t.Errorf("%s: alert row %+v; want id %s, provider pager, pending, event %s, to team", when, o, wantID, ev.Key)
		}
		if !strings.Contains(o.Text, "web:"+conv) || !strings.Contains(o.Text, "received") {
			t.Errorf("%s: alert text %q does not name the lead and its status", when, o.Text)
		}
		var jobs []store.Job
		err := st.View(func(tx *store.Tx) (err error) { jobs, err = tx.JobsByCorrelation("alert:web:" + conv); return err })
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Kind != delivery.Kind || jobs[0].Key != wantID || jobs[0].MaxAttempts != 4 {
			t.Fatalf("%s: alert jobs %+v; want one delivery job for %s with 4 attempts", when, jobs, wantID)
		}
	}
	check("after flagging", st)
	wantFlagged(t, "t0+12m", flagAt(t, st, t0.Add(12*time.Minute), pager))
	check("after flagging again", st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, dir)
	wantFlagged(t, "after a restart, t0+13m", flagAt(t, st, t0.Add(13*time.Minute), pager))
	check("after a restart", st)
	if h := lead(t, st, conv); h.Status != leads.Received || !h.Stuck() {
		t.Errorf("lead after the alert: %s, stuck %v; want still received and stuck", h.Status, h.Stuck())
	}
}

// TestFlagStuckAlertFailsFlagsNothing: an alert that cannot be written
// rolls back the flag with it, so the next run tries the lead again.
func TestFlagStuckAlertFailsFlagsNothing(t *testing.T) {
	st := openStore(t, t.TempDir())
	receive(t, st, "af-1", "conv-af", "", t0)
	broken := func(*store.Tx, store.Handoff, time.Time) error { return fmt.Errorf("no provider") }
	if _, err := leads.FlagStuck(t.Context(), st, t0.Add(11*time.Minute), stuckAfter, broken); err == nil {
		t.Fatal("FlagStuck with a failing alert: nil error, want it")
	}
	if h := lead(t, st, "conv-af"); h.Stuck() {
		t.Errorf("the lead was flagged although its alert failed: %+v", h)
	}
	wantFlagged(t, "next run", flagAt(t, st, t0.Add(12*time.Minute), pager), "web:conv-af@received")
}

// TestFlagStuckBacklog flags a backlog larger than one transaction's
// chunk and scan limits, with flagged leads in between the new ones: each
// lead is flagged exactly once, across transactions that resume where the
// last one stopped, and a later sweep finds only the newcomers.
func TestFlagStuckBacklog(t *testing.T) {
	st := openStore(t, t.TempDir())
	const old = 2300 // more than scanChunk, so one sweep takes several scans
	for i := range old {
		receive(t, st, fmt.Sprintf("m%d", i), fmt.Sprintf("c%d", i), "", t0.Add(time.Duration(i)*time.Millisecond))
	}
	now := t0.Add(time.Hour)
	got, err := leads.FlagStuck(context.Background(), st, now, stuckAfter, nil)
	if err != nil || len(got) != old {
		t.Fatalf("first sweep flagged %d (%v), want %d", len(got), err, old)
	}
	seen := map[string]bool{}
	for _, h := range got {
		if seen[h.Key] {
			t.Fatalf("lead %s flagged twice in one sweep", h.Key)
		}
		seen[h.Key] = true
	}
	// Newcomers sort after the flagged backlog in the status index.
	for i := range 3 {
		receive(t, st, fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", i), "", t0.Add(10*time.Minute))
	}
	got, err = leads.FlagStuck(context.Background(), st, now.Add(time.Hour), stuckAfter, nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("second sweep flagged %d (%v), want the 3 newcomers only", len(got), err)
	}
}
