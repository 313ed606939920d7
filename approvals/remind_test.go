package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider/kinds"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// remindSurface is a fakeSurface that takes reminders: acme's drafts are
// escalated to chat "E-acme"; beta's nowhere.
type remindSurface struct {
	*fakeSurface
	mu      sync.Mutex
	notices []Notice
}

func (r *remindSurface) EscalateTo(client string) (string, bool) {
	return "E-" + client, client == "acme"
}
func (r *remindSurface) Remind(_ context.Context, n Notice) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices = append(r.notices, n)
	return nil
}
func (r *remindSurface) seenNotices() []Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Notice(nil), r.notices...)
}

// pendingText is pending with the customer's message msg (a corpus text).
func (f *fixture) pendingText(t *testing.T, channel, key, msg, text string) store.Draft {
	t.Helper()
	ev := store.Event{
		ID: ulid.Make().String(), Key: channel + ":" + key, Channel: channel, MessageID: key,
		CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
		Contact: "+351911000" + fmt.Sprint(len(key)), Name: "Zoë 🌸", Text: msg, ReceivedAt: f.clock.Now(),
	}
	rec, err := leads.RecordEvent(context.Background(), f.st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: ev.Key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = %v, %v", key, rec.Created, err)
	}
	d, created, err := review.New(f.st, f.cfg).Save(context.Background(), store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: channel, ConversationID: ev.ConversationID,
		Text: text, Drafter: "template", CreatedAt: f.clock.Now(),
	}, 1)
	if err != nil || !created {
		t.Fatalf("Save(%s) = %v, %v", key, created, err)
	}
	return d
}

// jobRun is one surface job's attempt.
type jobRun struct {
	job store.Job
	err error
}

// runAll runs every due surface job once as the runner would — a
// completion, a retry due at once, or a discard — and returns the attempts.
func (f *fixture) runAll(t *testing.T) []jobRun {
	t.Helper()
	ctx := context.Background()
	var out []jobRun
	for range 20 {
		got, err := f.st.Claim(ctx, f.clock.Now(), store.ClaimLimits{Kinds: map[string]int{KindAnnounce: 10, KindFollow: 10, KindRemind: 10}}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return out
		}
		for _, j := range got {
			err := f.a.Run(ctx, j)
			out = append(out, jobRun{job: j, err: err})
			r := store.Result{Outcome: store.OutcomeCompleted}
			var discard *jobs.Discard
			switch {
			case errors.As(err, &discard):
				r = store.Result{Outcome: store.OutcomeDiscarded, Err: err.Error()}
			case err != nil:
				r = store.Result{Outcome: store.OutcomeRetry, Err: err.Error(), RetryAt: f.clock.Now().Add(time.Hour)}
			}
			if _, err := f.st.FinishJob(ctx, j.ID, j.ExecutionID, f.clock.Now(), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("the surface jobs did not settle in 20 rounds")
	return nil
}

func (f *fixture) sweep(t *testing.T) {
	t.Helper()
	if err := f.a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRemindersOncePerStage: a waiting draft is reminded of once after
// remind_after, escalated once after escalate_after (to the escalation's
// chat, only for a client that has one), and never again however many
// sweeps follow; a draft decided meanwhile gets no notice.
func TestRemindersOncePerStage(t *testing.T) {
	rs := &remindSurface{fakeSurface: &fakeSurface{name: "fake"}}
	f := newFixture(t, rs)
	f.cfg.Approvals.Reminders = config.Reminders{RemindAfter: 30 * time.Minute, EscalateAfter: 2 * time.Hour}
	texts := corpus.Texts()
	acme := f.pendingText(t, "web", "m1", texts[0].Body, texts[1].Body)
	beta := f.pendingText(t, "shop", "m2", texts[2].Body, texts[3].Body)
	decided := f.pendingText(t, "web", "m3", texts[5].Body, texts[6].Body)
	f.sweep(t)
	f.runAll(t) // the cards
	if n := rs.seenNotices(); len(n) != 0 {
		t.Fatalf("notices before remind_after: %+v", n)
	}
	f.clock.Advance(29 * time.Minute)
	f.sweep(t)
	if runs := f.runAll(t); len(runs) != 0 {
		t.Fatalf("jobs at 29m: %+v", runs)
	}
	f.clock.Advance(2 * time.Minute)
	// Decided after the stage is enqueued, before its job runs: nothing said.
	f.sweep(t)
	if _, err := review.New(f.st, f.cfg).Reject(context.Background(), decided.ID, store.Decision{By: "root", At: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	f.runAll(t)
	for range 3 {
		f.sweep(t)
		f.runAll(t)
	}
	got := rs.seenNotices()
	if len(got) != 2 {
		t.Fatalf("notices at 31m = %d, want 2 (acme's and beta's): %+v", len(got), got)
	}
	byDraft := map[string]Notice{}
	for _, n := range got {
		byDraft[n.View.Draft.ID] = n
	}
	if n := byDraft[acme.ID]; n.Stage != StageRemind || n.Chat != "C-acme" || n.Card.Ref == "" ||
		!strings.Contains(n.Line, "Still waiting for approval after 31m: Zoë 🌸 on web (Acme)") || n.View.Text != texts[1].Body {
		t.Errorf("acme's reminder = stage %s chat %s card %q line %q", n.Stage, n.Chat, n.Card.Ref, n.Line)
	}
	if n := byDraft[beta.ID]; n.Stage != StageRemind || n.Chat != "C-beta" || len(n.View.Messages) != 1 || n.View.Messages[0] != texts[2].Body {
		t.Errorf("beta's reminder = %+v", n)
	}
	f.clock.Advance(90 * time.Minute)
	for range 3 {
		f.sweep(t)
		f.runAll(t)
	}
	got = rs.seenNotices()[2:]
	if len(got) != 1 || got[0].Stage != StageEscalate || got[0].Chat != "E-acme" || got[0].View.Draft.ID != acme.ID ||
		!strings.Contains(got[0].Line, "Escalated: a reply to Zoë 🌸 on web (Acme) has waited 2h1m for approval.") {
		t.Fatalf("notices at 2h1m = %+v, want acme's escalation alone", got)
	}
	err := f.st.View(func(tx *store.Tx) error {
		for _, c := range []struct {
			draft, stage string
			want         bool
		}{{acme.ID, StageRemind, true}, {acme.ID, StageEscalate, true}, {beta.ID, StageRemind, true}, {beta.ID, StageEscalate, false}, {decided.ID, StageRemind, true}} {
			r, err := tx.Reminder(c.draft, c.stage)
			if c.want != (err == nil) || (err == nil && (len(r.Surfaces) != 1 || r.Surfaces[0] != "fake")) {
				t.Errorf("reminder %s of %s = %+v, %v; want recorded %v", c.stage, c.draft, r, err, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWindowNotice: on a channel with a reply window (WhatsApp's 24
// hours), a waiting draft is announced once when its window closes
// within review.window_warning, saying when; not before, not once closed.
func TestWindowNotice(t *testing.T) {
	rs := &remindSurface{fakeSurface: &fakeSurface{name: "fake"}}
	f := newFixture(t, rs)
	wa := config.Provider{Name: "wa", Kind: "whatsapp"}
	wa.PhoneNumberID, wa.Token = "1234", "t"
	wa.Templates = []kinds.Template{{Name: "follow_up", Language: "en_US"}}
	f.cfg.Providers = append(f.cfg.Providers, wa)
	f.cfg.Channels = append(f.cfg.Channels, config.Channel{Name: "wa", Provider: "wa", Client: "acme"})
	f.cfg.Review.WindowWarning = 90 * time.Minute
	texts := corpus.Texts()
	d := f.pendingText(t, "wa", "m1", texts[4].Body, texts[7].Body)
	late := f.pendingText(t, "wa", "m2", texts[8].Body, texts[0].Body)
	f.sweep(t)
	f.runAll(t)
	f.clock.Advance(22*time.Hour + 29*time.Minute) // 1h31m left: not yet
	f.sweep(t)
	f.runAll(t)
	if n := rs.seenNotices(); len(n) != 0 {
		t.Fatalf("notices with 1h31m left = %+v", n)
	}
	f.clock.Advance(2 * time.Minute) // 1h29m left
	for range 3 {
		f.sweep(t)
		f.runAll(t)
	}
	got := rs.seenNotices()
	if len(got) != 2 {
		t.Fatalf("notices with 1h29m left = %+v, want one for each draft", got)
	}
	for _, n := range got {
		if n.Stage != StageWindow || n.Chat != "C-acme" || !strings.Contains(n.Line, "closes at 06:00 UTC, in 1h29m; after that only a template can answer") {
			t.Errorf("window notice = stage %s chat %s line %q", n.Stage, n.Chat, n.Line)
		}
	}
	_ = d
	_ = late
	f.clock.Advance(2 * time.Hour) // closed
	f.sweep(t)
	f.runAll(t)
	if n := rs.seenNotices(); len(n) != 2 {
		t.Fatalf("notices after the window closed = %d, want still 2", len(n))
	}
}
