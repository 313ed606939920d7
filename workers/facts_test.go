package workers

import (
	"context"
	"reflect"
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

// TestDraftUsesTheNewestFacts: each draft is written from the client's
// newest facts version, read when its job runs: after an edit (no restart,
// the same runner and drafter) the next draft's prompt has the new entries,
// the draft records the new version and the entries the scripted model
// cited, with their text; the figures guard checks against that version,
// so the colour's price, invented before the edit, is not flagged after it.
func TestDraftUsesTheNewestFacts(t *testing.T) {
	st := openStore(t)
	f := testkit.NewModel(t)
	reply := "A haircut is €35 & colour 1,200.00 EUR 😀 <b>see you</b>"
	f.Answer(testkit.CiteFacts(reply, "haircut", "colour"))
	cfg := oaConfig()
	cfg.Channels = []config.Channel{{Name: "web", Provider: "sandbox"}}
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
	client := cfg.ClientOf("web")
	save := func(text string) store.FactsVersion {
		t.Helper()
		s, err := facts.Save(context.Background(), st, facts.Edit{Client: client, Text: text, Author: "root", Source: facts.SourceDashboard, At: time.Now()})
		if err != nil || !s.New {
			t.Fatalf("save facts: %+v, %v", s, err)
		}
		return s.Version
	}
	drafted := func(tag string) store.Draft {
		t.Helper()
		rec := oaRecord(t, st, r, oaEvent("web:"+tag, "conv-"+tag, "+15550001234", corpus.TextNamed("arabic").Body), 3)
		testkit.WaitJob(t, st, rec.Job.ID, store.JobCompleted)
		d, err := st.DraftByEvent(rec.Event.Key)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	v1 := save("Prices:\r\n- Haircut €35\n- Open Mon–Fri 9:00–17:30 & Sat <10–14>")
	d1 := drafted("before")
	if d1.FactsVersion != v1.Version || !reflect.DeepEqual(d1.FactsCited, []store.FactEntry{{ID: "F2", Text: "Haircut €35"}}) {
		t.Errorf("draft before the edit: version %d cited %+v, want version %d citing F2", d1.FactsVersion, d1.FactsCited, v1.Version)
	}
	if d1.Text != reply {
		t.Errorf("draft text %q, want the reply without its marks %q", d1.Text, reply)
	}
	if d1.Guards == nil || len(d1.Guards.Figures) != 1 || d1.Guards.Figures[0].Text != "1,200.00 EUR" {
		t.Errorf("before the edit the colour's price is in no facts, guards = %+v", d1.Guards)
	}

	v2 := save(v1.Text + "\n- Colour from 1,200.00 EUR")
	d2 := drafted("after")
	want := []store.FactEntry{{ID: "F2", Text: "Haircut €35"}, {ID: "F4", Text: "Colour from 1,200.00 EUR"}}
	if d2.FactsVersion != v2.Version || v2.Version != v1.Version+1 || !reflect.DeepEqual(d2.FactsCited, want) {
		t.Errorf("draft after the edit: version %d cited %+v, want version %d citing %+v", d2.FactsVersion, d2.FactsCited, v2.Version, want)
	}
	if d2.Guards == nil || len(d2.Guards.Figures) != 0 {
		t.Errorf("after the edit every figure is in the draft's facts version, guards = %+v", d2.Guards)
	}
	calls := f.Calls()
	last := calls[len(calls)-1].Req
	if got := testkit.OfferedFacts(last); got["F4"] != "Colour from 1,200.00 EUR" || got["F2"] != "Haircut €35" {
		t.Errorf("the prompt after the edit offered %v, want F2 and the new F4", got)
	}
	if got := testkit.OfferedFacts(calls[0].Req); got["F4"] != "" {
		t.Errorf("the prompt before the edit offered F4: %v", got)
	}
	// The draft from before keeps what it was written from.
	if again, _ := st.DraftByEvent("web:before"); again.FactsVersion != v1.Version {
		t.Errorf("the first draft now says version %d", again.FactsVersion)
	}
}
