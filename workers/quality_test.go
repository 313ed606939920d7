package workers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

const guardFacts = "Prices: haircut €35, colour from 1,200.00 EUR. Open Mon–Fri 9:00–17:30. Call +44 20 7946 0958."

// guardReply is the model's answer with reply as its text.
func guardReply(reply string) testkit.Reply {
	raw, _ := json.Marshal(map[string]any{"reply": reply, "intent": "sales", "name": "Ada", "email": nil, "phone": nil, "summary": "s", "confidence": 0.9})
	return testkit.JSONReply(string(raw))
}

// TestGuardsOnTheScriptedModel: on a channel with auto_approve, the
// scripted model inventing a price is flagged (the figure named) and left
// for a person, saying so; answering a German customer in English is
// flagged too, after the prompt asked for German; a reply whose figures
// are all in the facts or the customer's message (written otherwise) is
// not flagged, and auto-approved.
func TestGuardsOnTheScriptedModel(t *testing.T) {
	st := openStore(t)
	f := testkit.NewModel(t)
	f.Answer(func(c testkit.ModelCall) testkit.Reply {
		switch {
		case c.Req.Saw("[invent]"):
			return guardReply("Yes! A haircut is €45 & <b>colour</b> is 1200 EUR 😀")
		case c.Req.Saw("[german]"):
			return guardReply("Hello! Thank you for your message, we will get back to you as soon as we can with the prices.")
		default:
			return guardReply("A haircut is 35 EUR and colour 1,200 €; call 020 7946 0958 before 5:30pm, or see https://shop.example/menu/fish&chips?size=large&sauce=tartare.")
		}
	})
	cfg := oaConfig()
	cfg.Channels = []config.Channel{{Name: "web", Provider: "sandbox", AutoApprove: true}}
	if _, err := facts.Save(context.Background(), st, facts.Edit{Client: cfg.ClientOf("web"), Text: guardFacts, Author: "root", Source: facts.SourceAPI, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d, err := drafter.NewOpenAI(drafter.OpenAIConfig{BaseURL: f.URL, Model: "m", PromptVersion: "p1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	providers, err := provider.Open(nil, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatal(err)
	}
	kinds, _ := Kinds(st, cfg, d, providers)
	r := startRunner(t, st, kinds, oaOptions())

	drafted := func(tag, text string) store.Draft {
		t.Helper()
		rec := oaRecord(t, st, r, oaEvent("web:"+tag, "conv-"+tag, "+15550001234", "["+tag+"] "+text), 3)
		testkit.WaitJob(t, st, rec.Job.ID, store.JobCompleted)
		dr, err := st.DraftByEvent(rec.Event.Key)
		if err != nil {
			t.Fatal(err)
		}
		return dr
	}

	inv := drafted("invent", corpus.TextNamed("fish").Body)
	if inv.Guards == nil || !slices.Equal(inv.Guards.Figures, []store.GuardFigure{{Kind: "price", Text: "€45"}}) {
		t.Errorf("the invented price's guards = %+v, want the figure €45 alone (1200 EUR is in the facts)", inv.Guards)
	}
	if inv.Status != store.DraftPending || inv.OutboxID != "" || !inv.Guards.AutoApproveHeld {
		t.Errorf("the flagged draft is %s (outbox %q, held %v), want pending for a person", inv.Status, inv.OutboxID, inv.Guards.AutoApproveHeld)
	}
	if !slices.ContainsFunc(inv.Notes, func(n string) bool {
		return strings.Contains(n, "auto_approve left this draft for a person") && strings.Contains(n, `"€45" (price)`)
	}) {
		t.Errorf("the held draft's notes %q do not say why auto_approve left it", inv.Notes)
	}

	de := drafted("german", "Guten Tag! Ich hätte gern einen Termin für einen Haarschnitt am Freitag. Was kostet das? 👍🏽 & <b>danke</b>")
	if g := de.Guards; g == nil || !g.LanguageDiffers || g.CustomerLanguage != "deu" || g.ReplyLanguage != "eng" {
		t.Errorf("the English reply to German's guards = %+v, want the languages flagged", de.Guards)
	}
	if de.Status != store.DraftPending {
		t.Errorf("the wrong-language draft is %s, want pending", de.Status)
	}
	if !slices.ContainsFunc(f.Calls(), func(c testkit.ModelCall) bool {
		return c.Req.Saw("[german]") && c.Req.Saw("write the reply in German")
	}) {
		t.Error("the prompt of the German message did not ask for a reply in German")
	}

	ok := drafted("facts", corpus.TextNamed("slashes").Body)
	if ok.Guards == nil || ok.Guards.Flagged() {
		t.Errorf("a reply whose figures are in the facts and the message is flagged: %+v", ok.Guards)
	}
	if ok.Status != store.DraftApproved || ok.Decision == nil || ok.Decision.By != "auto-approve" {
		t.Errorf("the unflagged draft is %s, want auto-approved", ok.Status)
	}
	if ok.Decision != nil && ok.Decision.Distance != nil {
		t.Errorf("an auto-approval measured a distance %v: nobody edited it", *ok.Decision.Distance)
	}
}
