package review_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// holding is the test config with approvals held for window.
func holding(st *store.Store, window time.Duration) *review.Review {
	cfg := testConfig()
	cfg.UndoWindow = window
	return review.New(st, cfg)
}

// TestUndoPutsTheDraftBack: inside the window, Undo deletes the reply's
// row and its delivery job, puts the draft back in the queue at its place,
// reopens the lead's turn, and says so in the lead's history and the audit;
// approving it again holds a new reply.
func TestUndoPutsTheDraftBack(t *testing.T) {
	st := openStore(t)
	rv := holding(st, 10*time.Second)
	ctx := context.Background()
	rec := record(t, st, "web", "web:undo-1", t0)
	d := saved(t, rv, rec.Event, "Yes, we ship to Lisbon.")
	res, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(time.Minute), Text: "Yes — we ship to Lisbon."})
	if err != nil {
		t.Fatalf("Approve: %v", err)
	}
	if want := t0.Add(time.Minute + 10*time.Second); !res.Outbox.UndoUntil.Equal(want) {
		t.Fatalf("undo_until = %s, want %s", res.Outbox.UndoUntil, want)
	}
	if h, _ := st.Handoff(store.LeadKey("web", rec.Event.ConversationID)); h.TurnDraft != "" {
		t.Fatalf("the approval left the turn open (turn_draft %q)", h.TurnDraft)
	}

	got, err := rv.Undo(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(time.Minute + 4*time.Second), From: "192.0.2.1"})
	if err != nil {
		t.Fatalf("Undo: %v", err)
	}
	if got.Draft.Status != store.DraftPending || got.Outbox.ID != res.Outbox.ID {
		t.Errorf("Undo = draft %s, row %s; want pending, %s", got.Draft.Status, got.Outbox.ID, res.Outbox.ID)
	}
	if _, err := st.OutboxRow(res.Outbox.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the row after the undo: %v, want ErrNotFound", err)
	}
	if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != 0 {
		t.Errorf("%d delivery jobs after the undo, want 0", n)
	}
	page, _, err := st.Drafts(store.DraftFilter{Status: store.DraftPending, Limit: 10})
	if err != nil || len(page) != 1 || page[0].ID != d.ID || page[0].Decision != nil || page[0].OutboxID != "" {
		t.Fatalf("the queue after the undo = %+v, %v; want draft %s, undecided", page, err, d.ID)
	}
	counts, err := st.DraftCountsFor(store.Everything())
	if err != nil || counts[store.DraftPending] != 1 || counts[store.DraftApproved] != 0 {
		t.Errorf("draft counts %v, %v; want 1 pending, 0 approved", counts, err)
	}
	h, err := st.Handoff(store.LeadKey("web", rec.Event.ConversationID))
	if err != nil {
		t.Fatal(err)
	}
	if h.TurnDraft != rec.Event.Key || len(h.TurnEvents) != 1 || h.TurnEvents[0] != rec.Event.Key {
		t.Errorf("lead's turn after the undo = draft %q events %v, want %s open again", h.TurnDraft, h.TurnEvents, rec.Event.Key)
	}
	if last := h.History[len(h.History)-1]; !strings.Contains(last.Note, "undone by ann") || last.Status != h.Status {
		t.Errorf("lead's last history entry = %+v, want the undo by ann, status unchanged", last)
	}
	log, err := st.AuditLog(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) == 0 || log[0].Action != "undo approval" || log[0].Who != "ann" || log[0].Target != d.ID || !strings.Contains(log[0].Detail, "edited text, which is discarded") {
		t.Errorf("newest audit entry = %+v, want ann's undo of %s noting the discarded edit", log[0], d.ID)
	}

	again, err := rv.Approve(ctx, d.ID, store.Decision{By: "bob", At: t0.Add(2 * time.Minute)})
	if err != nil || !again.Created || again.Outbox.ID != res.Outbox.ID || again.Outbox.ApprovedBy != "bob" {
		t.Fatalf("approving again = created %v row %s by %s, %v; want a new row %s by bob", again.Created, again.Outbox.ID, again.Outbox.ApprovedBy, err, res.Outbox.ID)
	}
	if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != 1 {
		t.Errorf("%d delivery jobs after approving again, want 1", n)
	}
}

// TestUndoRefused: nothing to undo, an approval sent at once, and a lead
// whose customer wrote again are refused with an *UndoError, writing nothing.
func TestUndoRefused(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		window time.Duration
		setup  func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string // the draft to undo
		want   string
	}{
		{
			name: "a waiting draft", window: 10 * time.Second,
			setup: func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string {
				return saved(t, rv, ev, "hi").ID
			},
			want: "is pending_approval, not approved; there is no approval to undo",
		},
		{
			name: "undo_window 0", window: 0,
			setup: func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string {
				d := saved(t, rv, ev, "hi")
				if _, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0}); err != nil {
					t.Fatal(err)
				}
				return d.ID
			},
			want: "approved to be sent at once (no undo window)",
		},
		{
			name: "the customer wrote again", window: 10 * time.Second,
			setup: func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string {
				d := saved(t, rv, ev, "hi")
				if _, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0}); err != nil {
					t.Fatal(err)
				}
				next := store.Event{
					ID: ulid.Make().String(), Key: "web:undo-next", Channel: "web", MessageID: "undo-next",
					CorrelationID: ulid.Make().String(), ConversationID: ev.ConversationID,
					Contact: ev.Contact, Text: "and to Porto?", ReceivedAt: t0.Add(time.Second),
				}
				if _, err := leads.RecordEvent(ctx, st, next, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: next.Key, MaxAttempts: 3}); err != nil {
					t.Fatal(err)
				}
				return d.ID
			},
			want: "the customer wrote again after the approval",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			rv := holding(st, tt.window)
			rec := record(t, st, "web", "web:undo-refused", t0.Add(-time.Minute))
			id := tt.setup(t, st, rv, rec.Event)
			before, _ := st.Draft(id)
			_, err := rv.Undo(ctx, id, store.Decision{By: "bob", At: t0.Add(2 * time.Second)})
			var refused *delivery.UndoError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Undo = %v, want an *UndoError saying %q", err, tt.want)
			}
			if after, _ := st.Draft(id); after.Status != before.Status || after.OutboxID != before.OutboxID {
				t.Errorf("the refused undo moved the draft from %s to %s", before.Status, after.Status)
			}
			if before.OutboxID != "" {
				if _, err := st.OutboxRow(before.OutboxID); err != nil {
					t.Errorf("the refused undo's row %s: %v, want it kept", before.OutboxID, err)
				}
				if err := st.View(func(tx *store.Tx) error { _, err := tx.LiveJob(delivery.Kind, before.OutboxID); return err }); err != nil {
					t.Errorf("the refused undo's delivery job: %v, want it kept", err)
				}
			}
			log, err := st.AuditLog(10)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range log {
				if e.Who == "bob" {
					t.Errorf("the refused undo wrote an audit entry: %+v", e)
				}
			}
		})
	}
}

// TestAutoApprovalIsNotHeld: an auto-approval has nobody to undo it, so its
// delivery job is due at once whatever undo_window says.
func TestAutoApprovalIsNotHeld(t *testing.T) {
	st := openStore(t)
	rv := holding(st, time.Minute)
	rec := record(t, st, "auto", "auto:undo", t0)
	d := saved(t, rv, rec.Event, "hi")
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		_, err := rv.AutoApproveTx(tx, d, t0, ulid.Make().String())
		return err
	})
	if err != nil {
		t.Fatalf("AutoApproveTx: %v", err)
	}
	jobs := jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)
	if len(jobs) != 1 || !jobs[0].RunAt.Equal(t0) {
		t.Fatalf("delivery jobs %+v, want one due at %s", jobs, t0)
	}
	o, err := st.OutboxRow(store.OutboxID(rec.Event.ConversationID, d.ID))
	if err != nil || !o.UndoUntil.IsZero() {
		t.Errorf("auto-approved row undo_until = %s, %v; want none", o.UndoUntil, err)
	}
}
