package review_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

const window = 10 * time.Second

// refused fails t unless err is an undo's refusal saying want.
func refused(t *testing.T, err error, want string) {
	t.Helper()
	var u *delivery.UndoError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want an *UndoError saying %q", err, want)
	}
}

// auditActions are the audit's actions, newest first.
func auditActions(t *testing.T, st *store.Store) []string {
	t.Helper()
	log, err := st.AuditLog(20)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range log {
		out = append(out, e.Action)
	}
	return out
}

// TestUndoRejection: a person's rejection is taken back inside the window
// (the draft waits again, with the audit entry), and refused after it.
func TestUndoRejection(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rv := holding(st, window)
	rec := record(t, st, "web", "web:rej-1", t0)
	claimAndComplete(t, st, t0) // its draft job is done: the draft is saved by hand
	d := saved(t, rv, rec.Event, "We open at nine.")
	if _, err := rv.Reject(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(time.Minute), Reason: "wrong hours"}); err != nil {
		t.Fatal(err)
	}
	got, err := rv.Undo(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(time.Minute + 9*time.Second)})
	if err != nil {
		t.Fatalf("Undo: %v", err)
	}
	if got.What != review.UndoRejection || got.Draft.Status != store.DraftPending || got.Draft.Decision != nil {
		t.Fatalf("Undo = %s, draft %s %+v; want the rejection undone, pending", got.What, got.Draft.Status, got.Draft.Decision)
	}
	counts, err := st.DraftCountsFor(store.Everything())
	if err != nil || counts[store.DraftPending] != 1 || counts[store.DraftRejected] != 0 {
		t.Errorf("draft counts %v, %v; want 1 pending, 0 rejected", counts, err)
	}
	if a := auditActions(t, st); a[0] != "undo rejection" {
		t.Errorf("audit %v, want the undo first", a)
	}

	// Rejected again, then asked to undo at the window's end: refused.
	if _, err := rv.Reject(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	_, err = rv.Undo(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(2*time.Minute + window)})
	refused(t, err, "the undo window of this rejection ended at 12:02:10 UTC")
	if after, _ := st.Draft(d.ID); after.Status != store.DraftRejected {
		t.Errorf("the refused undo left the draft %s", after.Status)
	}
}

// TestUndoRejectionRefused: what makes a rejection final before the window ends.
func TestUndoRejectionRefused(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string
		want  string
	}{
		{
			name: "replaced by a regeneration",
			setup: func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string {
				d := saved(t, rv, ev, "v1")
				if _, _, err := rv.Save(ctx, draftFor(ev, "v2"), 2); err != nil {
					t.Fatal(err)
				}
				return d.ID
			},
			want: "was replaced by a newer version",
		},
		{
			name: "a new draft is being written",
			setup: func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string {
				d := saved(t, rv, ev, "v1")
				if _, err := rv.Reject(ctx, d.ID, store.Decision{By: "ann", At: t0}); err != nil {
					t.Fatal(err)
				}
				if _, err := rv.Redraft(ctx, ev.Key, store.Decision{By: "ann", At: t0, Reason: "shorter"}); err != nil {
					t.Fatal(err)
				}
				return d.ID
			},
			want: "a new draft of this conversation is being written",
		},
		{
			name: "closed with it",
			setup: func(t *testing.T, st *store.Store, rv *review.Review, ev store.Event) string {
				d := saved(t, rv, ev, "v1")
				if _, err := rv.Close(ctx, ev.Key, store.Decision{By: "ann", At: t0, Reason: "spam"}); err != nil {
					t.Fatal(err)
				}
				return d.ID
			},
			want: "undo the close instead",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			rv := holding(st, window)
			rec := record(t, st, "web", "web:rej-refused", t0.Add(-time.Minute))
			// The draft job of the event is done with: drafts are saved by hand here.
			claimAndComplete(t, st, t0.Add(-time.Minute))
			id := tt.setup(t, st, rv, rec.Event)
			_, err := rv.Undo(ctx, id, store.Decision{By: "ann", At: t0.Add(time.Second)})
			refused(t, err, tt.want)
		})
	}
}

// claimAndComplete runs the one due job to its end, writing nothing else.
func claimAndComplete(t *testing.T, st *store.Store, now time.Time) {
	t.Helper()
	j := claim(t, st, now)
	if err := st.Update(context.Background(), func(tx *store.Tx) error { return tx.CompleteJob(j.ID, j.ExecutionID, now) }); err != nil {
		t.Fatal(err)
	}
}

// TestUndoClose: a close taken back inside the window reopens the lead in
// the status it was closed from, with its turn, and its waiting draft back
// in the queue; after the window, or once the customer wrote again, it is
// refused.
func TestUndoClose(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rv := holding(st, window)
	rec := record(t, st, "web", "web:close-1", t0)
	d := saved(t, rv, rec.Event, "Thanks!")
	key := store.LeadKey("web", rec.Event.ConversationID)
	before, err := st.Handoff(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Close(ctx, rec.Event.Key, store.Decision{By: "dana", At: t0.Add(time.Minute), Reason: "handled by phone"}); err != nil {
		t.Fatal(err)
	}
	got, err := rv.UndoClose(ctx, key, store.Decision{By: "dana", At: t0.Add(time.Minute + 5*time.Second)})
	if err != nil {
		t.Fatalf("UndoClose: %v", err)
	}
	h := got.Lead
	if h.Status != before.Status || !h.Since.Equal(before.Since) || h.Closed != nil {
		t.Errorf("lead after the undo = %s since %s closed %+v; want %s since %s, not closed", h.Status, h.Since, h.Closed, before.Status, before.Since)
	}
	if h.TurnDraft != before.TurnDraft || strings.Join(h.TurnEvents, ",") != strings.Join(before.TurnEvents, ",") {
		t.Errorf("turn after the undo = %q %v, want %q %v", h.TurnDraft, h.TurnEvents, before.TurnDraft, before.TurnEvents)
	}
	if got.Draft == nil || got.Draft.ID != d.ID || got.Draft.Status != store.DraftPending {
		t.Fatalf("draft after the undo = %+v, want %s pending", got.Draft, d.ID)
	}
	if stored, _ := st.Draft(d.ID); stored.Status != store.DraftPending || stored.Decision != nil {
		t.Errorf("stored draft %s %+v, want pending and undecided", stored.Status, stored.Decision)
	}
	if a := auditActions(t, st); a[0] != "undo close" {
		t.Errorf("audit %v, want the undo first", a)
	}
	// The draft can be approved as if the close never was.
	if _, err := rv.Approve(ctx, d.ID, store.Decision{By: "dana", At: t0.Add(2 * time.Minute)}); err != nil {
		t.Errorf("Approve after the undone close: %v", err)
	}

	t.Run("after the window", func(t *testing.T) {
		st := openStore(t)
		rv := holding(st, window)
		rec := record(t, st, "web", "web:close-2", t0)
		saved(t, rv, rec.Event, "Thanks!")
		if _, err := rv.Close(ctx, rec.Event.Key, store.Decision{By: "dana", At: t0, Reason: "spam"}); err != nil {
			t.Fatal(err)
		}
		_, err := rv.UndoClose(ctx, store.LeadKey("web", rec.Event.ConversationID), store.Decision{By: "dana", At: t0.Add(window)})
		refused(t, err, "the undo window of this close ended")
	})
	t.Run("the customer wrote again", func(t *testing.T) {
		st := openStore(t)
		rv := holding(st, window)
		rec := record(t, st, "web", "web:close-3", t0)
		saved(t, rv, rec.Event, "Thanks!")
		if _, err := rv.Close(ctx, rec.Event.Key, store.Decision{By: "dana", At: t0, Reason: "spam"}); err != nil {
			t.Fatal(err)
		}
		next := store.Event{
			ID: ulid.Make().String(), Key: "web:close-3b", Channel: "web", MessageID: "close-3b",
			CorrelationID: ulid.Make().String(), ConversationID: rec.Event.ConversationID,
			Contact: rec.Event.Contact, Text: "hello?", ReceivedAt: t0.Add(time.Second),
		}
		if _, err := leads.RecordEvent(ctx, st, next, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: next.Key, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		_, err := rv.UndoClose(ctx, store.LeadKey("web", rec.Event.ConversationID), store.Decision{By: "dana", At: t0.Add(2 * time.Second)})
		refused(t, err, "not closed; there is no close to undo")
	})
}

// TestUndoCloseWithoutADraft: a close made while the turn had no draft
// (its draft job had ended without one) reopens the turn with a new draft
// job, so the lead is not left open with nothing coming.
func TestUndoCloseWithoutADraft(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rv := holding(st, window)
	rec := record(t, st, "web", "web:close-nodraft", t0)
	claimAndComplete(t, st, t0) // the draft job ended with nothing stored
	if _, err := rv.Close(ctx, rec.Event.Key, store.Decision{By: "dana", At: t0.Add(time.Minute), Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	got, err := rv.UndoClose(ctx, store.LeadKey("web", rec.Event.ConversationID), store.Decision{By: "dana", At: t0.Add(time.Minute + time.Second)})
	if err != nil {
		t.Fatalf("UndoClose: %v", err)
	}
	if got.Draft != nil || got.Job == nil || got.Job.Key != rec.Event.Key || got.Job.State != store.JobAvailable {
		t.Fatalf("UndoClose = draft %+v job %+v; want a new draft job for %s", got.Draft, got.Job, rec.Event.Key)
	}
	if got.Lead.TurnDraft != rec.Event.Key {
		t.Errorf("turn draft %q, want %s", got.Lead.TurnDraft, rec.Event.Key)
	}
}

// TestUndoTwiceAtOnce: two undos of the same decision at once — one
// takes it back, the other is refused, and the records agree (the store's
// check at cleanup) — for an approval, a rejection and a close.
func TestUndoTwiceAtOnce(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		decide func(t *testing.T, rv *review.Review, ev store.Event, d store.Draft)
		undo   func(rv *review.Review, ev store.Event, d store.Draft, at time.Time) error
		want   store.DraftStatus
	}{
		{
			name: "approval",
			decide: func(t *testing.T, rv *review.Review, ev store.Event, d store.Draft) {
				if _, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0}); err != nil {
					t.Fatal(err)
				}
			},
			undo: func(rv *review.Review, ev store.Event, d store.Draft, at time.Time) error {
				_, err := rv.Undo(ctx, d.ID, store.Decision{By: "ann", At: at})
				return err
			},
		},
		{
			name: "rejection",
			decide: func(t *testing.T, rv *review.Review, ev store.Event, d store.Draft) {
				if _, err := rv.Reject(ctx, d.ID, store.Decision{By: "ann", At: t0}); err != nil {
					t.Fatal(err)
				}
			},
			undo: func(rv *review.Review, ev store.Event, d store.Draft, at time.Time) error {
				_, err := rv.Undo(ctx, d.ID, store.Decision{By: "ann", At: at})
				return err
			},
		},
		{
			name: "close",
			decide: func(t *testing.T, rv *review.Review, ev store.Event, d store.Draft) {
				if _, err := rv.Close(ctx, ev.Key, store.Decision{By: "ann", At: t0, Reason: "spam"}); err != nil {
					t.Fatal(err)
				}
			},
			undo: func(rv *review.Review, ev store.Event, d store.Draft, at time.Time) error {
				_, err := rv.UndoClose(ctx, store.LeadKey(ev.Channel, ev.ConversationID), store.Decision{By: "ann", At: at})
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range 8 {
				st := openStore(t)
				rv := holding(st, window)
				rec := record(t, st, "web", "web:twice", t0.Add(-time.Minute))
				claimAndComplete(t, st, t0.Add(-time.Minute))
				d := saved(t, rv, rec.Event, "hi")
				tt.decide(t, rv, rec.Event, d)
				var ok, no atomic.Int32
				var other atomic.Value
				together(2, func(i int) {
					err := tt.undo(rv, rec.Event, d, t0.Add(time.Second))
					var u *delivery.UndoError
					switch {
					case err == nil:
						ok.Add(1)
					case errors.As(err, &u):
						no.Add(1)
					default:
						other.Store(err)
					}
				})
				if e := other.Load(); e != nil {
					t.Fatalf("round %d: an undo failed: %v", round, e)
				}
				if ok.Load() != 1 || no.Load() != 1 {
					t.Fatalf("round %d: %d undos took it back and %d were refused, want 1 and 1", round, ok.Load(), no.Load())
				}
				if got, _ := st.Draft(d.ID); got.Status != store.DraftPending {
					t.Fatalf("round %d: draft %s after the undos, want pending", round, got.Status)
				}
				undos := 0
				for _, a := range auditActions(t, st) {
					if strings.HasPrefix(a, "undo ") {
						undos++
					}
				}
				if undos != 1 {
					t.Fatalf("round %d: %d undo entries in the audit, want 1", round, undos)
				}
			}
		})
	}
}

// TestUndoable: the stack lists, newest first, what one person can still
// undo — a held approval, a rejection, a close — and nothing of another
// person's, nothing undone, nothing past its window.
func TestUndoable(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rv := holding(st, window)
	var evs []store.Event
	for _, k := range []string{"web:s-a", "web:s-b", "web:s-c", "web:s-d"} {
		evs = append(evs, record(t, st, "web", k, t0.Add(-time.Minute)).Event)
	}
	for range evs {
		claimAndComplete(t, st, t0.Add(-time.Minute)) // the draft jobs are done: drafts are saved by hand
	}
	ds := make([]store.Draft, len(evs))
	for i, ev := range evs {
		ds[i] = saved(t, rv, ev, "hi "+ev.Key)
	}
	if _, err := rv.Approve(ctx, ds[0].ID, store.Decision{By: "ann", At: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Reject(ctx, ds[1].ID, store.Decision{By: "ann", At: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Close(ctx, evs[2].Key, store.Decision{By: "ann", At: t0.Add(2 * time.Second), Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Approve(ctx, ds[3].ID, store.Decision{By: "bob", At: t0.Add(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	list := func(who string, now time.Time) string {
		t.Helper()
		us, err := rv.Undoable(who, now)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range us {
			out = append(out, u.What+" "+u.Key()+" until "+u.Until.Format("05"))
		}
		return strings.Join(out, "; ")
	}
	lead := func(i int) string { return store.LeadKey("web", evs[i].ConversationID) }
	now := t0.Add(4 * time.Second)
	want := "close " + lead(2) + " until 12; rejection " + ds[1].ID + " until 11; approval " + ds[0].ID + " until 10"
	if got := list("ann", now); got != want {
		t.Errorf("ann's stack = %s\nwant %s", got, want)
	}
	if got, want := list("bob", now), "approval "+ds[3].ID+" until 13"; got != want {
		t.Errorf("bob's stack = %s, want %s", got, want)
	}
	if got, want := list("ann", t0.Add(10500*time.Millisecond)), "close "+lead(2)+" until 12; rejection "+ds[1].ID+" until 11"; got != want {
		t.Errorf("ann's stack once the approval's window ended = %s, want %s", got, want)
	}
	if _, err := rv.Undo(ctx, ds[1].ID, store.Decision{By: "ann", At: now}); err != nil {
		t.Fatal(err)
	}
	if got, want := list("ann", now), "close "+lead(2)+" until 12; approval "+ds[0].ID+" until 10"; got != want {
		t.Errorf("ann's stack after undoing the rejection = %s, want %s", got, want)
	}
	if got := list("ann", t0.Add(time.Minute)); got != "" {
		t.Errorf("ann's stack a minute on = %s, want empty", got)
	}
	// A claimed delivery job is being sent: no longer offered.
	j := claim(t, st, t0.Add(11*time.Second))
	if j.Key != store.OutboxID(evs[0].ConversationID, ds[0].ID) {
		t.Fatalf("claimed %s %s, want the first approval's delivery", j.Kind, j.Key)
	}
	if got, want := list("ann", t0.Add(9*time.Second)), "close "+lead(2)+" until 12"; got != want {
		t.Errorf("ann's stack with the reply being sent = %s, want %s", got, want)
	}
}

// TestUndoCloseRacesAMessage: undoing a close while the customer writes
// again — each one transaction, so one comes first: either the undo
// reopens the lead and the message joins its turn (the draft superseded
// by the message's), or the message reopens the lead and the undo is
// refused. Never both half-done; the store's check at cleanup agrees.
func TestUndoCloseRacesAMessage(t *testing.T) {
	ctx := context.Background()
	for round := range 8 {
		st := openStore(t)
		rv := holding(st, window)
		rec := record(t, st, "web", "web:race-close", t0.Add(-time.Minute))
		claimAndComplete(t, st, t0.Add(-time.Minute))
		d := saved(t, rv, rec.Event, "hi")
		if _, err := rv.Close(ctx, rec.Event.Key, store.Decision{By: "ann", At: t0, Reason: "spam"}); err != nil {
			t.Fatal(err)
		}
		next := store.Event{
			ID: ulid.Make().String(), Key: "web:race-close-2", Channel: "web", MessageID: "race-close-2",
			CorrelationID: ulid.Make().String(), ConversationID: rec.Event.ConversationID,
			Contact: rec.Event.Contact, Text: "hello?", ReceivedAt: t0.Add(time.Second),
		}
		var undoErr, recErr error
		together(2, func(i int) {
			if i == 0 {
				_, undoErr = rv.UndoClose(ctx, store.LeadKey("web", rec.Event.ConversationID), store.Decision{By: "ann", At: t0.Add(time.Second)})
				return
			}
			_, recErr = leads.RecordEvent(ctx, st, next, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: next.Key, MaxAttempts: 3})
		})
		if recErr != nil {
			t.Fatalf("round %d: the message: %v", round, recErr)
		}
		h, err := st.Handoff(store.LeadKey("web", rec.Event.ConversationID))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := st.Draft(d.ID)
		switch {
		case undoErr == nil:
			// The undo came first: the message joined the reopened turn.
			if got.Status != store.DraftSuperseded || len(h.TurnEvents) != 2 || h.Status == leads.Closed {
				t.Fatalf("round %d: undo first, then the message: draft %s, lead %s turn %v; want superseded, open, two messages", round, got.Status, h.Status, h.TurnEvents)
			}
		default:
			refused(t, undoErr, "not closed")
			if got.Status != store.DraftRejected || h.Status != leads.Received || h.TurnDraft != next.Key {
				t.Fatalf("round %d: the message first: draft %s, lead %s turn %q; want rejected, received, the new turn", round, got.Status, h.Status, h.TurnDraft)
			}
		}
	}
}
