package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestAPIDecisionsEndClaims: a decision made through the API ends the soft
// claim of whoever had the draft open on the dashboard, as a decision on
// the queue does: ann opens a draft, the API approves it and undoes the
// approval (so it waits again), and bob opening it is not told that ann is
// looking at it. The same for a rejection, a close and a reply of the
// lead's actions.
func TestAPIDecisionsEndClaims(t *testing.T) {
	t.Parallel()
	e := holdingEnv(t, nil)
	texts := corpus.Texts()
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	bob := loggedIn(t, e, "bob", store.RoleApprover, "")
	looking := html.EscapeString("ann is looking at this draft too")
	decide := []struct {
		name string
		do   func(d store.Draft) // decides d through the API and brings it back waiting
	}{
		{"approve", func(d store.Draft) {
			apiOK(t, e, "/api/v1/drafts/"+d.ID+"/approve", "")
			apiOK(t, e, "/api/v1/drafts/"+d.ID+"/undo", "")
		}},
		{"reject", func(d store.Draft) {
			apiOK(t, e, "/api/v1/drafts/"+d.ID+"/reject", `{"reason":"off"}`)
			apiOK(t, e, "/api/v1/drafts/"+d.ID+"/undo", "")
		}},
		{"close", func(d store.Draft) {
			apiOK(t, e, "/api/v1/events/"+url.PathEscape(d.EventKey)+"/close", `{"reason":"spam"}`)
			apiOK(t, e, "/api/v1/handoffs/"+url.PathEscape(store.LeadKey(d.Channel, d.ConversationID))+"/reopen", "")
		}},
	}
	for i, tc := range decide {
		d := pending(t, e, "demo", fmt.Sprintf("ac%d", i), texts[i%len(texts)].Body)
		ann.getOK("/drafts?id=" + d.ID) // ann holds it
		if p := bob.getOK("/drafts?id=" + d.ID); !strings.Contains(p.body, looking) {
			t.Fatalf("%s: bob is not told that ann has %s open", tc.name, d.ID)
		}
		tc.do(d)
		if got, err := e.st.Draft(d.ID); err != nil || got.Status != store.DraftPending {
			t.Fatalf("%s: draft %s = %s, %v; want it waiting again", tc.name, d.ID, got.Status, err)
		}
		if p := bob.getOK("/drafts?id=" + d.ID); strings.Contains(p.body, looking) {
			t.Errorf("%s through the API: ann's claim on %s outlived the decision", tc.name, d.ID)
		}
	}

	// A reply of the person's own through the API ends the claim too.
	d := pending(t, e, "demo", "acr", texts[4].Body)
	ann.getOK("/drafts?id=" + d.ID)
	apiOK(t, e, "/api/v1/events/"+url.PathEscape(d.EventKey)+"/reply", `{"text":"Yes — tomorrow 👍🏽"}`)
	e.srv.claims.mu.Lock()
	_, held := e.srv.claims.m[d.ID]
	e.srv.claims.mu.Unlock()
	if held {
		t.Errorf("the claim on %s outlived the reply that replaced it", d.ID)
	}
}

// TestAPILeadActionsSayWhatTheyDid: each lead action of the API answers
// with a message in words, naming the customer, as the dashboard says it,
// with the undo named by its API route; an undone close is counted by
// handoff_lead_closes_undone_total.
func TestAPILeadActionsSayWhatTheyDid(t *testing.T) {
	t.Parallel()
	e := holdingEnv(t, nil)
	texts := corpus.Texts()
	da := pending(t, e, "demo", "ma", texts[0].Body) // fish & chips, <b>, quotes
	db := pending(t, e, "demo", "mb", texts[2].Body) // Arabic
	dc := pending(t, e, "demo", "mc", texts[1].Body) // emoji

	ans := apiOK(t, e, "/api/v1/events/"+url.PathEscape(da.EventKey)+"/reply", `{"text":"Yes, we do — see you at 6 <3"}`)
	mine, _ := ans["draft"].(map[string]any)
	msg := fmt.Sprint(ans["message"])
	if ans["status"] != "approved" || !strings.HasPrefix(msg, "Your reply to Person ma goes out at ") || !strings.HasSuffix(msg, "; until then POST /api/v1/drafts/"+fmt.Sprint(mine["id"])+"/undo takes it back.") {
		t.Errorf("reply's message = %q (status %v)", msg, ans["status"])
	}

	lead := store.LeadKey(db.Channel, db.ConversationID)
	ans = apiOK(t, e, "/api/v1/events/"+url.PathEscape(db.EventKey)+"/close", `{"reason":"spam"}`)
	want := "Closed Person mb without a reply. POST /api/v1/handoffs/" + url.PathEscape(lead) + "/reopen reopens it for the next 1m."
	if ans["status"] != "closed" || ans["message"] != want {
		t.Errorf("close's message = %q (status %v); want %q", ans["message"], ans["status"], want)
	}
	ans = apiOK(t, e, "/api/v1/events/"+url.PathEscape(db.EventKey)+"/close", `{"reason":"again"}`)
	if m := fmt.Sprint(ans["message"]); ans["status"] != "already_closed" || !strings.HasPrefix(m, "Person mb was closed already, by api-token at ") || !strings.HasSuffix(m, ": spam") {
		t.Errorf("second close's message = %q (status %v)", m, ans["status"])
	}
	if v, ok := gauge(t, scrape(t, e), "handoff_lead_closes_undone_total"); !ok || v != 0 {
		t.Errorf("handoff_lead_closes_undone_total before any undo = %v (%v); want 0", v, ok)
	}
	apiOK(t, e, "/api/v1/handoffs/"+url.PathEscape(lead)+"/reopen", "")
	if code, _ := e.do(t, http.MethodPost, "/api/v1/handoffs/"+url.PathEscape(lead)+"/reopen", "", nil, tokenHeader()); code != http.StatusConflict {
		t.Errorf("a second reopen = %d; want 409", code)
	}
	if v, ok := gauge(t, scrape(t, e), "handoff_lead_closes_undone_total"); !ok || v != 1 {
		t.Errorf("handoff_lead_closes_undone_total = %v (%v); want 1 (the refused second undo not counted)", v, ok)
	}
	if v, ok := gauge(t, scrape(t, e), "handoff_leads_closed_total"); !ok || v != 1 {
		t.Errorf("handoff_leads_closed_total = %v (%v); want 1", v, ok)
	}

	ans = apiOK(t, e, "/api/v1/events/"+url.PathEscape(dc.EventKey)+"/redraft", `{"instruction":"shorter, and say “thanks”"}`)
	want = "A new draft for Person mc is being written with your instruction “shorter, and say “thanks””; it takes the old draft's place in the queue when it is ready. The template drafter ignores instructions and writes the same text again, so the new draft will read like the old one."
	if ans["status"] != "drafting" || ans["message"] != want {
		t.Errorf("redraft's message = %q; want %q", ans["message"], want)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		d, err := e.st.DraftByEvent(dc.EventKey)
		return err == nil && d.Version == 2
	}, "the new draft")
}

// apiOK posts body (JSON, or nothing) to path with the API token and wants 200.
func apiOK(t *testing.T, e *testEnv, path, body string) map[string]any {
	t.Helper()
	ct, b := "", []byte(nil)
	if body != "" {
		ct, b = "application/json", []byte(body)
	}
	code, ans := e.do(t, http.MethodPost, path, ct, b, tokenHeader())
	if code != http.StatusOK {
		t.Fatalf("POST %s = %d %v; want 200", path, code, ans)
	}
	return ans
}
