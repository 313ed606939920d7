package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/users"
)

// factsEnv is twoClients drafting with the scripted model m, acme's facts
// read from a facts_file (version 1 at start).
func factsEnv(t *testing.T, m *testkit.Model) (*testEnv, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "acme.md")
	text := "- Haircut €35\n- Open Mon–Fri 9:00–17:30"
	if err := os.WriteFile(file, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := twoClients()
	cfg.Clients[0].FactsFile, cfg.Clients[0].Facts = file, text
	cfg.Drafter = config.Drafter{Kind: "openai", BaseURL: m.URL, Model: "m", PromptVersion: "p1", Timeout: 5 * time.Second}
	return newTestEnv(t, cfg), file
}

func factsVersions(t *testing.T, e *testEnv, client string) []store.FactsVersion {
	t.Helper()
	h, err := facts.History(e.st, client)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFactsAccess: a client's facts are an admin's. An approver is
// refused (403), a person limited to a client hears 404 on their own
// client's facts and on another's, as on every admin route; read and
// approve tokens are refused on the API, an admin token is not; a form
// without the session's token, with a stale one or from another site
// saves nothing; an unknown client is a 404.
func TestFactsAccess(t *testing.T) {
	t.Parallel()
	m := testkit.NewModel(t)
	e, _ := factsEnv(t, m)
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	eve := loggedIn(t, e, "eve", store.RoleApprover, "")
	ann := limitedUser(t, e, "ann", store.RoleApprover, "acme")
	form := url.Values{"text": {"- Haircut €99"}, "base": {"1"}}
	for _, tc := range []struct {
		name string
		b    *browser
		want int
	}{{"an approver", eve, http.StatusForbidden}, {"acme's approver", ann, http.StatusNotFound}} {
		for _, client := range []string{"acme", "bolt"} {
			if got := tc.b.get("/clients/" + client + "/facts"); got.code != tc.want || strings.Contains(got.body, "Haircut") {
				t.Errorf("%s: GET %s's facts = %d %.200s, want %d without them", tc.name, client, got.code, got.body, tc.want)
			}
			if got := tc.b.post("/clients/"+client+"/facts", form); got.code != tc.want {
				t.Errorf("%s: POST %s's facts = %d, want %d", tc.name, client, got.code, tc.want)
			}
			if got := tc.b.post("/clients/"+client+"/facts/reload", nil); got.code != tc.want {
				t.Errorf("%s: reload %s's facts = %d, want %d", tc.name, client, got.code, tc.want)
			}
			h := http.Header{"Content-Type": {"application/json"}, "X-Csrf-Token": {tc.b.csrf}}
			if got := tc.b.doBody(http.MethodPut, "/api/v1/clients/"+client+"/facts", `{"text":"- Haircut €99"}`, h); got.code != tc.want && got.code != http.StatusNotFound {
				t.Errorf("%s: PUT %s's facts = %d, want refused", tc.name, client, got.code)
			}
		}
	}

	addUser(t, e.st, "boss", store.RoleAdmin, "", "boss-password-1")
	token := func(scope store.Scope, clients ...string) http.Header {
		secret := users.NewSecret()
		tok := store.Token{ID: "t-" + secret[:8], Name: string(scope) + "-" + secret[:6], User: "boss", Scope: scope, Clients: clients, CreatedAt: e.srv.now()}
		if err := e.st.CreateToken(context.Background(), users.HashSecret(secret), tok); err != nil {
			t.Fatal(err)
		}
		return http.Header{"Authorization": {"Bearer " + secret}}
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		want int
	}{
		{"a read token", token(store.ScopeRead), http.StatusForbidden},
		{"acme's approve token", token(store.ScopeApprove, "acme"), http.StatusNotFound},
		{"an admin token", token(store.ScopeAdmin), http.StatusOK},
	} {
		code, ans := e.do(t, http.MethodGet, "/api/v1/clients/acme/facts", "", nil, tc.h)
		if code != tc.want {
			t.Errorf("%s: GET acme's facts = %d %v, want %d", tc.name, code, ans, tc.want)
		}
		code, _ = e.do(t, http.MethodPut, "/api/v1/clients/acme/facts", "application/json", []byte(`{"text":"- Haircut €99"}`), tc.h)
		if tc.want != http.StatusOK && code != tc.want {
			t.Errorf("%s: PUT acme's facts = %d, want %d", tc.name, code, tc.want)
		}
	}

	// The form without the token, with one that is not the session's, and
	// from another site.
	root.getOK("/clients/acme/facts")
	for _, tc := range []struct {
		name   string
		form   url.Values
		header http.Header
	}{
		{"no token", url.Values{"text": {"- no token"}}, nil},
		{"a stale token", url.Values{"text": {"- stale"}, "csrf": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}, nil},
		{"another site", url.Values{"text": {"- cross"}, "csrf": {root.csrf}}, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}},
	} {
		if got := root.do(http.MethodPost, "/clients/acme/facts", tc.form, tc.header); got.code != http.StatusForbidden {
			t.Errorf("%s: %d %.200s, want 403", tc.name, got.code, got.body)
		}
	}
	if got := root.get("/clients/zeta/facts"); got.code != http.StatusNotFound || !strings.Contains(got.body, "there is no client") {
		t.Errorf("an unknown client: %d %.300s", got.code, got.body)
	}
	// Only the admin token's PUT made a version.
	if h := factsVersions(t, e, "acme"); len(h) != 2 || h[0].Text != "- Haircut €99" || !strings.Contains(h[0].Author, "boss") || h[0].Source != facts.SourceAPI {
		t.Errorf("acme's versions after the refusals: %+v, want the config's and the admin token's", h)
	}
	if h := factsVersions(t, e, "bolt"); len(h) != 0 {
		t.Errorf("bolt's versions: %+v, want none", h)
	}
}

// TestFactsEditLive: an admin edits acme's facts on the page; the next
// draft (no restart) is written from the new version, the scripted model
// cites its entries and the card shows them; the history lists both
// versions and the diff shows the change; facts too long are refused in a
// sentence with the text kept in the form; the facts_file read again is
// the next version; the API reads a version and saves another.
func TestFactsEditLive(t *testing.T) {
	t.Parallel()
	m := testkit.NewModel(t)
	m.Answer(testkit.CiteFacts("Yes! A haircut is €35 & colour 1,200.00 EUR 😀 <b>ok</b>", "haircut", "colour"))
	e, file := factsEnv(t, m)
	root := loggedIn(t, e, "root", store.RoleAdmin, "")

	p := root.getOK("/clients/acme/facts")
	for _, want := range []string{"Current facts: version 1", "F1", "Haircut €35", "Save as version 2", filepath.Base(file)} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the facts page lacks %q: %.400s", want, p.body)
		}
	}
	before := pending(t, e, "web-a", "f-1", corpus.TextNamed("fish").Body)
	if before.FactsVersion != 1 || len(before.FactsCited) != 1 || before.FactsCited[0].ID != "F1" {
		t.Errorf("the draft before the edit: version %d cited %+v, want version 1 citing F1", before.FactsVersion, before.FactsCited)
	}

	rtl := corpus.TextNamed("arabic").Body
	edited := "- Haircut €35\n- Colour from 1,200.00 EUR & <b>more</b>\n- " + rtl
	got := root.post("/clients/acme/facts", url.Values{"text": {edited}, "base": {"1"}})
	if got.code != http.StatusSeeOther || !strings.Contains(got.header.Get("Location"), "saved=2") {
		t.Fatalf("save: %d %s %.300s", got.code, got.header.Get("Location"), got.body)
	}
	p = root.getOK(got.header.Get("Location"))
	for _, want := range []string{"Saved as version 2", "Current facts: version 2", "Changes from version 1 to version 2", "Colour from 1,200.00 EUR &amp; &lt;b&gt;more&lt;/b&gt;", `class="diff-add"`, `class="diff-del"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page after the save lacks %q", want)
		}
	}
	if strings.Contains(p.body, "<b>more</b>") {
		t.Error("the facts' <b> was rendered as markup")
	}

	after := pending(t, e, "web-a", "f-2", rtl)
	if after.FactsVersion != 2 || len(after.FactsCited) != 2 || after.FactsCited[1].Text != "Colour from 1,200.00 EUR & <b>more</b>" {
		t.Errorf("the draft after the edit: version %d cited %+v, want version 2 citing the haircut and the colour", after.FactsVersion, after.FactsCited)
	}
	if after.Guards == nil || len(after.Guards.Figures) != 0 {
		t.Errorf("the draft's figures are all in its facts version, guards = %+v", after.Guards)
	}
	if strings.Contains(after.Text, "[F") {
		t.Errorf("the draft keeps its marks: %q", after.Text)
	}
	card := root.getOK("/drafts?id=" + after.ID)
	for _, want := range []string{`id="cited-facts"`, "Written from facts version 2", "Colour from 1,200.00 EUR &amp; &lt;b&gt;more&lt;/b&gt;"} {
		if !strings.Contains(card.body, want) {
			t.Errorf("the card lacks %q", want)
		}
	}
	if tl := root.getOK("/events/" + after.EventKey); !strings.Contains(tl.body, "version 2, cites F1, F3") {
		t.Error("the timeline does not say the draft's facts version and citations")
	}
	// A bolt draft is written from no facts (bolt has none).
	if b := pending(t, e, "web-b", "f-3", "hello"); b.FactsVersion != 0 || len(b.FactsCited) != 0 {
		t.Errorf("bolt's draft: version %d cited %+v, want none", b.FactsVersion, b.FactsCited)
	}

	// Too long: one sentence, nothing saved, the text still in the form.
	long := "- keep-me-" + strings.Repeat("é", config.MaxFacts/2)
	got = root.post("/clients/acme/facts", url.Values{"text": {long}, "base": {"2"}})
	if got.code != http.StatusBadRequest || !strings.Contains(got.body, fmt.Sprintf("at most %d go into a prompt, so nothing was saved", config.MaxFacts)) || !strings.Contains(got.body, "keep-me-éé") {
		t.Errorf("facts too long: %d %.300s, want 400 with the sentence and the text kept", got.code, got.body)
	}
	// Two admins editing from version 2: both saves are kept, and the
	// second is told the first came in between.
	first := root.post("/clients/acme/facts", url.Values{"text": {edited + "\n- first"}, "base": {"2"}})
	second := root.post("/clients/acme/facts", url.Values{"text": {edited + "\n- second"}, "base": {"2"}})
	if a, b := first.header.Get("Location"), second.header.Get("Location"); strings.Contains(a, "after=") || !strings.Contains(b, "saved=4") || !strings.Contains(b, "after=3") {
		t.Errorf("two saves from version 2: %s then %s, want the second told of version 3", a, b)
	}
	if p := root.getOK(second.header.Get("Location")); !strings.Contains(p.body, "Version 3 was saved by someone else while you edited; both are kept") {
		t.Errorf("the second save's page does not say so: %.300s", p.body)
	}
	// A body that is not the form saves nothing (never an empty version).
	got = root.doBody(http.MethodPost, "/clients/acme/facts", `{"text":""}`, http.Header{"Content-Type": {"application/json"}, "X-Csrf-Token": {root.csrf}})
	if got.code != http.StatusBadRequest || !strings.Contains(got.body, "no text field") {
		t.Errorf("a JSON body on the form: %d %.200s, want 400", got.code, got.body)
	}
	// The same text again makes no version.
	got = root.post("/clients/acme/facts", url.Values{"text": {edited + "\n- second"}, "base": {"4"}})
	if loc := got.header.Get("Location"); got.code != http.StatusSeeOther || !strings.Contains(loc, "same=4") {
		t.Errorf("the same text again: %d %s", got.code, loc)
	}
	// The facts_file read again.
	if err := os.WriteFile(file, []byte("- Haircut €40\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got = root.post("/clients/acme/facts/reload", nil)
	if loc := got.header.Get("Location"); got.code != http.StatusSeeOther || !strings.Contains(loc, "saved=5") {
		t.Errorf("reload: %d %s %.200s", got.code, loc, got.body)
	}
	hist := root.getOK("/clients/acme/facts")
	if !strings.Contains(hist.body, `id="facts-history"`) || !strings.Contains(hist.body, "read from "+file+" by root") || !strings.Contains(hist.body, "changes from 4") {
		t.Errorf("the history lacks the versions: %.500s", hist.body)
	}
	if old := root.getOK("/clients/acme/facts?version=1"); !strings.Contains(old.body, "Version 1") || !strings.Contains(old.body, "not current") {
		t.Errorf("version 1 shown: %.300s", old.body)
	}
	if got := root.get("/clients/acme/facts?version=9"); got.code != http.StatusNotFound {
		t.Errorf("a version that does not exist: %d", got.code)
	}

	// The API: a version read, another saved.
	admin := http.Header{"Authorization": {"Bearer " + testToken}}
	code, ans := e.do(t, http.MethodGet, "/api/v1/clients/acme/facts/2", "", nil, admin)
	if code != http.StatusOK || ans["text"] != edited || ans["version"] != float64(2) {
		t.Errorf("GET version 2: %d %v", code, ans)
	}
	body, _ := json.Marshal(map[string]string{"text": "- Haircut €35\n- Parking behind the shop"})
	code, ans = e.do(t, http.MethodPut, "/api/v1/clients/acme/facts", "application/json", body, admin)
	if code != http.StatusCreated || ans["version"] != float64(6) {
		t.Errorf("PUT: %d %v, want 201 version 6", code, ans)
	}
	code, ans = e.do(t, http.MethodPut, "/api/v1/clients/acme/facts", "application/json", body, admin)
	if code != http.StatusOK || ans["version"] != float64(6) {
		t.Errorf("PUT the same: %d %v, want 200 version 6", code, ans)
	}
	code, ans = e.do(t, http.MethodGet, "/api/v1/clients/acme/facts", "", nil, admin)
	if hist, _ := ans["history"].([]any); code != http.StatusOK || len(hist) != 6 {
		t.Errorf("GET facts: %d %v, want 6 versions", code, ans)
	}
	code, ans = e.do(t, http.MethodGet, "/api/v1/clients/acme/facts/9", "", nil, admin)
	if code != http.StatusNotFound || !strings.Contains(fmt.Sprint(ans), "has no facts version 9") {
		t.Errorf("GET version 9: %d %v", code, ans)
	}
	code, ans = e.do(t, http.MethodPut, "/api/v1/clients/acme/facts", "application/json", []byte(`{"txt":"x"}`), admin)
	if code != http.StatusBadRequest {
		t.Errorf("PUT without text: %d %v", code, ans)
	}
}
