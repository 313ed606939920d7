package review_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// windowConfig has a channel on each kind of window: wa (whatsapp, 24
// hours, with a template), wa-auto approving its own drafts, fb (meta with
// human_agent: 7 days), ig (meta without: 24 hours) and web (the sandbox:
// none). Approvals are held for 10 seconds.
func windowConfig() *config.Config {
	wa := config.Provider{Name: "wa", Kind: "whatsapp"}
	wa.PhoneNumberID, wa.Token = "1234", "t"
	wa.Templates = []kinds.Template{{Name: "follow_up", Language: "en_US", Parameters: []string{kinds.NameParameter}}}
	fb := config.Provider{Name: "fb", Kind: "meta"}
	fb.Token, fb.HumanAgent = "t", true
	ig := config.Provider{Name: "ig", Kind: "meta"}
	ig.Token = "t"
	return &config.Config{
		Providers: []config.Provider{wa, fb, ig},
		Channels: []config.Channel{
			{Name: "wa", Provider: "wa"},
			{Name: "wa-auto", Provider: "wa", AutoApprove: true},
			{Name: "fb", Provider: "fb"},
			{Name: "ig", Provider: "ig"},
			{Name: "web", Provider: "sandbox"},
		},
		UndoWindow: 10 * time.Second,
		Retry:      config.Retry{MaxAttempts: 3},
	}
}

// TestApproveRefusesAfterTheWindow: an approval is refused once the
// channel's window, counted from the customer's message, closes before the
// reply's hold ends, in one sentence naming the way out; inside it (and on
// a channel without one) the reply is approved.
func TestApproveRefusesAfterTheWindow(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, windowConfig())
	ctx := context.Background()
	day := 24 * time.Hour
	for i, tc := range []struct {
		channel string
		after   time.Duration // from the message to the approval
		refused bool
		way     string // what the sentence names
	}{
		{"wa", day - time.Minute, false, ""},
		{"wa", day - 5*time.Second, true, "send one of the channel's approved templates"}, // the 10s hold ends after it
		{"wa", day, true, "send one of the channel's approved templates"},
		{"wa", 3 * day, true, "send one of the channel's approved templates"},
		{"ig", day + time.Minute, true, "reply on another channel of the lead (provider ig has no templates configured)"},
		{"fb", 6 * day, false, ""}, // human_agent: 7 days
		{"fb", 7 * day, true, "reply on another channel"},
		{"web", 30 * day, false, ""},
	} {
		t.Run(fmt.Sprint(i, tc.channel, tc.after), func(t *testing.T) {
			rec := record(t, st, tc.channel, fmt.Sprintf("%s:w-%d", tc.channel, i), t0)
			d := saved(t, rv, rec.Event, "Sorry for the wait.")
			a, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(tc.after)})
			if !tc.refused {
				if err != nil || !a.Created {
					t.Fatalf("Approve %s after the message = %+v, %v; want it approved", tc.after, a, err)
				}
				return
			}
			var closed *review.WindowClosedError
			if !errors.As(err, &closed) {
				t.Fatalf("Approve %s after the message = %v; want a WindowClosedError", tc.after, err)
			}
			msg := closed.Error()
			if !strings.Contains(msg, tc.way) || strings.Contains(msg, ". ") || !closed.Last.Equal(t0) {
				t.Errorf("the refusal says %q (last %s): want one sentence naming %q, from the message at %s", msg, closed.Last, tc.way, t0)
			}
			got, err := st.Draft(d.ID)
			if err != nil || got.Status != store.DraftPending || got.OutboxID != "" {
				t.Errorf("after the refusal the draft is %s (outbox %q), %v; want it pending with no outbox row", got.Status, got.OutboxID, err)
			}
			if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != 0 {
				t.Errorf("%d delivery jobs after a refused approval, want 0", n)
			}
		})
	}
}

// TestWindowClosesWhileTheDraftWaits: a lead's window is counted from its
// latest message; it runs down while the draft waits (the clock is the
// caller's), the approval is refused once it closed, and the customer's
// next message opens it again for the draft of the new turn.
func TestWindowClosesWhileTheDraftWaits(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, windowConfig())
	ctx := context.Background()
	rec := record(t, st, "wa", "wa:wait-1", t0)
	job := claim(t, st, t0)
	first := draftFor(rec.Event, "Here is the price list.")
	first.ExecutionID = job.ExecutionID
	d, err := rv.Record(ctx, job, &first, 1, t0, nil) // the draft job's write: its job completes
	if err != nil || d.Status != store.DraftPending {
		t.Fatalf("Record = %s, %v; want a waiting draft", d.Status, err)
	}
	lead := store.LeadKey("wa", rec.Event.ConversationID)
	left := func(now time.Time) (time.Duration, bool) {
		t.Helper()
		h, err := st.Handoff(lead)
		if err != nil {
			t.Fatal(err)
		}
		var (
			l   time.Duration
			has bool
		)
		if err := st.View(func(tx *store.Tx) (err error) { l, has, err = rv.WindowLeftTx(tx, h, now); return err }); err != nil {
			t.Fatal(err)
		}
		return l, has
	}
	for _, tc := range []struct {
		at   time.Duration
		want time.Duration
	}{{0, 24 * time.Hour}, {time.Hour, 23 * time.Hour}, {23*time.Hour + 58*time.Minute, 2 * time.Minute}, {24 * time.Hour, 0}, {30 * time.Hour, 0}} {
		if got, has := left(t0.Add(tc.at)); !has || got != tc.want {
			t.Errorf("%s after the message: %s left (has %v), want %s", tc.at, got, has, tc.want)
		}
	}
	var closed *review.WindowClosedError
	if _, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(25 * time.Hour)}); !errors.As(err, &closed) {
		t.Fatalf("Approve after the window = %v, want a WindowClosedError", err)
	}
	// The customer writes again: the new turn's window opens at that message.
	ev := rec.Event
	ev.ID, ev.Key, ev.MessageID, ev.ReceivedAt = ulid.Make().String(), "wa:wait-2", "wait-2", t0.Add(26*time.Hour)
	next, err := leads.RecordEvent(ctx, st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3})
	if err != nil || !next.Created {
		t.Fatalf("RecordEvent(%s) = %v", ev.Key, err)
	}
	if got, _ := left(t0.Add(27 * time.Hour)); got != 23*time.Hour {
		t.Errorf("an hour after the customer's new message: %s left, want 23h", got)
	}
	d2 := saved(t, rv, next.Event, "Here it is.")
	if a, err := rv.Approve(ctx, d2.ID, store.Decision{By: "ann", At: t0.Add(27 * time.Hour)}); err != nil || !a.Created {
		t.Fatalf("Approve of the new turn's draft = %+v, %v; want it approved", a, err)
	}
	web := record(t, st, "web", "web:wait-1", t0)
	h, _ := st.Handoff(store.LeadKey("web", web.Event.ConversationID))
	_ = st.View(func(tx *store.Tx) error {
		if l, has, err := rv.WindowLeftTx(tx, h, t0); has || l != 0 || err != nil {
			t.Errorf("the sandbox channel's window: %s, has %v, %v; want none", l, has, err)
		}
		return nil
	})
}

// TestAutoApproveLeavesAClosedWindow: a channel that approves its own
// drafts leaves one whose window closed pending, for a person to send a
// template; inside the window it approves it.
func TestAutoApproveLeavesAClosedWindow(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, windowConfig())
	ctx := context.Background()
	for i, tc := range []struct {
		after time.Duration
		want  store.DraftStatus
	}{{25 * time.Hour, store.DraftPending}, {time.Minute, store.DraftApproved}} {
		rec := record(t, st, "wa-auto", fmt.Sprintf("wa-auto:%d", i), t0)
		job := claim(t, st, t0.Add(tc.after))
		d := draftFor(rec.Event, "Thanks!")
		d.ExecutionID = job.ExecutionID
		got, err := rv.Record(ctx, job, &d, 1, t0.Add(tc.after), nil)
		if err != nil || got.Status != tc.want {
			t.Errorf("Record %s after the message = %s, %v; want %s", tc.after, got.Status, err, tc.want)
		}
	}
}

// TestApproveRefusesAnUnknownWindow: when the lead's latest message cannot
// be read, its window cannot be judged and counts as closed: on a window
// channel the approval is refused in one sentence saying so and naming
// the way out, the draft stays pending with no outbox row and no delivery
// job; a channel without a window approves as before.
func TestApproveRefusesAnUnknownWindow(t *testing.T) {
	st := openStore(t)
	rv := review.New(st, windowConfig())
	ctx := context.Background()
	forget := func(lead string) {
		t.Helper()
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			old, err := tx.Handoff(lead)
			if err != nil {
				return err
			}
			h := old
			h.LastEventKey = lead + ":gone" // the latest message is no longer readable
			return tx.PutHandoff(&old, &h)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range []struct {
		channel string
		way     string
	}{
		{"wa", "send one of the channel's approved templates (follow_up)"},
		{"ig", "reply on another channel of the lead (provider ig has no templates configured)"},
		{"web", ""},
	} {
		t.Run(tc.channel, func(t *testing.T) {
			rec := record(t, st, tc.channel, fmt.Sprintf("%s:u-%d", tc.channel, i), t0)
			d := saved(t, rv, rec.Event, "Sorry for the wait.")
			lead := store.LeadKey(d.Channel, d.ConversationID)
			forget(lead)
			a, err := rv.Approve(ctx, d.ID, store.Decision{By: "ann", At: t0.Add(time.Minute)})
			if tc.way == "" {
				if err != nil || !a.Created {
					t.Fatalf("Approve on a channel without a window = %+v, %v; want it approved", a, err)
				}
				return
			}
			var closed *review.WindowClosedError
			if !errors.As(err, &closed) || !closed.Unknown {
				t.Fatalf("Approve with the latest message unreadable = %v; want a WindowClosedError that is Unknown", err)
			}
			msg := closed.Error()
			if !strings.Contains(msg, "cannot be judged") || !strings.Contains(msg, "counts as closed") || !strings.Contains(msg, tc.way) ||
				!strings.Contains(msg, lead+":gone") || strings.Contains(msg, ". ") {
				t.Errorf("the refusal says %q; want one sentence that the window cannot be judged (naming the message %s), counts as closed, and names %q", msg, lead+":gone", tc.way)
			}
			got, err := st.Draft(d.ID)
			if err != nil || got.Status != store.DraftPending || got.OutboxID != "" {
				t.Errorf("after the refusal the draft is %s (outbox %q), %v; want it pending with no outbox row", got.Status, got.OutboxID, err)
			}
			if n := len(jobsOfKind(t, st, rec.Event.CorrelationID, store.KindDeliver)); n != 0 {
				t.Errorf("%d delivery jobs after a refused approval, want 0", n)
			}
		})
	}
}
