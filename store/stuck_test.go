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

// The stuck-lead rules (thresholds, once per stay, the alert) are leads'
// (leads/stuck_test.go); the store keeps the scan they run on and the
// alert rows' retention.

// TestEachHandoff walks one status's index: longest waiting first, only
// leads that entered the status before the cutoff, stopping when fn says so.
func TestEachHandoff(t *testing.T) {
	st := openTest(t)
	hoReceive(t, st, "web:e-1", "conv-e1", "", hoT0)
	hoReceive(t, st, "web:e-2", "conv-e2", "", hoT0.Add(time.Minute))
	hoReceive(t, st, "web:e-3", "conv-e3", "", hoT0.Add(2*time.Minute))
	m := hoReceive(t, st, "web:e-m", "conv-em", "", hoT0)
	hoSaveDraft(t, st, m, "", map[string]string{"email": "ada@example.com"}, hoT0)

	walk := func(status HandoffStatus, before time.Time, max int) string {
		t.Helper()
		var keys []string
		err := st.View(func(tx *Tx) error {
			return tx.EachHandoff(status, before, func(h Handoff) (bool, error) {
				keys = append(keys, h.Key)
				return len(keys) < max, nil
			})
		})
		if err != nil {
			t.Fatalf("EachHandoff(%s, %s): %v", status, before, err)
		}
		return strings.Join(keys, ",")
	}
	cases := []struct {
		name   string
		status HandoffStatus
		before time.Time
		max    int
		want   string
	}{
		{"every received", HandoffReceived, time.Time{}, 10, "web:conv-e1,web:conv-e2,web:conv-e3"},
		{"received before t0+2m", HandoffReceived, hoT0.Add(2 * time.Minute), 10, "web:conv-e1,web:conv-e2"},
		{"received before t0 (exactly)", HandoffReceived, hoT0, 10, ""},
		{"stops when told", HandoffReceived, time.Time{}, 1, "web:conv-e1"},
		{"matched", HandoffMatched, time.Time{}, 10, "web:conv-em"},
		{"owned: none", HandoffOwned, time.Time{}, 10, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := walk(c.status, c.before, c.max); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// putAlert writes the alert row of lead h's stay and its delivery job, as
// delivery.CreateAlertTx does (a fixture: store's tests cannot import
// delivery).
func putAlert(t *testing.T, st *Store, h Handoff, now time.Time) Outbox {
	t.Helper()
	o := Outbox{
		V: recordVersion, ID: fmt.Sprintf("stuck:%s:%d", h.Key, h.Since.Unix()), Kind: OutboxAlert, EventKey: h.LastEventKey,
		Channel: h.Channel, CorrelationID: "alert:" + h.Key, ConversationID: h.ConversationID, To: "team",
		Text: "stuck", Provider: "pager", Status: OutboxPending, CreatedAt: now, UpdatedAt: now, Attempts: []OutboxAttempt{},
	}
	err := st.Update(context.Background(), func(tx *Tx) error {
		if err := tx.PutOutbox(nil, &o); err != nil {
			return err
		}
		_, _, err := tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: KindDeliver, Key: o.ID, MaxAttempts: 2}, o.CorrelationID, now)
		return err
	})
	if err != nil {
		t.Fatalf("put alert %s: %v", o.ID, err)
	}
	return o
}

// alertRows returns the alert rows in the outbox.
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
	putAlert(t, st, hoLead(t, st, "conv-po-1"), hoT0.Add(11*time.Minute))
	putAlert(t, st, hoLead(t, st, "conv-po-2"), hoT0.Add(12*time.Minute))
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
