package approvals

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/testkit/standin"
)

// TestEraseDeletesCards: erasing a lead takes its cards out of the chats —
// Slack's chat.delete, Telegram's deleteMessage (the card quotes the
// customer) — then out of the store, with the draft's reminders; the
// file passes Check.
func TestEraseDeletesCards(t *testing.T) {
	for _, surface := range []string{ViaSlack, ViaTelegram} {
		t.Run(surface, func(t *testing.T) {
			ctx := context.Background()
			var (
				f      *fixture
				api    *standin.SurfaceAPI
				chat   string
				delete string
			)
			if surface == ViaSlack {
				f, api = slackFixture(t, readSlackVectors(t))
				api.Now = f.clock.Now
				chat, delete = "C0ACME", "chat.delete"
			} else {
				f, api, _ = telegramFixture(t)
				chat, delete = "-1001234567890", "deleteMessage"
			}
			f.cfg.Approvals.Reminders = config.Reminders{RemindAfter: 30 * time.Minute}
			d := f.pendingText(t, "web", "m1", corpus.TextNamed("arabic").Body, corpus.TextNamed("fish").Body)
			kept := f.pendingText(t, "shop", "m2", corpus.TextNamed("emoji").Body, corpus.TextNamed("hebrew").Body)
			f.sweep(t)
			f.runAll(t)
			f.clock.Advance(31 * time.Minute)
			f.sweep(t)
			f.runAll(t)
			if _, err := f.a.Decide(ctx, Ask{Via: surface, Draft: d.ID, Action: Reject, Reason: "not now", Person: mustUser(t, f, "dana"), From: surface + " 42"}); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(time.Hour) // the rejection's undo window is over
			f.sweep(t)
			f.runAll(t)
			card := f.card(t, surface, d.ID)
			if !card.Final || card.Ref == "" {
				t.Fatalf("card before the erase = %+v, want it posted and final", card)
			}
			// The draft jobs are done (the fixture saved the drafts itself):
			// a lead whose draft is being written is busy, not erased.
			jobs, err := f.st.Claim(ctx, f.clock.Now(), store.ClaimLimits{Kinds: map[string]int{store.KindDraft: 10}}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				if _, err := f.st.FinishJob(ctx, j.ID, j.ExecutionID, f.clock.Now(), store.Result{Outcome: store.OutcomeCompleted}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := f.st.Erase(ctx, store.Subject{Client: "acme", Channels: []string{"web"}}, store.AuditEntry{At: f.clock.Now(), Who: "root", Action: "erase", Target: "client acme"})
			if err != nil || res.Leads != 1 {
				t.Fatalf("Erase = %+v, %v", res, err)
			}
			if err := f.st.View(func(tx *store.Tx) error {
				c, err := tx.Card(surface, d.ID)
				if err != nil || !c.Erased || c.Final {
					t.Errorf("card after the erase = %+v, %v; want it erased and open", c, err)
				}
				if rs, err := tx.RemindersOf(d.ID); err != nil || len(rs) != 0 {
					t.Errorf("reminders after the erase = %+v, %v; want none", rs, err)
				}
				if rs, err := tx.RemindersOf(kept.ID); err != nil || len(rs) != 1 {
					t.Errorf("the other lead's reminders = %+v, %v; want its one", rs, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			f.sweep(t)
			if runs := f.runAll(t); len(runs) != 1 || runs[0].err != nil {
				t.Fatalf("the erase's follow = %+v", runs)
			}
			dels := api.Calls(delete)
			if len(dels) != 1 || jsonOf(dels[0].Body[map[string]string{ViaSlack: "ts", ViaTelegram: "message_id"}[surface]]) != jsonOf(map[string]any{ViaSlack: card.Ref, ViaTelegram: mustInt(card.Ref)}[surface]) {
				t.Fatalf("%s calls = %+v, want one of %s in %s", delete, dels, card.Ref, chat)
			}
			if err := f.st.View(func(tx *store.Tx) error {
				if _, err := tx.Card(surface, d.ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the erased card is still stored: %v", err)
				}
				if _, err := tx.Card(surface, kept.ID); err != nil {
					t.Errorf("the other lead's card: %v", err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if surface == ViaSlack {
				for _, m := range api.Messages(chat) {
					if m == card.Ref+" "+slackCardEvent {
						t.Errorf("the erased card is still in the channel: %v", api.Messages(chat))
					}
				}
			}
			f.sweep(t)
			if runs := f.runAll(t); len(runs) != 0 {
				t.Fatalf("jobs after the card went = %+v", runs)
			}
		})
	}
}

func mustInt(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
