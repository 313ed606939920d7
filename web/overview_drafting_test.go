package web

import (
	"context"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// TestOverviewDraftingFigures: the overview shows each prompt version's
// decisions and the drafts' cost, and a red alert once a client's budget
// for the day is spent.
func TestOverviewDraftingFigures(t *testing.T) {
	cfg := config.Default()
	cfg.Drafter.DailyBudget = 2
	e := newTestEnv(t, cfg)
	admin := loggedIn(t, e, "ann", store.RoleAdmin, "")
	const paused = "Drafting for Default is paused"
	if p := admin.getOK("/"); !strings.Contains(p.body, "No draft yet.") || strings.Contains(p.body, paused) {
		t.Fatalf("before any draft: want no figures and no alert")
	}
	d := pending(t, e, cfg.Channels[0].Name, "m1", "Hello")
	if p := admin.getOK("/"); strings.Contains(p.body, paused) || !strings.Contains(p.body, "<td>0.0000</td>") {
		t.Errorf("one free draft: alert shown %v, cost row shown %v", strings.Contains(p.body, paused), strings.Contains(p.body, "<td>0.0000</td>"))
	}
	// The draft cost 3 USD (as a priced model's would): the budget of 2 is spent.
	err := e.st.Update(context.Background(), func(tx *store.Tx) error {
		cur, err := tx.Draft(d.ID)
		if err != nil {
			return err
		}
		old := cur
		cur.Cost, cur.Currency = 3, "USD"
		return tx.PutDraft(&old, &cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	p := admin.getOK("/")
	for _, want := range []string{paused, "3.0000 USD of its daily budget of 2.0000", "3.0000 USD</td>", "Approved unchanged", ">" + d.PromptVersion + "<"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}
