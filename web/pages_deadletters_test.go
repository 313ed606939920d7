package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/views"
)

// dlPagePath is the dashboard path of an action on a dead letter.
func dlPagePath(id, action string) string {
	return "/dead-letters/" + url.PathEscape(id) + "/" + action
}

// wantInOrder checks that body holds each string, each after the one before.
func wantInOrder(t *testing.T, body string, parts ...string) {
	t.Helper()
	at := 0
	for _, p := range parts {
		i := strings.Index(body[at:], p)
		if i < 0 {
			if strings.Contains(body, p) {
				t.Errorf("%q comes before %q; want the order %q", p, parts[max(0, indexOf(parts, p)-1)], parts)
			} else {
				t.Errorf("the page lacks %q", p)
			}
			return
		}
		at += i + len(p)
	}
}

// has reports whether a page shows s, as written or HTML-escaped.
func has(body, s string) bool {
	return strings.Contains(body, s) || strings.Contains(body, html.EscapeString(s))
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

var bulkIDRe = regexp.MustCompile(`hx-get="/dead-letters/bulk/([0-9A-Z]+)"`)

// TestDeadLettersPage works the page: the three kinds of items with what is
// known about each, the filters, a bulk replay that polls its status, a
// typed confirmation for an unsafe item, a regenerate, a cancel.
func TestDeadLettersPage(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t, -1)
	prov := newFakeProvider(t, true)
	e, _ := newEnv(t, dlConfig(model, prov), envOptions{})
	sendLead(t, e, "manual", "p-1", "+15550000011")
	job := waitDeadLetter(t, e, "manual:p-1", "discarded")
	model.set(0)
	sendLead(t, e, "crm", "p-2", "+15550000012")
	sendLead(t, e, "stall", "p-3", "+15550000013")
	failed := waitDeadLetter(t, e, "crm:p-2", "failed")
	unsure := waitDeadLetter(t, e, "stall:p-3", "needs_reconciliation")
	jobID, failedID, unsureID := job["id"].(string), failed["id"].(string), unsure["id"].(string)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")

	// The table: a row per dead letter; the reply that needs reconciling
	// is counted and listed on /reconcile only.
	p := admin.getOK("/dead-letters")
	for _, w := range []string{
		jobID, failedID, "2</strong> dead letters", "1</strong> reply to reconcile", views.SafeResend,
		`href="` + views.DeadLetterURL(jobID) + `"`, `href="` + views.DeadLetterURL(failedID) + `"`,
		`name="id" value="` + jobID + `"`, "Replay selected", "+15550000012", "the number is not reachable",
	} {
		if !has(p.body, w) {
			t.Errorf("the table lacks %q", w)
		}
	}
	if has(p.body, unsureID) {
		t.Errorf("the table lists %s, which waits on /reconcile: it would be counted twice", unsureID)
	}
	if !strings.Contains(p.body, `class="count alert">2<`) || !strings.Contains(p.body, `class="count alert">1<`) {
		t.Errorf("the navigation does not count 2 dead letters and 1 reply to reconcile")
	}
	if n := strings.Count(p.body, "<tr>") - 1; n != 2 {
		t.Errorf("%d rows, want 2", n)
	}

	// Each item's details on its own page: what is known and its actions.
	jobAttempts := list(job["job"].(map[string]any)["attempts"])
	for id, want := range map[string][]string{
		jobID: {"draft job", "Safe", "no draft was stored", `href="` + views.EventURL("manual:p-1") + `"`,
			"call the model: the model server answered 500",
			jobAttempts[0].(map[string]any)["execution_id"].(string), jobAttempts[1].(map[string]any)["execution_id"].(string),
			`name="regenerate"`, `hx-post="` + dlPagePath(jobID, "replay") + `"`},
		failedID: {"reply", "refused it permanently", "the number is not reachable", `href="` + views.EventURL("crm:p-2") + `"`,
			"Their message", "Do you ship to Lisbon?", "The reply", "Ada"},
		unsureID: {"Unsafe", "may already have this message", "sent to the provider with an unknown outcome", "Type the id to confirm", `name="confirm"`, "stall:p-3"},
	} {
		ip := admin.getOK(views.DeadLetterURL(id))
		for _, w := range want {
			if !has(ip.body, w) {
				t.Errorf("the page of %s lacks %q", id, w)
			}
		}
		if strings.Contains(ip.body, "Look it up now") {
			t.Errorf("the page of %s offers a lookup; none of its providers can look up", id)
		}
	}
	if p := admin.get(views.DeadLetterURL("nope")); p.code != http.StatusNotFound {
		t.Errorf("an unknown item's page: %d, want 404", p.code)
	}

	filters := []struct {
		query    string
		has, not []string
	}{
		{"kind=job", []string{jobID}, []string{failedID, unsureID}},
		{"kind=outbox&channel=crm", []string{failedID}, []string{jobID, unsureID}},
		{"error=" + url.QueryEscape("NOT REACHABLE"), []string{failedID}, []string{jobID, unsureID}},
		{"older_than=1h", []string{"Nothing on the list matches the filter"}, []string{jobID, failedID, unsureID}},
	}
	for _, f := range filters {
		p := admin.get("/dead-letters?" + f.query)
		if p.code != http.StatusOK {
			t.Errorf("%s: %d", f.query, p.code)
			continue
		}
		for _, h := range f.has {
			if !strings.Contains(p.body, html.EscapeString(h)) {
				t.Errorf("%s: lacks %s", f.query, h)
			}
		}
		for _, n := range f.not {
			if strings.Contains(p.body, html.EscapeString(n)) {
				t.Errorf("%s: shows %s", f.query, n)
			}
		}
	}
	for _, q := range []string{"kind=letters", "older_than=soon", "after=nonsense"} {
		if p := admin.get("/dead-letters?" + q); p.code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, p.code)
		}
	}

	// Replay selected: the safe reply is replayed, the unsure one skipped
	// saying why; nothing ticked is refused.
	if r := admin.hx("/dead-letters/replay-selected", url.Values{}); r.code != http.StatusBadRequest || !strings.Contains(r.body, "select at least one") {
		t.Errorf("nothing selected: %d %.200s, want 400", r.code, r.body)
	}
	prov.set(false)
	bulk := admin.hx("/dead-letters/replay-selected", url.Values{"id": {unsureID, failedID, unsureID}})
	m := bulkIDRe.FindStringSubmatch(bulk.body)
	if bulk.code != http.StatusOK || m == nil || !strings.Contains(bulk.body, `hx-trigger="every 1s"`) || !strings.Contains(bulk.body, "Cancel the bulk replay") {
		t.Fatalf("replay selected: %d %.500s, want a polling status with a cancel button", bulk.code, bulk.body)
	}
	status := "/dead-letters/bulk/" + m[1]
	var st page
	testkit.Eventually(t, 10*time.Second, func() bool {
		st = admin.do(http.MethodGet, status, nil, http.Header{"Hx-Request": {"true"}})
		return st.code == http.StatusOK && !strings.Contains(st.body, "every 1s")
	}, "the bulk replay to end")
	for _, w := range []string{">done<", "1 replayed · 1 skipped · 0 failed · of 2", failedID, unsureID, "may already have this message"} {
		if !has(st.body, w) {
			t.Errorf("the finished status lacks %q: %.600s", w, st.body)
		}
	}
	if strings.Contains(st.body, "Cancel the bulk replay") {
		t.Error("a finished run still offers to cancel")
	}
	if full := admin.get(status); full.code != http.StatusOK || !strings.Contains(full.body, "<h1>Bulk replay</h1>") {
		t.Errorf("the run's own page: %d", full.code)
	}
	if o, _ := e.st.OutboxRow(unsureID); o.Status != store.OutboxNeedsReconciliation || len(o.Replays) != 0 {
		t.Errorf("the unsure reply was touched by the selection: %s %v", o.Status, o.Replays)
	}
	if p := admin.post("/dead-letters/replay-selected", url.Values{"id": {"x"}}); p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/dead-letters/bulk/") {
		t.Errorf("replay selected without htmx: %d %q, want a redirect to the run", p.code, p.header.Get("Location"))
	}
	if p := admin.post("/dead-letters/replay", url.Values{"kind": {"job"}}); p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/dead-letters/bulk/") {
		t.Errorf("bulk without htmx: %d %q, want a redirect to the run", p.code, p.header.Get("Location"))
	} else {
		testkit.Eventually(t, 10*time.Second, func() bool {
			return !strings.Contains(admin.do(http.MethodGet, p.header.Get("Location"), nil, http.Header{"Hx-Request": {"true"}}).body, "every 1s")
		}, "the job's bulk replay to end")
	}
	waitRow(t, e, "crm:p-2", "sent")
	waitDraft(t, e, "manual:p-1")

	// The unsafe reply: refused without the typed id, and with a wrong one.
	path := dlPagePath(unsureID, "replay")
	r := admin.hx(path, url.Values{})
	if r.code != http.StatusConflict || r.header.Get("Hx-Retarget") != "#flash" || !strings.Contains(r.body, "may already have this message") {
		t.Errorf("unconfirmed: %d %q %.300s, want 409 in #flash naming the reason", r.code, r.header.Get("Hx-Retarget"), r.body)
	}
	if r := admin.hx(path, url.Values{"confirm": {"yes"}}); r.code != http.StatusBadRequest || !strings.Contains(r.body, "confirm must repeat the id") {
		t.Errorf("a wrong id: %d %.300s, want 400", r.code, r.body)
	}
	if o, _ := e.st.OutboxRow(unsureID); o.Status != store.OutboxNeedsReconciliation || len(o.Replays) != 0 {
		t.Fatalf("refused replays changed the row: %s %v", o.Status, o.Replays)
	}
	r = admin.hx(path, url.Values{"confirm": {" " + unsureID + " "}})
	if r.code != http.StatusOK || !strings.Contains(r.body, html.EscapeString(unsureID+" was replayed by boss, confirmed after a check")) {
		t.Errorf("confirmed: %d %.300s", r.code, r.body)
	}
	if o, _ := e.st.OutboxRow(unsureID); len(o.Replays) != 1 || o.Replays[0].By != "boss" || !o.Replays[0].Confirmed {
		t.Errorf("replays %+v, want boss's confirmed replay", o.Replays)
	}
	wantAudit(t, e.st, "boss", "replay outbox")

	// A new draft job failure, replayed without htmx to be drafted afresh.
	model.set(-1)
	sendLead(t, e, "manual", "p-4", "+15550000014")
	job4 := waitDeadLetter(t, e, "manual:p-4", "discarded")["id"].(string)
	model.set(0)
	p = admin.post(dlPagePath(job4, "replay"), url.Values{"regenerate": {"true"}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("replay with regenerate: %d %.300s", p.code, p.body)
	}
	if back := admin.get(p.header.Get("Location")); !strings.Contains(back.body, html.EscapeString(job4+" was replayed by boss, to be drafted afresh")) {
		t.Errorf("no notice after the replay: %.300s", back.body)
	}
	if j, _ := e.st.Job(job4); len(j.Replays) != 1 || !j.Replays[0].Regenerate || j.Replays[0].By != "boss" {
		t.Errorf("replays %+v, want boss's regenerate", j.Replays)
	}
	waitDraft(t, e, "manual:p-4")
	if p := admin.post(dlPagePath(job4, "replay"), url.Values{"regenerate": {"perhaps"}}); p.code != http.StatusBadRequest {
		t.Errorf("regenerate=perhaps: %d, want 400", p.code)
	}

	// Cancel: a reason is required.
	model.set(-1)
	sendLead(t, e, "manual", "p-5", "+15550000015")
	job5 := waitDeadLetter(t, e, "manual:p-5", "discarded")["id"].(string)
	if r := admin.hx(dlPagePath(job5, "cancel"), url.Values{"reason": {"  "}}); r.code != http.StatusBadRequest || !strings.Contains(r.body, "needs a reason") {
		t.Errorf("cancel without a reason: %d %.200s", r.code, r.body)
	}
	r = admin.hx(dlPagePath(job5, "cancel"), url.Values{"reason": {"duplicate lead"}})
	if r.code != http.StatusOK || !strings.Contains(r.body, html.EscapeString(job5+" was cancelled by boss: duplicate lead")) {
		t.Errorf("cancel: %d %.300s", r.code, r.body)
	}
	if j, _ := e.st.Job(job5); j.State != store.JobCancelled || j.Dismissed == nil || j.Dismissed.By != "boss" {
		t.Errorf("cancelled job %s %+v", j.State, j.Dismissed)
	}
	if p := admin.getOK("/dead-letters?kind=job"); strings.Contains(p.body, job5) {
		t.Error("a cancelled job is still listed")
	}
	wantAuditBy(t, e.st, "boss", "cancel job", job5)
	if p := admin.hx(dlPagePath(job5, "dance"), nil); p.code != http.StatusNotFound {
		t.Errorf("unknown action: %d", p.code)
	}
	if p := admin.get("/dead-letters/bulk/NOPE"); p.code != http.StatusNotFound {
		t.Errorf("unknown run: %d", p.code)
	}

	// The timeline tells of the replays and the cancel.
	tp := admin.get(views.EventURL("stall:p-3"))
	if !strings.Contains(tp.body, html.EscapeString("Reply "+unsureID+" replayed by boss (confirmed after a check)")) {
		t.Errorf("the timeline of stall:p-3 does not tell of the confirmed replay")
	}
	tp = admin.get(views.EventURL("manual:p-5"))
	if !strings.Contains(tp.body, "cancelled by boss") || !strings.Contains(tp.body, "duplicate lead") {
		t.Errorf("the timeline of manual:p-5 does not tell of the cancel")
	}
}

// TestBulkCancelFromPage holds a bulk run before its second item and
// cancels it with the page's button.
func TestBulkCancelFromPage(t *testing.T) {
	t.Parallel()
	reached, release := make(chan struct{}), make(chan struct{})
	held := false
	model := newFakeModel(t, -1)
	e, _ := newEnv(t, dlConfig(model, nil), envOptions{pause: func(i int) {
		if i == 1 && !held { // one run only, so one goroutine reads held
			held = true
			close(reached)
			<-release
		}
	}})
	for i := range 4 {
		sendLead(t, e, "manual", fmt.Sprintf("c-%d", i), fmt.Sprintf("+1555000002%d", i))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(deadLetters(t, e, "kind=job")) == 4 }, "every draft job to be discarded")
	model.set(0)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	bulk := admin.hx("/dead-letters/replay", url.Values{})
	m := bulkIDRe.FindStringSubmatch(bulk.body)
	if m == nil {
		t.Fatalf("bulk start: %d %.300s", bulk.code, bulk.body)
	}
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never reached its second item")
	}
	c := admin.hx("/dead-letters/bulk/"+m[1]+"/cancel", nil)
	if c.code != http.StatusOK || !strings.Contains(c.body, `id="bulk-status"`) {
		t.Errorf("cancel: %d %.300s", c.code, c.body)
	}
	close(release)
	var st page
	testkit.Eventually(t, 10*time.Second, func() bool {
		st = admin.do(http.MethodGet, "/dead-letters/bulk/"+m[1], nil, http.Header{"Hx-Request": {"true"}})
		return !strings.Contains(st.body, "every 1s")
	}, "the run to stop")
	if !strings.Contains(st.body, ">cancelled<") || !strings.Contains(st.body, "1 replayed · 0 skipped · 0 failed · of 4") {
		t.Errorf("after cancel: %.500s", st.body)
	}
}

// TestKeysPage lists keys by state and settles two through the page.
func TestKeysPage(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now().UTC()}
	e, _ := newEnv(t, config.Default(), envOptions{now: clk.Now})
	post := func(key, action, query, body string) {
		t.Helper()
		if code, ans := apiPost(t, e, keyPath(key, action)+query, body); code >= 300 && code != http.StatusConflict {
			t.Fatalf("%s %s: %d %v", action, key, code, ans)
		}
	}
	post("started-1", "claim", "", `{}`)
	post("pending-2", "claim", "", `{}`)
	post("pending-2", "effect-pending", "", "")
	post("done-3", "claim", "", `{}`)
	post("done-3", "complete", "", `{"ok":true,"ticket":"T-9"}`)
	post("unsure-4", "claim", "", `{}`)
	post("unsure-4", "effect-pending", "", "")
	post("taken-5", "claim", "?lease=1s", `{}`)
	clk.Add(defaultKeyLease + time.Second)
	post("unsure-4", "claim", "", `{}`) // 409: needs reconciliation now
	post("taken-5", "claim", "", `{}`)  // 201: taken over
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")

	p := admin.get("/keys")
	if p.code != http.StatusOK {
		t.Fatalf("GET /keys: %d %.300s", p.code, p.body)
	}
	for _, w := range []string{"started-1", "pending-2", "done-3", "unsure-4", "taken-5", `{"ok":true,"ticket":"T-9"}`,
		"taken over from a started claim", "the claim expired while its effect was pending", "(expired)", `href="/keys"`} {
		if !has(p.body, w) {
			t.Errorf("the keys page lacks %q", w)
		}
	}
	for _, k := range []string{"pending-2", "unsure-4"} {
		if n := strings.Count(p.body, `action="/keys/`+k+`/reconcile"`); n != 2 {
			t.Errorf("%s has %d verdict forms, want 2", k, n)
		}
	}
	for _, k := range []string{"started-1", "done-3", "taken-5"} {
		if strings.Contains(p.body, `action="/keys/`+k+`/reconcile"`) {
			t.Errorf("%s offers a verdict", k)
		}
	}
	tab := admin.get("/keys?state=needs_reconciliation")
	if !strings.Contains(tab.body, "unsure-4") || strings.Contains(tab.body, "pending-2") || strings.Contains(tab.body, "done-3") {
		t.Errorf("the needs_reconciliation tab: %.400s", tab.body)
	}
	if p := admin.get("/keys?state=lost"); p.code != http.StatusBadRequest {
		t.Errorf("an unknown state: %d, want 400", p.code)
	}

	if p := admin.post("/keys/unsure-4/reconcile", url.Values{"outcome": {"completed"}, "result": {`{"id":9}`}}); p.code != http.StatusBadRequest {
		t.Errorf("without the checkbox: %d, want 400", p.code)
	}
	if p := admin.post("/keys/unsure-4/reconcile", url.Values{"outcome": {"completed"}, "result": {`{"id":`}, "checked": {"yes"}}); p.code != http.StatusBadRequest {
		t.Errorf("a result that is not JSON: %d, want 400", p.code)
	}
	p = admin.post("/keys/unsure-4/reconcile", url.Values{"outcome": {"completed"}, "result": {`{"id": 9}`}, "checked": {"yes"}, "state": {"needs_reconciliation"}})
	if p.code != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), "state=needs_reconciliation") {
		t.Fatalf("completed: %d %q %.200s", p.code, p.header.Get("Location"), p.body)
	}
	if back := admin.get(p.header.Get("Location")); !strings.Contains(back.body, "Key unsure-4 is recorded as completed") {
		t.Errorf("no notice: %.300s", back.body)
	}
	if got := apiGet(t, e, keyPath("unsure-4", "")); got["state"] != "completed" || got["result"].(map[string]any)["id"] != float64(9) {
		t.Errorf("unsure-4 after the verdict: %v", got)
	}
	p = admin.post("/keys/pending-2/reconcile", url.Values{"outcome": {"not_done"}, "checked": {"yes"}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("not done: %d %.200s", p.code, p.body)
	}
	if back := admin.get(p.header.Get("Location")); !strings.Contains(back.body, "Key pending-2 was released") {
		t.Errorf("no notice: %.300s", back.body)
	}
	if code, ans := apiPost(t, e, keyPath("pending-2", "claim"), `{}`); code != http.StatusCreated {
		t.Errorf("claim after release: %d %v", code, ans)
	}
	if p := admin.post("/keys/started-1/reconcile", url.Values{"outcome": {"not_done"}, "checked": {"yes"}}); p.code != http.StatusConflict {
		t.Errorf("a verdict on a started key: %d, want 409", p.code)
	}
	if p := admin.post("/keys/started-1/reconcile", url.Values{"outcome": {"maybe"}, "checked": {"yes"}}); p.code != http.StatusBadRequest {
		t.Errorf("an unknown outcome: %d, want 400", p.code)
	}
	// A crafted link says nothing the record does not bear out.
	if p := admin.getOK("/keys?settled=started-1&outcome=completed"); strings.Contains(p.body, "recorded as completed") {
		t.Error("a crafted link made the page claim a verdict")
	}
	wantAudit(t, e.st, "boss", "key completed", "key released (reconciled as not done)")
}

// TestDeadLettersAndKeysAreForAdmins: approvers get 403 on the pages and
// their API routes; nobody gets in logged out.
func TestDeadLettersAndKeysAreForAdmins(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	approver := loggedIn(t, e, "ann", store.RoleApprover, "")
	anon := newBrowser(t, e.url)
	pages := []struct{ method, path string }{
		{"GET", "/dead-letters"},
		{"GET", "/dead-letters?kind=job"},
		{"GET", "/dead-letters/bulk/X"},
		{"POST", "/dead-letters/replay"},
		{"POST", "/dead-letters/bulk/X/cancel"},
		{"POST", "/dead-letters/j1/replay"},
		{"POST", "/dead-letters/j1/cancel"},
		{"GET", "/keys"},
		{"POST", "/keys/k/reconcile"},
	}
	for _, p := range pages {
		var got, gotAnon page
		if p.method == http.MethodGet {
			got, gotAnon = approver.get(p.path), anon.get(p.path)
		} else {
			got, gotAnon = approver.post(p.path, url.Values{"reason": {"x"}}), anon.post(p.path, nil)
		}
		if got.code != http.StatusForbidden {
			t.Errorf("approver %s %s: %d, want 403", p.method, p.path, got.code)
		}
		wantAnon := http.StatusUnauthorized
		if p.method == http.MethodGet {
			wantAnon = http.StatusSeeOther
		}
		if gotAnon.code != wantAnon || (p.method == http.MethodGet && !strings.HasPrefix(gotAnon.header.Get("Location"), "/login?next=")) {
			t.Errorf("logged out %s %s: %d %q, want %d", p.method, p.path, gotAnon.code, gotAnon.header.Get("Location"), wantAnon)
		}
	}
	api := []struct{ method, path string }{
		{"GET", "/api/v1/dead-letters"},
		{"POST", "/api/v1/dead-letters/replay"},
		{"GET", "/api/v1/dead-letters/bulk/X"},
		{"POST", "/api/v1/dead-letters/bulk/X/cancel"},
		{"POST", "/api/v1/dead-letters/j1/replay"},
		{"POST", "/api/v1/dead-letters/j1/cancel"},
		{"GET", "/api/v1/keys/k"},
		{"POST", "/api/v1/keys/k/claim"},
		{"POST", "/api/v1/keys/k/effect-pending"},
		{"POST", "/api/v1/keys/k/complete"},
		{"POST", "/api/v1/keys/k/reconcile"},
		{"POST", "/api/v1/reconcile/x:y"},
		{"GET", "/api/v1/sandbox/messages"},
		{"GET", "/api/v1/backup"},
	}
	for _, a := range api {
		got := approver.do(a.method, a.path, nil, http.Header{"X-Csrf-Token": {approver.csrf}})
		if got.code != http.StatusForbidden {
			t.Errorf("approver session %s %s: %d, want 403", a.method, a.path, got.code)
		}
		if code, _ := e.do(t, a.method, a.path, "", nil, nil); code != http.StatusUnauthorized {
			t.Errorf("no credentials %s %s: %d, want 401", a.method, a.path, code)
		}
	}
	if p := approver.getOK("/drafts"); strings.Contains(p.body, `href="/keys"`) || strings.Contains(p.body, `href="/dead-letters"`) {
		t.Error("an approver's navigation links to the admin pages")
	}
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	if p := admin.get("/drafts"); !strings.Contains(p.body, `href="/keys"`) || !strings.Contains(p.body, `href="/dead-letters"`) {
		t.Error("an admin's navigation lacks Keys or Dead letters")
	}
}

// TestTimelineRetryApprovalReconciliation follows one event through a
// model failure and its retry, duplicates, an approval, a send whose
// outcome is unknown and a person's reconciliation: the JSON and the page
// show every step, joined by the correlation id, in time order.
func TestTimelineRetryApprovalReconciliation(t *testing.T) {
	t.Parallel()
	model := newFakeModel(t, 1)
	e, _ := newEnv(t, dlConfig(model, nil), envOptions{})
	key := "manual:t-1"
	corr := sendLead(t, e, "manual", "t-1", leadContact)
	// The same message id again, twice, in other shapes (a sender that
	// re-serialized it): duplicates all the same.
	for _, b := range []corpus.Body{
		corpus.MessageAs("fish", "pretty2", "t-1", leadContact, leadContact),
		corpus.MessageAs("emoji", "python", "t-1", leadContact, leadContact),
	} {
		if code, ans := hookCorpus(t, e, "manual", b); code != http.StatusOK || ans["status"] != "duplicate" {
			t.Fatalf("duplicate %s: %d %v", b.Name(), code, ans)
		}
	}
	d := waitDraft(t, e, key)
	code, ans := apiPost(t, e, "/api/v1/drafts/"+d["id"].(string)+"/approve", "")
	if code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, ans)
	}
	outboxID := ans["outbox_id"].(string)
	waitDeadLetter(t, e, key, "needs_reconciliation")
	msgs := sandboxFor(t, e, outboxID)
	if len(msgs) != 1 {
		t.Fatalf("sandbox: %v", msgs)
	}
	if code, ans := apiPost(t, e, "/api/v1/reconcile/"+strings.NewReplacer("+", "%2B", ":", "%3A").Replace(outboxID), `{"outcome":"sent","provider_id":"`+msgs[0]["id"].(string)+`"}`); code != http.StatusOK {
		t.Fatalf("reconcile: %d %v", code, ans)
	}

	tl := apiGet(t, e, timelinePath(key))
	ev := tl["event"].(map[string]any)
	if ev["correlation_id"] != corr || ev["duplicates"] != float64(2) || ev["last_duplicate_at"] == nil {
		t.Errorf("event %v, want 2 duplicates with the last one's time", ev)
	}
	dj, deliver := jobOf(tl, "draft"), jobOf(tl, "deliver")
	das := list(dj["attempts"])
	if len(das) != 2 || das[0].(map[string]any)["outcome"] != "retry" || das[1].(map[string]any)["outcome"] != "completed" || !strings.Contains(das[0].(map[string]any)["error"].(string), "500") {
		t.Fatalf("draft attempts %v, want a retry after the model's 500, then completed", das)
	}
	for _, j := range list(tl["jobs"]) {
		if jm := j.(map[string]any); jm["correlation_id"] != corr {
			t.Errorf("job %v has another correlation id", jm["id"])
		}
	}
	if deliver == nil || len(list(deliver["attempts"])) != 1 {
		t.Errorf("deliver job %v, want one attempt", deliver)
	}
	draft := tl["draft"].(map[string]any)
	if dec, _ := draft["decision"].(map[string]any); dec["by"] != "api-token" || draft["model"] != "m" || draft["prompt_version"] != "p1" || draft["input_hash"] == "" || draft["execution_id"] != das[1].(map[string]any)["execution_id"] {
		t.Errorf("draft %v, want approved by api-token, drafted by the second attempt", draft)
	}
	if ds := list(tl["drafts"]); len(ds) != 1 || ds[0].(map[string]any)["id"] != draft["id"] {
		t.Errorf("drafts %v, want the one draft", ds)
	}
	o := tl["outbox"].(map[string]any)
	recs := list(o["reconciliations"])
	if o["status"] != "sent" || o["provider_id"] != msgs[0]["id"] || len(list(o["attempts"])) != 1 || len(recs) != 1 || recs[0].(map[string]any)["by"] != "api-token" {
		t.Errorf("outbox %v, want sent as %v after one attempt and api-token's reconciliation", o, msgs[0]["id"])
	}
	var history []string
	for _, h := range list(tl["handoff"].(map[string]any)["history"]) {
		history = append(history, h.(map[string]any)["status"].(string))
	}
	if strings.Join(history, ",") != "received,matched,owned,replied" && strings.Join(history, ",") != "received,owned,replied" {
		t.Errorf("lead history %v", history)
	}

	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.get(views.EventURL(key))
	if p.code != http.StatusOK {
		t.Fatalf("timeline page: %d", p.code)
	}
	wantInOrder(t, p.body,
		"Message received on manual",
		"draft attempt 1: retry",
		"draft attempt 2: completed",
		"Reply drafted",
		"Approved by api-token",
		"Reply queued to be sent",
		"Provider send: ambiguous",
		"Reconciled by api-token: sent",
		"Lead replied",
	)
	for _, w := range []string{"The same event arrived again (2 duplicates, the first here)", corr, das[0].(map[string]any)["execution_id"].(string), das[1].(map[string]any)["execution_id"].(string), msgs[0]["id"].(string), "the model server answered 500"} {
		if !has(p.body, w) {
			t.Errorf("the timeline page lacks %q", w)
		}
	}
}

// TestTimelineShowsDraftVersions: a regenerated draft keeps the one it
// replaced; the JSON lists both and the page says which replaced which.
func TestTimelineShowsDraftVersions(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	v1 := pending(t, e, "demo", "v-1", "hello")
	v2, created, err := review.New(e.st, &config.Config{}).Save(t.Context(), store.Draft{
		EventKey: v1.EventKey, Text: "A better reply", Drafter: "openai", Model: "m2", PromptVersion: "p2",
		InputHash: "hash-2", Fields: map[string]string{"intent": "sales"}, Owner: "sales", RuleVersion: "r1",
		ExecutionID: "exec-2", CreatedAt: v1.CreatedAt.Add(time.Second),
	}, 2)
	if err != nil || !created {
		t.Fatalf("SaveDraftVersion: %v %v", created, err)
	}
	tl := apiGet(t, e, timelinePath(v1.EventKey))
	ds := list(tl["drafts"])
	if len(ds) != 2 {
		t.Fatalf("drafts %v, want two versions", ds)
	}
	first, second := ds[0].(map[string]any), ds[1].(map[string]any)
	if first["id"] != v1.ID || first["status"] != "rejected" || first["decision"].(map[string]any)["by"] != "regeneration" ||
		second["id"] != v2.ID || second["replaces"] != v1.ID || second["version"] != float64(2) || tl["draft"].(map[string]any)["id"] != v2.ID {
		t.Errorf("drafts %v / current %v, want v1 rejected by regeneration and v2 replacing it as the current one", ds, tl["draft"])
	}
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.get(views.EventURL(v1.EventKey))
	wantInOrder(t, p.body,
		"Reply drafted (version 1)",
		"Reply drafted (version 2), replacing "+v1.ID,
		"Version 1 rejected by regeneration",
	)
	for _, w := range []string{"replaced by " + v2.ID, "m2", "p2", "hash-2", "Field intent", "version 2, replacing " + v1.ID} {
		if !has(p.body, w) {
			t.Errorf("the timeline lacks %q", w)
		}
	}
}

// TestTimelineFirstDuplicate: the timeline says when the duplicates of an
// event arrived, the first and the last. The event record keeps only the
// count and the last (store.Event has no first-duplicate time), so this
// fails until it does.
func TestTimelineFirstDuplicate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	// Each a corpus message sent three times byte for byte, as a
	// provider's retries are.
	for _, b := range []corpus.Body{
		corpus.MessageAs("fish", "pretty4", "dup-1", "", "a@example.com"),
		corpus.MessageAs("emoji", "goescaped", "dup-2", "", "b@example.com"),
		corpus.MessageAs("long", "crlf", "dup-3", "", "c@example.com"),
	} {
		for i := range 3 {
			code, ans := hookCorpus(t, e, "demo", b)
			if want := map[bool]int{true: http.StatusAccepted, false: http.StatusOK}[i == 0]; code != want {
				t.Fatalf("%s: post %d: %d %v, want %d", b.Name(), i, code, ans, want)
			}
		}
		ev := apiGet(t, e, timelinePath("demo:"+b.Want.MessageID))["event"].(map[string]any)
		first, errFirst := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["first_duplicate_at"]))
		last, errLast := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["last_duplicate_at"]))
		if ev["duplicates"] != float64(2) || errFirst != nil || errLast != nil || !first.Before(last) {
			t.Errorf("%s: event %v: want 2 duplicates with first_duplicate_at before last_duplicate_at", b.Name(), ev)
		}
		if ev["text"] != b.Want.Text {
			t.Errorf("%s: the timeline's text is %q, want %q", b.Name(), ev["text"], b.Want.Text)
		}
	}
}
