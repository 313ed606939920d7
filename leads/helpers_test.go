package leads_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// t0 is the fixed clock of the lead tests; every time is passed explicitly.
var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// stuckAfter are the thresholds of the stuck tests (stuck.received, .matched, .owned).
var stuckAfter = map[store.HandoffStatus]time.Duration{
	leads.Received: 10 * time.Minute,
	leads.Matched:  30 * time.Minute,
	leads.Owned:    4 * time.Hour,
}

// openStore opens a store on a real bbolt file in dir, checked and closed
// at cleanup.
func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	return testkit.OpenStore(t, dir)
}

func testConfig() *config.Config {
	return &config.Config{
		Channels: []config.Channel{{Name: "web", Provider: "sandbox"}},
		Retry:    config.Retry{MaxAttempts: 3},
	}
}

// receive records one inbound message of lead web:<conv> at at.
func receive(t *testing.T, st *store.Store, msgID, conv, contact string, at time.Time) store.Event {
	t.Helper()
	rec, err := intake.Record(context.Background(), st, intake.Message{
		Channel: "web", MessageID: msgID, ConversationID: conv, Contact: contact, Text: "message " + msgID, ReceivedAt: at,
	}, 3)
	if err != nil || !rec.Created {
		t.Fatalf("intake.Record(%s) = created %v, %v", msgID, rec.Created, err)
	}
	return rec.Event
}

// saveDraft stores a draft for ev routed to owner, with fields, at at.
func saveDraft(t *testing.T, st *store.Store, ev store.Event, owner string, fields map[string]string, at time.Time) store.Draft {
	t.Helper()
	d, created, err := review.New(st, testConfig()).Save(context.Background(), store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Text: "reply to " + ev.Key, Drafter: "template", PromptVersion: "v1", Fields: fields,
		Owner: owner, RuleVersion: "r1", Rule: "default", ExecutionID: ulid.Make().String(), CreatedAt: at,
	}, 1)
	if err != nil || !created {
		t.Fatalf("Save(%s) = created %v, %v", ev.Key, created, err)
	}
	return d
}

// send approves d at at and records its reply as sent.
func send(t *testing.T, st *store.Store, d store.Draft, at time.Time) {
	t.Helper()
	ctx := context.Background()
	ap, err := review.New(st, testConfig()).Approve(ctx, d.ID, store.Decision{By: "tester", At: at})
	if err != nil {
		t.Fatalf("Approve(%s): %v", d.ID, err)
	}
	ob := delivery.New(st, testConfig())
	exec := ulid.Make().String()
	if _, _, err := ob.Claim(ctx, ap.Outbox.ID, exec, at); err != nil {
		t.Fatalf("Claim(%s): %v", ap.Outbox.ID, err)
	}
	if o, err := ob.Finish(ctx, ap.Outbox.ID, exec, at, delivery.Result{Status: store.OutboxSent, ProviderID: "p-" + d.ID}); err != nil || o.Status != store.OutboxSent {
		t.Fatalf("Finish(%s) = %s, %v; want sent", ap.Outbox.ID, o.Status, err)
	}
}

func lead(t *testing.T, st *store.Store, conv string) store.Handoff {
	t.Helper()
	h, err := st.Handoff(store.LeadKey("web", conv))
	if err != nil {
		t.Fatalf("Handoff(%s): %v", conv, err)
	}
	return h
}

// pager is the alert of stuck.alert: "pager", 4 attempts.
func pager(tx *store.Tx, h store.Handoff, now time.Time) error {
	_, err := delivery.CreateAlertTx(tx, delivery.Alert{Lead: h, Provider: "pager", At: now, JobID: ulid.Make().String(), MaxAttempts: 4})
	return err
}

// flagAt runs FlagStuck at now and returns the leads it flagged as key@status.
func flagAt(t *testing.T, st *store.Store, now time.Time, alert leads.AlertTx) string {
	t.Helper()
	hs, err := leads.FlagStuck(context.Background(), st, now, stuckAfter, alert)
	if err != nil {
		t.Fatalf("FlagStuck(%s): %v", now, err)
	}
	var keys []string
	for _, h := range hs {
		keys = append(keys, fmt.Sprintf("%s@%s", h.Key, h.Status))
	}
	return strings.Join(keys, ",")
}

func wantFlagged(t *testing.T, what, got string, want ...string) {
	t.Helper()
	if w := strings.Join(want, ","); got != w {
		t.Errorf("%s: flagged %q, want %q", what, got, w)
	}
}

// alertRows returns the alert rows in the outbox.
func alertRows(t *testing.T, st *store.Store) []store.Outbox {
	t.Helper()
	var out []store.Outbox
	for _, status := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending, store.OutboxSent, store.OutboxFailed, store.OutboxNeedsReconciliation} {
		rows, err := st.OutboxByStatus(status, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rows {
			if o.Kind == store.OutboxAlert {
				out = append(out, o)
			}
		}
	}
	return out
}
