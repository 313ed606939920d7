package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/testkit/standin"
)

// runConcurrently claims and runs due surface jobs with a, as one runner
// of several would, until none is due; errors are the test's.
func runConcurrently(t *testing.T, st *store.Store, a *Approvals, now time.Time) {
	ctx := context.Background()
	for range 50 {
		got, err := st.Claim(ctx, now, store.ClaimLimits{Kinds: map[string]int{KindAnnounce: 2, KindFollow: 2, KindRemind: 2}}, time.Minute)
		if err != nil {
			t.Error(err)
			return
		}
		if len(got) == 0 {
			return
		}
		for _, j := range got {
			r := store.Result{Outcome: store.OutcomeCompleted}
			if err := a.Run(ctx, j); err != nil {
				t.Errorf("job %s %s: %v", j.Kind, j.Key, err)
				r = store.Result{Outcome: store.OutcomeDiscarded, Err: err.Error()}
			}
			if _, err := st.FinishJob(ctx, j.ID, j.ExecutionID, now, r); err != nil {
				t.Error(err)
			}
		}
	}
}

// reminderPosts are the chat.postMessage calls of reminders, by draft and stage.
func reminderPosts(api *standin.SurfaceAPI) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, c := range api.Calls("chat.postMessage") {
		m, _ := c.Body["metadata"].(map[string]any)
		p, _ := m["event_payload"].(map[string]any)
		if m["event_type"] == slackReminderEvent {
			k := p["draft"].(string) + " " + p["stage"].(string)
			out[k] = append(out[k], c.Body)
		}
	}
	return out
}

// TestSlackRemindersConcurrentSweeps: two processes' sweeps and runners
// on one store, at once, post each draft's reminder once — in the card's
// thread, also sent to the channel — and its escalation once, in the
// escalation channel with no button. Run with -race.
func TestSlackRemindersConcurrentSweeps(t *testing.T) {
	sv := readSlackVectors(t)
	f, api := slackFixture(t, sv)
	api.Now = f.clock.Now
	f.cfg.Approvals.Reminders = config.Reminders{RemindAfter: 30 * time.Minute, EscalateAfter: 2 * time.Hour}
	f.cfg.Approvals.Slack.EscalateTo = map[string]string{"acme": "C0LEADS"}
	f.cfg.BaseURL = "https://handoff.example"
	u, _ := url.Parse(api.URL)
	second, err := New(f.st, f.cfg, Options{Now: f.clock.Now, HTTP: &http.Client{Transport: toStandin{u}, Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	texts := corpus.Texts()
	var drafts []store.Draft
	for i, txt := range texts[:4] {
		drafts = append(drafts, f.pendingText(t, "web", "m"+string(rune('a'+i)), txt.Body, texts[len(texts)-1-i].Body))
	}
	f.sweep(t)
	f.runAll(t)
	refs := map[string]string{}
	for _, d := range drafts {
		refs[d.ID] = f.card(t, ViaSlack, d.ID).Ref
	}
	round := func(stage string) {
		var wg sync.WaitGroup
		for i := range 6 {
			a := f.a
			if i%2 == 1 {
				a = second
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					if err := a.Sweep(context.Background()); err != nil {
						t.Error(err)
					}
					runConcurrently(t, f.st, a, f.clock.Now())
				}
			}()
		}
		wg.Wait()
	}
	f.clock.Advance(31 * time.Minute)
	round(StageRemind)
	f.clock.Advance(90 * time.Minute)
	round(StageEscalate)
	posts := reminderPosts(api)
	for _, d := range drafts {
		rem, esc := posts[d.ID+" "+StageRemind], posts[d.ID+" "+StageEscalate]
		if len(rem) != 1 || len(esc) != 1 {
			t.Errorf("draft %s: %d reminders, %d escalations; want one each", d.ID, len(rem), len(esc))
			continue
		}
		if rem[0]["channel"] != "C0ACME" || rem[0]["thread_ts"] != refs[d.ID] || rem[0]["reply_broadcast"] != true {
			t.Errorf("reminder = channel %v thread %v broadcast %v; want in the card's thread %s", rem[0]["channel"], rem[0]["thread_ts"], rem[0]["reply_broadcast"], refs[d.ID])
		}
		if esc[0]["channel"] != "C0LEADS" || esc[0]["thread_ts"] != nil || !strings.Contains(esc[0]["text"].(string), "Escalated: a reply to Zoë 🌸 on web (Acme) has waited 2h1m") {
			t.Errorf("escalation = %v", esc[0])
		}
		for _, b := range append(rem, esc...) {
			checkSlackMessage(t, b)
			for _, bl := range b["blocks"].([]any) {
				if bl.(map[string]any)["type"] == "actions" {
					t.Errorf("a notice carries buttons: %v", bl)
				}
			}
			if !strings.Contains(jsonOf(b["blocks"]), "https://handoff.example/drafts?id="+d.ID) {
				t.Errorf("a notice without the draft's link: %s", jsonOf(b["blocks"]))
			}
		}
	}
	if n := len(api.Calls("chat.postMessage")); n != 3*len(drafts) {
		t.Errorf("chat.postMessage calls = %d, want %d (a card, a reminder and an escalation each)", n, 3*len(drafts))
	}
}

// TestSlackReminderRetryLooksFirst: a reminder whose answer was lost is
// found by its metadata on the retry and not posted again.
func TestSlackReminderRetryLooksFirst(t *testing.T) {
	sv := readSlackVectors(t)
	f, api := slackFixture(t, sv)
	api.Now = f.clock.Now
	f.cfg.Approvals.Reminders = config.Reminders{RemindAfter: 30 * time.Minute}
	d := f.pendingText(t, "web", "m1", corpus.TextNamed("arabic").Body, corpus.TextNamed("long").Body)
	f.sweep(t)
	f.runAll(t)
	f.clock.Advance(31 * time.Minute)
	api.Set(func(api *standin.SurfaceAPI) { api.Lose["chat.postMessage"] = 1 })
	f.sweep(t)
	if runs := f.runAll(t); len(runs) != 1 || runs[0].err == nil {
		t.Fatalf("first attempt = %+v, want its answer lost", runs)
	}
	f.clock.Advance(2 * time.Hour)
	if runs := f.runAll(t); len(runs) != 1 || runs[0].err != nil {
		t.Fatalf("retry = %+v", runs)
	}
	if got := reminderPosts(api)[d.ID+" "+StageRemind]; len(got) != 1 {
		t.Fatalf("reminder posts = %d, want 1", len(got))
	}
	if n := len(api.Calls("conversations.history")); n != 1 {
		t.Fatalf("lookups = %d, want 1", n)
	}
}

// TestTelegramLostAnswerIsUncertain: Telegram has no lookup, so a card
// whose sendMessage answer was lost is not sent again: it is marked
// uncertain, the job discarded with the sentence (a dead letter a person
// sees); a reminder replies to a card that was recorded.
func TestTelegramLostAnswerIsUncertain(t *testing.T) {
	f, api, _ := telegramFixture(t)
	f.cfg.Approvals.Reminders = config.Reminders{RemindAfter: 30 * time.Minute}
	lost := f.pendingText(t, "web", "m1", corpus.TextNamed("hebrew").Body, corpus.TextNamed("emoji").Body)
	api.Set(func(api *standin.SurfaceAPI) { api.Lose["sendMessage"] = 1 })
	f.sweep(t)
	if runs := f.runAll(t); len(runs) != 1 || runs[0].err == nil {
		t.Fatalf("first attempt = %+v, want its answer lost", runs)
	}
	f.clock.Advance(2 * time.Hour)
	runs := f.runAll(t)
	var discard *jobs.Discard
	if len(runs) != 1 || !errors.As(runs[0].err, &discard) || !strings.Contains(runs[0].err.Error(), "Telegram has no way to look a message up") {
		t.Fatalf("retry = %+v, want it discarded with the sentence", runs)
	}
	c := f.card(t, ViaTelegram, lost.ID)
	if c.Uncertain == "" || !c.Final || c.Ref != "" {
		t.Fatalf("card = %+v, want it uncertain", c)
	}
	if n := len(api.Calls("sendMessage")); n != 1 {
		t.Fatalf("sendMessage calls = %d, want the one whose answer was lost", n)
	}
	// A card recorded: its reminder is a reply to it.
	ok := f.pendingText(t, "web", "m2", corpus.TextNamed("combining").Body, corpus.TextNamed("newlines").Body)
	f.sweep(t)
	f.runAll(t)
	card := f.card(t, ViaTelegram, ok.ID)
	f.clock.Advance(31 * time.Minute)
	f.sweep(t)
	f.runAll(t)
	var replies []map[string]any
	for _, c := range api.Calls("sendMessage") {
		if rp, ok := c.Body["reply_parameters"].(map[string]any); ok {
			replies = append(replies, rp)
		}
	}
	// The uncertain card's draft is reminded of too (it waits), as a message of its own.
	if len(replies) != 1 || jsonOf(replies[0]["message_id"]) != card.Ref {
		t.Fatalf("reminders replying to a card = %v, want one to message %s", replies, card.Ref)
	}
}

func jsonOf(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}
