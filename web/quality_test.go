package web

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestQualityReachesTheOverviewAndTheAPI: an edit on the dashboard with a
// one-tap reason, an API edit with a reason, a one-tap rejection and an
// approval as written are stored with their distance and reason, and the
// overview (/) and GET /api/v1/stats/quality show them per prompt version,
// client and channel, from the figures the writes keep. An unknown reason
// code is refused in one sentence, on the dashboard and the API.
func TestQualityReachesTheOverviewAndTheAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	texts := corpus.Texts()
	d1 := pending(t, e, "demo", "qa1", texts[0].Body)
	d2 := pending(t, e, "demo", "qa2", texts[2].Body)
	d3 := pending(t, e, "demo", "qa3", texts[3].Body)
	d4 := pending(t, e, "demo", "qa4", texts[1].Body)
	if d1.Guards != nil {
		t.Fatalf("the template draft %s was guarded; the operator's own text is not (workers.DraftJob.guard)", d1.ID)
	}
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	card := b.get("/drafts").body
	for _, want := range []string{`id="edit-reason-wrong_facts"`, `name="reason_code" value="tone"`, `id="reject-not_needed"`, `name="edit_reason"`} {
		if !strings.Contains(card, want) {
			t.Errorf("the card lacks %s", want)
		}
	}

	edited := d1.Text + " Fish & chips <b>today</b> 😀"
	if p := b.hx("/drafts/"+d1.ID+"/approve", url.Values{"action": {"edit"}, "text": {edited}, "reason_code": {"wrong_facts"}, "edit_reason": {"we have no chips"}}); p.code != http.StatusOK {
		t.Fatalf("edit with a reason: %d %.300s", p.code, p.body)
	}
	if p := b.hx("/drafts/"+d2.ID+"/reject", url.Values{"reason_code": {"nope"}}); p.code != http.StatusBadRequest ||
		!strings.Contains(p.body, html.EscapeString(`the reason code "nope" is not one of wrong_facts, tone, language, too_long, not_needed, other`)) {
		t.Errorf("an unknown reason on the dashboard: %d %.300s", p.code, p.body)
	}
	if p := b.hx("/drafts/"+d2.ID+"/reject", url.Values{"reason_code": {"not_needed"}}); p.code != http.StatusOK {
		t.Fatalf("one-tap reject: %d %.300s", p.code, p.body)
	}
	if code, ans := apiPost(t, e, "/api/v1/drafts/"+d3.ID+"/approve", `{"text":"Shorter.","reason_code":"bogus"}`); code != http.StatusBadRequest ||
		ans["error"] != `the reason code "bogus" is not one of wrong_facts, tone, language, too_long, not_needed, other` {
		t.Errorf("an unknown reason on the API: %d %v", code, ans)
	}
	code, ans := apiPost(t, e, "/api/v1/drafts/"+d3.ID+"/approve", `{"text":"Shorter.","reason_code":"too_long","reason":"שלום, too long"}`)
	dec, _ := ans["decision"].(map[string]any)
	if code != http.StatusOK || dec["reason_code"] != "too_long" || dec["distance"] == nil {
		t.Fatalf("API edit with a reason: %d %v", code, ans)
	}
	if code, ans := apiPost(t, e, "/api/v1/drafts/"+d4.ID+"/approve", ""); code != http.StatusOK {
		t.Fatalf("approve as written: %d %v", code, ans)
	}

	got, err := e.st.DraftByEvent(d1.EventKey)
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Decision; d == nil || d.Distance == nil || *d.Distance <= 0 || *d.Distance >= 1 || d.ReasonCode != "wrong_facts" || d.Reason != "we have no chips" {
		t.Fatalf("the edited draft's decision = %+v, want a distance in (0, 1) and the reason", got.Decision)
	}
	ans = apiGet(t, e, "/api/v1/stats/quality")
	rows, _ := ans["rows"].([]any)
	if len(rows) != 1 {
		t.Fatalf("quality rows = %v, want one (prompt, client, channel)", ans)
	}
	row := rows[0].(map[string]any)
	reasons, _ := row["reasons"].(map[string]any)
	// template drafts are not guarded, so none of the four counts as guarded
	if row["channel"] != "demo" || row["guarded"] != 0.0 || row["measured"] != 3.0 || reasons["wrong_facts"] != 1.0 || reasons["not_needed"] != 1.0 || reasons["too_long"] != 1.0 {
		t.Errorf("quality row = %v", row)
	}
	var sum float64
	for _, d := range []store.Draft{d1, d3, d4} {
		g, err := e.st.DraftByEvent(d.EventKey)
		if err != nil || g.Decision == nil || g.Decision.Distance == nil {
			t.Fatalf("draft %s: %v %+v", d.ID, err, g.Decision)
		}
		sum += *g.Decision.Distance
	}
	if m, _ := row["mean_distance"].(float64); m < sum/3-1e-6 || m > sum/3+1e-6 {
		t.Errorf("mean distance = %v, want %v", row["mean_distance"], sum/3)
	}
	if code, ans := e.do(t, http.MethodGet, "/api/v1/stats/quality?days=0", "", nil, tokenHeader()); code != http.StatusBadRequest || ans["error"] != `days "0" is not a whole number from 1 to 90` {
		t.Errorf("days=0: %d %v", code, ans)
	}

	ov := b.get("/").body
	for _, want := range []string{`id="quality"`, "Draft quality, last 7 days", "<td>demo</td>", "Wrong facts 1", "Not needed 1", "Too long 1"} {
		if !strings.Contains(ov, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
}
