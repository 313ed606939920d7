package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// undoRig is a store with the web channel sending through the sandbox and
// approvals held for a 10s undo window, on a clock the test gives.
type undoRig struct {
	st   *store.Store
	rv   *review.Review
	send map[string]delivery.Sender
}

var undoT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

const undoWindow = 10 * time.Second

func newUndoRig(t *testing.T) *undoRig {
	t.Helper()
	st := openStore(t)
	cfg := &config.Config{
		Channels:   []config.Channel{{Name: "web", Provider: "sandbox"}},
		Retry:      config.Retry{MaxAttempts: 3},
		UndoWindow: undoWindow,
	}
	ps, err := provider.Open(nil, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatalf("provider.Open: %v", err)
	}
	send := map[string]delivery.Sender{}
	for name, p := range ps {
		send[name] = p
	}
	return &undoRig{st: st, rv: review.New(st, cfg), send: send}
}

// approved records message key, stores its draft and approves it at undoT0:
// the reply is held until undoT0 + undoWindow.
func (g *undoRig) approved(t *testing.T, key string) review.Approved {
	t.Helper()
	ctx := context.Background()
	rec, err := leads.RecordEvent(ctx, g.st, store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key, CorrelationID: ulid.Make().String(),
		ConversationID: "conv-" + key, Contact: "ada@example.com", Name: "Ada", Text: "Do you ship to Lisbon?",
		ReceivedAt: undoT0.Add(-time.Minute),
	}, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: key, MaxAttempts: 3})
	if err != nil {
		t.Fatalf("RecordEvent: %v", err)
	}
	d, _, err := g.rv.Save(ctx, store.Draft{
		EventKey: key, Text: "Yes, we ship to Lisbon.", Drafter: "template", CreatedAt: rec.Event.ReceivedAt,
	}, 1)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	res, err := g.rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: undoT0})
	if err != nil || !res.Created {
		t.Fatalf("Approve = created %v, %v", res.Created, err)
	}
	if !res.Outbox.UndoUntil.Equal(undoT0.Add(undoWindow)) {
		t.Fatalf("row's undo_until = %s, want %s", res.Outbox.UndoUntil, undoT0.Add(undoWindow))
	}
	var j store.Job
	err = g.st.View(func(tx *store.Tx) (err error) { j, err = tx.LiveJob(delivery.Kind, res.Outbox.ID); return err })
	if err != nil || !j.RunAt.Equal(res.Outbox.UndoUntil) {
		t.Fatalf("delivery job = due %s, %v; want due at the end of the window %s", j.RunAt, err, res.Outbox.UndoUntil)
	}
	return res
}

// deliverOnly claims delivery jobs alone (the draft jobs of the fixtures
// stay queued).
var deliverOnly = store.ClaimLimits{Kinds: map[string]int{delivery.Kind: 1}}

// TestUndoRacesTheClaim: an undo inside the window and the runner's claim
// of the delivery job, released together, over many rounds. Exactly one
// wins each round: the undo, and then nothing is sent and the draft waits
// again; or the claim, and then the undo is refused and the reply is sent
// once.
func TestUndoRacesTheClaim(t *testing.T) {
	g := newUndoRig(t)
	ctx := context.Background()
	const rounds = 40
	undone, sent := 0, 0
	for r := range rounds {
		res := g.approved(t, fmt.Sprintf("web:race-%d", r))
		var (
			claimed []store.Job
			claimEr error
			undoErr error
		)
		testkit.Together(2, func(i int) {
			if i == 0 {
				// The job is due: the window has ended for the runner's clock.
				claimed, claimEr = g.st.Claim(ctx, undoT0.Add(undoWindow), deliverOnly, time.Minute)
				return
			}
			// The person pressed Undo a moment before the window's end.
			_, undoErr = g.rv.Undo(ctx, res.Draft.ID, store.Decision{By: "ann", At: undoT0.Add(undoWindow - time.Millisecond)})
		})
		if claimEr != nil {
			t.Fatalf("round %d: Claim: %v", r, claimEr)
		}
		var refused *delivery.UndoError
		switch {
		case undoErr == nil:
			undone++
			if len(claimed) != 0 {
				t.Fatalf("round %d: the undo won and the runner still claimed %d job(s)", r, len(claimed))
			}
			if _, err := g.st.OutboxRow(res.Outbox.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("round %d: outbox row after the undo: %v, want ErrNotFound", r, err)
			}
			if err := g.st.View(func(tx *store.Tx) error { _, err := tx.LiveJob(delivery.Kind, res.Outbox.ID); return err }); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("round %d: delivery job after the undo: %v, want none", r, err)
			}
			if d, err := g.st.Draft(res.Draft.ID); err != nil || d.Status != store.DraftPending || d.OutboxID != "" || d.Decision != nil {
				t.Errorf("round %d: draft after the undo = %s outbox %q decision %v, %v; want pending with neither", r, d.Status, d.OutboxID, d.Decision, err)
			}
		case errors.As(undoErr, &refused):
			sent++
			if len(claimed) != 1 || claimed[0].Key != res.Outbox.ID {
				t.Fatalf("round %d: the undo was refused (%v) but the runner claimed %d job(s)", r, undoErr, len(claimed))
			}
			if d, err := g.st.Draft(res.Draft.ID); err != nil || d.Status != store.DraftApproved {
				t.Errorf("round %d: draft after a refused undo = %s, %v; want approved", r, d.Status, err)
			}
			job := &delivery.Job{Store: g.st, Providers: g.send, Now: func() time.Time { return undoT0.Add(undoWindow) }}
			if err := job.Run(ctx, claimed[0]); err != nil {
				t.Fatalf("round %d: delivery job: %v", r, err)
			}
			if o, err := g.st.OutboxRow(res.Outbox.ID); err != nil || o.Status != store.OutboxSent {
				t.Errorf("round %d: row after the send = %s, %v; want sent", r, o.Status, err)
			}
		default:
			t.Fatalf("round %d: Undo: %v", r, undoErr)
		}
		msg, err := g.st.SandboxLookup(res.Outbox.ID)
		switch {
		case undoErr == nil && !errors.Is(err, store.ErrNotFound):
			t.Errorf("round %d: the undone reply reached the provider: %+v, %v", r, msg, err)
		case undoErr != nil && (err != nil || msg.Repeats != 0):
			t.Errorf("round %d: the sent reply at the provider: %+v, %v; want it once", r, msg, err)
		}
	}
	msgs, err := g.st.SandboxMessages(rounds + 1)
	if err != nil {
		t.Fatalf("SandboxMessages: %v", err)
	}
	if len(msgs) != sent || undone+sent != rounds {
		t.Errorf("%d undone, %d sent, %d messages at the provider; want one message per refused undo", undone, sent, len(msgs))
	}
	t.Logf("%d rounds: %d undone, %d sent", rounds, undone, sent)
	counts, err := g.st.DraftCountsFor(store.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.DraftPending] != undone || counts[store.DraftApproved] != sent {
		t.Errorf("draft counts %v, want %d pending and %d approved", counts, undone, sent)
	}
	if err := g.st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestUndoRefusals: an undo is refused, in one sentence, once the send may
// have begun or when there is nothing to undo; the refusal writes nothing.
func TestUndoRefusals(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(t *testing.T, g *undoRig, res review.Approved)
		at    time.Duration // when the undo is asked, after the approval
		want  string
	}{
		{
			name: "the window has ended", at: undoWindow,
			want: "the undo window ended at 09:00:10 UTC and the reply is being sent; it can no longer be undone",
		},
		{
			name: "the job was claimed", at: time.Second,
			setup: func(t *testing.T, g *undoRig, res review.Approved) {
				if got, err := g.st.Claim(ctx, undoT0.Add(undoWindow), deliverOnly, time.Minute); err != nil || len(got) != 1 {
					t.Fatalf("Claim = %d, %v", len(got), err)
				}
			},
			want: "the reply is already being sent; it can no longer be undone",
		},
		{
			name: "undone already", at: time.Second,
			setup: func(t *testing.T, g *undoRig, res review.Approved) {
				if _, err := g.rv.Undo(ctx, res.Draft.ID, store.Decision{By: "ann", At: undoT0.Add(time.Second)}); err != nil {
					t.Fatalf("first Undo: %v", err)
				}
			},
			want: "is pending_approval, not approved; there is no approval to undo",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newUndoRig(t)
			res := g.approved(t, "web:refusal")
			if tt.setup != nil {
				tt.setup(t, g, res)
			}
			before, err := g.st.DraftCountsFor(store.Everything())
			if err != nil {
				t.Fatal(err)
			}
			_, err = g.rv.Undo(ctx, res.Draft.ID, store.Decision{By: "bob", At: undoT0.Add(tt.at)})
			var refused *delivery.UndoError
			if !errors.As(err, &refused) || !strings.Contains(refused.Error(), tt.want) {
				t.Fatalf("Undo = %v, want an *UndoError saying %q", err, tt.want)
			}
			after, err := g.st.DraftCountsFor(store.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Errorf("the refused undo moved the draft counts from %v to %v", before, after)
			}
			log, err := g.st.AuditLog(50)
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
