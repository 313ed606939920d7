package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/users"
)

// twoClients is the demo split into two businesses: channel web-a is
// acme's, web-b is bolt's.
func twoClients() *config.Config {
	cfg := config.Default()
	a, b := cfg.Channels[0], cfg.Channels[0]
	a.Name, a.Client = "web-a", "acme"
	b.Name, b.Client = "web-b", "bolt"
	cfg.Channels = []config.Channel{a, b}
	cfg.Clients = []config.Client{{ID: "acme", Name: "Acme"}, {ID: "bolt", Name: "Bolt"}}
	return cfg
}

// clientData is one client's records, for the matrix.
type clientData struct {
	client, channel string
	sentKey         string // an event whose reply was approved and sent
	pendingKey      string // an event whose draft waits
	pendingDraft    string
	outboxID        string
	contact         string // the contact of the sent one
	marker          string // words only this client's customers wrote
}

// seedClient records two messages on ch: one answered (approved, sent), one
// waiting.
func seedClient(t *testing.T, e *testEnv, client, ch, prefix string) clientData {
	t.Helper()
	cd := clientData{client: client, channel: ch, marker: "words-of-" + prefix}
	sent := pending(t, e, ch, prefix+"-1", cd.marker+" one")
	admin := http.Header{"Authorization": {"Bearer " + testToken}}
	code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+sent.ID+"/approve", "", nil, admin)
	if code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, ans)
	}
	cd.outboxID = ans["outbox_id"].(string)
	testkit.Eventually(t, 10*time.Second, func() bool {
		o, err := e.st.OutboxRow(cd.outboxID)
		return err == nil && o.Status == store.OutboxSent
	}, "the reply of "+prefix+" to be sent")
	p := pending(t, e, ch, prefix+"-2", cd.marker+" two")
	cd.sentKey, cd.pendingKey, cd.pendingDraft = sent.EventKey, p.EventKey, p.ID
	cd.contact = prefix + "-1@example.com"
	return cd
}

// limitedUser adds an approver limited to clients and logs them in.
func limitedUser(t *testing.T, e *testEnv, name string, role store.Role, clients ...string) *browser {
	t.Helper()
	addUser(t, e.st, name, role, "", name+"-password-long")
	if err := e.st.Update(context.Background(), func(tx *store.Tx) error {
		u, err := tx.User(name)
		if err != nil {
			return err
		}
		u.Clients = clients
		return tx.PutUser(u)
	}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e.url)
	b.login(name, name+"-password-long")
	return b
}

// call sends a request as b would: forms on pages, JSON on the API with
// the CSRF header.
func (b *browser) call(method, path string) page {
	b.t.Helper()
	if strings.HasPrefix(path, "/api/") {
		h := http.Header{"Content-Type": {"application/json"}, "X-Csrf-Token": {b.csrf}}
		return b.doBody(method, path, `{"reason":"r","text":"t"}`, h)
	}
	if method == http.MethodGet {
		return b.get(path)
	}
	return b.post(path, url.Values{"reason": {"r"}, "text": {"t"}, "confirm": {"x"}})
}

// doBody is do with a raw body.
func (b *browser) doBody(method, path, body string, h http.Header) page {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header = h
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return page{code: resp.StatusCode, body: buf.String(), header: resp.Header}
}

// TestClientsAccessMatrix: on every route of routes.go, a person of one
// client looking for the other client's data finds nothing: 404 for its
// ids (answered exactly as an id that does not exist), lists without
// it, and 404 on every route a limited person has no use for. An admin
// and a person without clients see both. A route missing from the table
// fails the test.
func TestClientsAccessMatrix(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	acme := seedClient(t, e, "acme", "web-a", "a")
	bolt := seedClient(t, e, "bolt", "web-b", "b")

	const (
		public = "public" // no person
		own    = "own"    // a person's own account
		admin  = "admin"  // admins only: 404 for a limited approver whatever the client
		list   = "list"   // a GET that lists: 200, without the other client's data
		id     = "id"     // names a record: 404 for the other client's
	)
	class := map[string]string{
		"GET /healthz": public, "GET /readyz": public, "POST /hooks/:channel": public, "GET /hooks/:channel": public,
		"GET /static/:name": public, "GET /favicon.ico": public, "GET /login": public, "POST /login": public, "GET /metrics": public,
		"GET /setup/:token": public, "POST /setup/:token": public, "GET /login/code": public, "POST /login/code": public,
		"POST /logout": own, "GET /account": own, "POST /account/password": own, "POST /account/sessions/end": own,
		"POST /account/totp/start": own, "POST /account/totp/confirm": own, "POST /account/totp/remove": own,
		"GET /account/confirm": own, "POST /account/confirm": own,
		// Web Push (webpush.go): the service worker, and a person's own browsers.
		"GET /sw.js": public, "POST /push/subscribe": own, "POST /push/unsubscribe": own,

		"GET /": list, "GET /search": list, "GET /drafts": list, "GET /drafts/live": list, "GET /handoffs": list, "GET /clients": list,
		"GET /api/v1/handoffs": list, "GET /api/v1/drafts": list, "GET /api/v1/stats/quality": list, "GET /api/v1/canary": list,

		"GET /events/*": id, "POST /events/*": id, "POST /drafts/:id/approve": id, "POST /drafts/:id/reject": id, "POST /drafts/selected": id,
		"GET /api/v1/events/*": id, "POST /api/v1/events/*": id, "POST /api/v1/drafts/:id/approve": id,
		"POST /api/v1/drafts/:id/reject": id, "GET /api/v1/outbox/*": id,
		"POST /drafts/:id/undo": id, "POST /api/v1/drafts/:id/undo": id,
		"POST /drafts/:id/template": id, "POST /api/v1/drafts/:id/template": id, // window.go
		"GET /undo": list, "POST /handoffs/*": id, "POST /api/v1/handoffs/*": id,
		// Export and erase are an admin's (behind a step-up), whoever's
		// client: a limited approver hears 404 there, like every admin route.
		"GET /clients/:id/export": admin, "POST /clients/:id/erase": admin,

		// The key API (keys scope) and the admin API: an approver's
		// session is refused there whatever its clients.
		"GET /api/v1/keys/:key": admin, "POST /api/v1/keys/:key/claim": admin, "POST /api/v1/keys/:key/effect-pending": admin,
		"POST /api/v1/keys/:key/complete": admin, "POST /api/v1/keys/:key/reconcile": admin,
		"POST /api/v1/reconcile/*": admin, "GET /api/v1/sandbox/messages": admin, "GET /api/v1/dead-letters": admin, "POST /api/v1/canary/:client/:action": admin,
		"POST /api/v1/dead-letters/replay": admin, "GET /api/v1/dead-letters/bulk/:id": admin,
		"POST /api/v1/dead-letters/bulk/:id/cancel": admin, "POST /api/v1/dead-letters/*": admin, "GET /api/v1/backup": admin,
		"POST /api/v1/backups": admin, "GET /api/v1/backups/offsite": admin,
		// A client's facts are an admin's, whoever's client (facts.go).
		"GET /api/v1/clients/:id/facts": admin, "GET /api/v1/clients/:id/facts/:version": admin,
		// The dead-letter table's routes are an admin's, as the list is.
		"GET /dead-letters": admin, "GET /dead-letters/*": admin, "POST /dead-letters/replay-selected": admin,
	}
	// The other client's id for a route's path, and one that exists nowhere.
	fill := func(route string, d clientData) string {
		path := route[strings.IndexByte(route, ' ')+1:]
		switch {
		case strings.HasPrefix(path, "/clients/"):
			return strings.Replace(path, ":id", d.client, 1)
		case path == "/drafts/selected": // the selected ids are form fields (the query is read as the form)
			return path + "?action=approve&id=" + url.QueryEscape(d.pendingDraft)
		case strings.Contains(path, "/drafts/:id"):
			return strings.Replace(path, ":id", d.pendingDraft, 1)
		case strings.HasSuffix(path, "/outbox/*"):
			return strings.Replace(path, "*", d.outboxID, 1)
		case strings.HasSuffix(path, "/handoffs/*"):
			return strings.Replace(path, "*", d.pendingKey+"/reopen", 1)
		case strings.HasPrefix(route, "POST") && strings.HasSuffix(path, "/events/*"):
			return strings.Replace(path, "*", d.pendingKey+"/close", 1)
		case strings.HasSuffix(path, "/events/*"):
			return strings.Replace(path, "*", d.pendingKey, 1)
		}
		return strings.NewReplacer("*", "x", ":name", "x", ":id", "x", ":key", "k", ":channel", "web-a", ":token", "x").Replace(path)
	}
	nowhere := clientData{client: "zeta", pendingDraft: "d01NOWHERE0000000000000000", outboxID: "nobody:d01NOWHERE", pendingKey: bolt.channel + ":nowhere"}
	nowhereOf := func(d clientData) clientData {
		n := nowhere
		n.pendingKey = d.channel + ":nowhere"
		return n
	}
	listPath := func(route string, d clientData) string {
		path := route[strings.IndexByte(route, ' ')+1:]
		if path == "/search" {
			return "/search?q=" + url.QueryEscape(d.contact)
		}
		return path
	}

	people := []struct {
		name      string
		b         *browser
		me, other clientData
	}{
		{"acme's approver", limitedUser(t, e, "ann", store.RoleApprover, "acme"), acme, bolt},
		{"bolt's approver", limitedUser(t, e, "bob", store.RoleApprover, "bolt"), bolt, acme},
	}
	routes := e.srv.e.Router().Routes()
	seen := 0
	for _, r := range routes {
		switch r.Method {
		case http.MethodGet, http.MethodPost:
		default:
			continue
		}
		route := r.Method + " " + r.Path
		cl, ok := class[route]
		if !ok {
			if strings.HasPrefix(r.Path, "/api/") || r.Path == "/metrics" {
				t.Errorf("%s is not in the clients table: say what a person limited to a client gets there", route)
				continue
			}
			cl = admin // the remaining dashboard routes are an admin's (routes.go)
		}
		seen++
		if cl == public || cl == own {
			continue
		}
		t.Run(route, func(t *testing.T) {
			for _, p := range people {
				switch cl {
				case admin:
					// The README promises 404: a limited person's dashboard
					// and API have no admin routes.
					if got := p.b.call(r.Method, fill(route, p.other)); got.code != http.StatusNotFound {
						t.Errorf("%s: %d %.200s, want 404", p.name, got.code, got.body)
					}
				case list:
					if r.Method != http.MethodGet {
						t.Fatalf("a list is a GET")
					}
					got := p.b.get(listPath(route, p.other))
					leaks := []string{p.other.marker, p.other.sentKey, p.other.pendingKey, p.other.channel}
					if route != "GET /search" {
						leaks = append(leaks, p.other.contact) // the search shows what was asked
					}
					for _, leak := range leaks {
						if strings.Contains(got.body, leak) {
							t.Errorf("%s: %s shows %q of the other client: %.300s", p.name, route, leak, got.body)
						}
					}
					if want := map[bool]int{true: http.StatusNotFound, false: http.StatusOK}[route == "GET /search"]; got.code != want {
						t.Errorf("%s: %d %.200s, want %d", p.name, got.code, got.body, want)
					}
					// The same list of one's own client does show it.
					mine := p.b.get(listPath(route, p.me))
					switch route {
					case "GET /drafts", "GET /drafts/live", "GET /handoffs", "GET /api/v1/handoffs", "GET /api/v1/drafts":
						if mine.code != http.StatusOK || !strings.Contains(mine.body, p.me.pendingKey) && !strings.Contains(mine.body, p.me.marker) && !strings.Contains(mine.body, p.me.pendingDraft) {
							t.Errorf("%s: %s of their own client: %d, without their lead: %.300s", p.name, route, mine.code, mine.body)
						}
					case "GET /search":
						if mine.code != http.StatusSeeOther {
							t.Errorf("%s: searching their own contact: %d, want 303 to the event", p.name, mine.code)
						}
					}
				case id:
					got := p.b.call(r.Method, fill(route, p.other))
					none := p.b.call(r.Method, fill(route, nowhereOf(p.other)))
					if got.code != http.StatusNotFound {
						t.Errorf("%s: the other client's id: %d %.300s, want 404", p.name, got.code, got.body)
					}
					norm := func(s string, d clientData) string {
						for _, v := range []string{d.client, d.pendingDraft, d.outboxID, d.pendingKey} {
							s = strings.ReplaceAll(s, v, "ID")
						}
						return s
					}
					if a, b := norm(got.body, p.other), norm(none.body, nowhereOf(p.other)); got.code != none.code || a != b {
						t.Errorf("%s: the other client's id answers %d %.200s; an id that does not exist %d %.200s: they must not differ", p.name, got.code, a, none.code, b)
					}
					if r.Method == http.MethodGet {
						if mine := p.b.call(r.Method, fill(route, p.me)); mine.code != http.StatusOK {
							t.Errorf("%s: their own client's id: %d %.200s, want 200", p.name, mine.code, mine.body)
						}
					}
				}
			}
		})
	}
	if seen < len(class) {
		t.Errorf("only %d routes found for %d in the table: a route was removed or renamed", seen, len(class))
	}

	// Both drafts still wait: no refused decision went through.
	for _, d := range []clientData{acme, bolt} {
		if dr, err := e.st.Draft(d.pendingDraft); err != nil || dr.Status != store.DraftPending {
			t.Errorf("draft %s: %v %v, want still pending", d.pendingDraft, dr.Status, err)
		}
	}
	// An admin and a person without clients see both clients.
	for _, b := range []*browser{limitedUser(t, e, "root", store.RoleAdmin, "acme"), limitedUser(t, e, "eve", store.RoleApprover)} {
		got := b.getOK("/drafts")
		if !strings.Contains(got.body, "web-a") || !strings.Contains(got.body, "web-b") {
			t.Errorf("an unlimited person's queue lacks a client's channel: %.300s", got.body)
		}
		if got := b.get("/api/v1/outbox/" + url.PathEscape(bolt.outboxID)); got.code != http.StatusOK {
			t.Errorf("an unlimited person reading bolt's reply: %d", got.code)
		}
	}
}

// TestClientCounts: a limited person's counts are their client's.
func TestClientCounts(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	pending(t, e, "web-a", "a-1", "hello")
	pending(t, e, "web-b", "b-1", "hello")
	pending(t, e, "web-b", "b-2", "hello")
	for _, tt := range []struct {
		vis  store.Visible
		want int
	}{{store.Everything(), 3}, {store.OnlyChannels("web-a"), 1}, {store.OnlyChannels("web-b"), 2}, {store.Visible{}, 0}} {
		c, err := e.st.CountsFor(tt.vis, stuckBefore(e.cfg, e.srv.now()))
		if err != nil {
			t.Fatal(err)
		}
		dc, err := e.st.DraftCountsFor(tt.vis)
		if err != nil {
			t.Fatal(err)
		}
		if c.DraftsWaiting != tt.want || dc[store.DraftPending] != tt.want {
			t.Errorf("%+v: %d waiting, draft counts %d; want %d", tt.vis, c.DraftsWaiting, dc[store.DraftPending], tt.want)
		}
	}
	b := limitedUser(t, e, "ann", store.RoleApprover, "acme")
	if got := b.getOK("/"); !strings.Contains(got.body, `id="nav-drafts-count" class="count">1<`) {
		t.Errorf("acme's approver's navigation does not count 1 waiting draft: %.2000s", got.body)
	}
}

// exportOf downloads an export as b and decodes it.
func exportOf(t *testing.T, b *browser, path string) (int, map[string]any) {
	t.Helper()
	got := b.get(path)
	if got.code != http.StatusOK {
		return got.code, nil
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(got.body), &out); err != nil {
		t.Fatalf("%s: not JSON: %v: %.300s", path, err, got.body)
	}
	return got.code, out
}

// TestClientExport: a client's export holds its leads only, a contact's
// export that contact's only; it is an admin's, after a step-up: an
// approver of the client gets 404 (limited) or 403, and an admin's export
// link without a recent step-up goes to /account/confirm first.
func TestClientExport(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	acme := seedClient(t, e, "acme", "web-a", "a")
	bolt := seedClient(t, e, "bolt", "web-b", "b")
	ann := limitedUser(t, e, "ann", store.RoleApprover, "acme")
	cy := loggedIn(t, e, "cyril", store.RoleApprover, "")
	root := loggedIn(t, e, "root", store.RoleAdmin, "")

	if got := ann.get("/clients/acme/export"); got.code != http.StatusNotFound || strings.Contains(got.body, acme.marker) {
		t.Errorf("acme's limited approver exporting acme: %d, want 404", got.code)
	}
	if got := cy.get("/clients/acme/export"); got.code != http.StatusForbidden || strings.Contains(got.body, acme.marker) {
		t.Errorf("an approver of every client exporting acme: %d, want 403", got.code)
	}
	if p := ann.getOK("/clients"); strings.Contains(p.body, "/clients/acme/export") || strings.Contains(p.body, "/clients/acme/erase") {
		t.Errorf("an approver's clients page offers the export or erase forms")
	}
	// The admin's link asks for the password first, then goes on.
	got := root.get("/clients/acme/export")
	if got.code != http.StatusSeeOther || got.header.Get("Location") != "/account/confirm?next="+url.QueryEscape("/clients/acme/export") {
		t.Fatalf("an admin's export without a step-up: %d to %q, want 303 to /account/confirm", got.code, got.header.Get("Location"))
	}
	root.getOK(got.header.Get("Location"))
	if p := root.post("/account/confirm", url.Values{"current": {"not-it"}, "next": {"/clients/acme/export"}}); p.code != http.StatusForbidden {
		t.Errorf("a step-up with a wrong password: %d, want 403", p.code)
	}
	if p := root.post("/account/confirm", url.Values{"current": {"root-password"}, "next": {"/clients/acme/export"}}); p.code != http.StatusSeeOther || p.header.Get("Location") != "/clients/acme/export" {
		t.Fatalf("a step-up: %d to %q, want 303 back to the export", p.code, p.header.Get("Location"))
	}

	code, all := exportOf(t, root, "/clients/acme/export")
	if code != http.StatusOK {
		t.Fatalf("acme's approver exporting acme: %d", code)
	}
	raw, _ := json.Marshal(all)
	if leads := all["leads"].([]any); len(leads) != 2 {
		t.Errorf("acme's export has %d leads, want 2", len(leads))
	}
	for _, want := range []string{acme.marker + " one", acme.marker + " two", acme.sentKey, acme.outboxID} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("acme's export lacks %q", want)
		}
	}
	for _, leak := range []string{bolt.marker, bolt.channel, bolt.contact} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("acme's export holds bolt's %q", leak)
		}
	}

	code, one := exportOf(t, root, "/clients/acme/export?contact="+url.QueryEscape(acme.contact))
	if code != http.StatusOK {
		t.Fatalf("contact export: %d", code)
	}
	raw, _ = json.Marshal(one)
	leads := one["leads"].([]any)
	if len(leads) != 1 || !bytes.Contains(raw, []byte(acme.marker+" one")) || bytes.Contains(raw, []byte(acme.marker+" two")) {
		t.Errorf("the export of %s: %d leads: %.500s; want that contact's lead alone", acme.contact, len(leads), raw)
	}
	lead := leads[0].(map[string]any)
	if n := len(lead["outbox"].([]any)); n != 1 {
		t.Errorf("the contact's export has %d replies, want 1", n)
	}
	if code, _ := exportOf(t, ann, "/clients/bolt/export"); code != http.StatusNotFound {
		t.Errorf("acme's approver exporting bolt: %d, want 404", code)
	}
	if code, _ := exportOf(t, root, "/clients/acme/export?contact="+url.QueryEscape(bolt.contact)); code != http.StatusOK {
		t.Errorf("acme's export of bolt's contact: %d", code)
	} else if _, got := exportOf(t, root, "/clients/acme/export?contact="+url.QueryEscape(bolt.contact)); len(got["leads"].([]any)) != 0 {
		t.Errorf("acme's export of bolt's contact found leads: %v", got["leads"])
	}
	wantAudit(t, e.st, "root", "step-up", "export")
}

// TestClientErase: erasing a contact removes their words from events,
// drafts, replies and the sandbox, keeps the keys (a redelivered webhook
// is still a duplicate), leaves a lead whose draft waits as it was and
// the other client untouched, is audited, and the file passes Check.
func TestClientErase(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	acme := seedClient(t, e, "acme", "web-a", "a")
	bolt := seedClient(t, e, "bolt", "web-b", "b")
	ann := limitedUser(t, e, "ann", store.RoleApprover, "acme")
	cy := loggedIn(t, e, "cyril", store.RoleApprover, "")
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	ann.getOK("/clients")
	root.getOK("/clients")

	// An approver erases nothing, of their client or any: the attack of
	// the review (an approver erasing another client's contact).
	if got := ann.post("/clients/acme/erase", url.Values{"contact": {acme.contact}, "confirm": {"acme"}}); got.code != http.StatusNotFound {
		t.Errorf("acme's limited approver erasing acme: %d, want 404", got.code)
	}
	if got := cy.post("/clients/bolt/erase", url.Values{"contact": {bolt.contact}, "confirm": {"bolt"}}); got.code != http.StatusForbidden {
		t.Errorf("an approver of every client erasing bolt: %d, want 403", got.code)
	}
	// An admin's erase needs the password again.
	if got := root.post("/clients/acme/erase", url.Values{"contact": {acme.contact}, "confirm": {"acme"}}); got.code != http.StatusForbidden || !strings.Contains(got.body, "password again") {
		t.Errorf("an admin's erase without the password: %d %.200s, want 403", got.code, got.body)
	}
	if got := root.post("/clients/acme/erase", url.Values{"contact": {acme.contact}, "confirm": {"acme"}, "current": {"wrong-password"}}); got.code != http.StatusForbidden {
		t.Errorf("an admin's erase with a wrong password: %d, want 403", got.code)
	}
	for _, k := range []string{acme.sentKey, bolt.sentKey} {
		if ev, err := e.st.EventByKey(k); err != nil || ev.Text == store.Erased {
			t.Fatalf("a refused erase erased %s: %q %v", k, ev.Text, err)
		}
	}
	if got := root.postStepped("/clients/acme/erase", url.Values{"contact": {acme.contact}, "confirm": {"wrong"}}); got.code != http.StatusBadRequest {
		t.Errorf("an erase without the confirmation: %d, want 400", got.code)
	}
	// The step-up above covers the next erase without the password.
	got := root.post("/clients/acme/erase", url.Values{"contact": {acme.contact}, "confirm": {"acme"}})
	if got.code != http.StatusOK || !strings.Contains(got.body, "Erased client acme contact "+acme.contact+": 1 lead, 1 message, 1 draft, 1 reply.") {
		t.Fatalf("erase: %d %.2000s", got.code, got.body)
	}
	ev, err := e.st.EventByKey(acme.sentKey)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Text != store.Erased || ev.Body != nil || ev.Contact != "" || ev.Name != "" {
		t.Errorf("the erased event still holds text %q body %s contact %q name %q", ev.Text, ev.Body, ev.Contact, ev.Name)
	}
	d, err := e.st.DraftByEvent(acme.sentKey)
	if err != nil || d.Text != store.Erased || d.Status != store.DraftApproved {
		t.Errorf("the erased draft: %q %s %v", d.Text, d.Status, err)
	}
	o, err := e.st.OutboxRow(acme.outboxID)
	if err != nil || o.Text != store.Erased || o.To != store.Erased || o.Status != store.OutboxSent {
		t.Errorf("the erased reply: %q to %q %s %v", o.Text, o.To, o.Status, err)
	}
	if m, err := e.st.SandboxLookup(acme.outboxID); err != nil || m.Text != store.Erased {
		t.Errorf("the sandbox's copy: %q %v", m.Text, err)
	}
	var b bytes.Buffer
	if _, err := e.st.Export(&b, store.Subject{Client: "acme", Channels: []string{"web-a"}, Contact: acme.contact}, e.srv.now()); err != nil {
		t.Fatal(err)
	}
	var after struct{ Leads []store.ExportLead }
	if err := json.Unmarshal(b.Bytes(), &after); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), acme.marker) || len(after.Leads) != 1 || after.Leads[0].Lead.Contact != "" || strings.Contains(b.String(), "Person a-1") {
		t.Errorf("after the erase the contact's export still holds their words: %.1500s", b.String())
	}
	// The same webhook again is still known.
	for _, m := range []corpus.Body{
		corpus.MessageAs("fish", "pretty2", "a-1", "", acme.contact),
		corpus.MessageAs("emoji", "python", "a-1", "", acme.contact),
	} {
		code, ans := hookCorpus(t, e, "web-a", m)
		if code != http.StatusOK || ans["status"] != "duplicate" {
			t.Errorf("the redelivered webhook (%s) after the erase: %d %v, want 200 duplicate", m.Name(), code, ans)
		}
	}
	if ev, err := e.st.EventByKey("web-a:a-1"); err != nil || ev.Text != store.Erased {
		t.Errorf("after the redelivery the erased event's text is %q (%v), want it erased still", ev.Text, err)
	}
	// The waiting lead of the same client and everything of bolt stay.
	for _, k := range []string{acme.pendingKey, bolt.sentKey, bolt.pendingKey} {
		if ev, err := e.st.EventByKey(k); err != nil || ev.Text == store.Erased {
			t.Errorf("%s was erased too: %q %v", k, ev.Text, err)
		}
	}
	// The whole client: the waiting lead is busy and left as it was.
	got = root.post("/clients/acme/erase", url.Values{"confirm": {"acme"}})
	if got.code != http.StatusOK || !strings.Contains(got.body, "1 lead was left as it was") {
		t.Errorf("erasing acme with a waiting draft: %d %.2000s", got.code, got.body)
	}
	if ev, err := e.st.EventByKey(acme.pendingKey); err != nil || ev.Text == store.Erased {
		t.Errorf("the busy lead's event was erased: %q %v", ev.Text, err)
	}
	wantAudit(t, e.st, "root", "step-up", "erase", "erase done")
	if err := e.st.Check(); err != nil {
		t.Errorf("Check after the erase: %v", err)
	}
}

// TestClientTokens: a read or approve token limited to a client is held
// to it as a person is; an admin token sees both.
func TestClientTokens(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	acme := seedClient(t, e, "acme", "web-a", "a")
	bolt := seedClient(t, e, "bolt", "web-b", "b")
	addUser(t, e.st, "boss", store.RoleAdmin, "", "boss-password-1")
	token := func(scope store.Scope, clients ...string) http.Header {
		secret := users.NewSecret()
		tok := store.Token{ID: "t-" + secret[:8], Name: string(scope) + "-" + secret[:6], User: "boss", Scope: scope, Clients: clients, CreatedAt: e.srv.now()}
		if err := e.st.CreateToken(context.Background(), users.HashSecret(secret), tok); err != nil {
			t.Fatal(err)
		}
		return http.Header{"Authorization": {"Bearer " + secret}}
	}
	read, appr, adm := token(store.ScopeRead, "acme"), token(store.ScopeApprove, "acme"), token(store.ScopeAdmin, "acme")
	for _, tt := range []struct {
		name   string
		h      http.Header
		method string
		path   string
		want   int
	}{
		{"read, own event", read, http.MethodGet, "/api/v1/events/" + acme.sentKey, http.StatusOK},
		{"read, other's event", read, http.MethodGet, "/api/v1/events/" + bolt.sentKey, http.StatusNotFound},
		{"read, other's reply", read, http.MethodGet, "/api/v1/outbox/" + bolt.outboxID, http.StatusNotFound},
		{"approve, other's draft", appr, http.MethodPost, "/api/v1/drafts/" + bolt.pendingDraft + "/reject", http.StatusNotFound},
		{"admin token ignores its clients", adm, http.MethodGet, "/api/v1/events/" + bolt.sentKey, http.StatusOK},
	} {
		if code, ans := e.do(t, tt.method, tt.path, "application/json", []byte("{}"), tt.h); code != tt.want {
			t.Errorf("%s: %d %v, want %d", tt.name, code, ans, tt.want)
		}
	}
	code, ans := e.do(t, http.MethodGet, "/api/v1/drafts", "", nil, read)
	raw, _ := json.Marshal(ans)
	if code != http.StatusOK || !bytes.Contains(raw, []byte(acme.pendingDraft)) || bytes.Contains(raw, []byte(bolt.pendingDraft)) {
		t.Errorf("an acme read token's drafts: %d %s, want acme's only", code, raw)
	}
	if d, err := e.st.Draft(bolt.pendingDraft); err != nil || d.Status != store.DraftPending {
		t.Errorf("bolt's draft after the refused rejection: %v %v", d.Status, err)
	}
}

// TestUsersFormClients: /users sets and changes a person's clients, and
// refuses an id no client has.
func TestUsersFormClients(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	root.getOK("/users")
	if got := root.post("/users", url.Values{"name": {"ann"}, "role": {"approver"}, "clients": {"acme"}, "password": {"a long passphrase 1"}}); got.code != http.StatusOK {
		t.Fatalf("add ann: %d %.300s", got.code, got.body)
	}
	if u, err := e.st.User("ann"); err != nil || len(u.Clients) != 1 || u.Clients[0] != "acme" {
		t.Errorf("ann's clients: %v %v", u.Clients, err)
	}
	if got := root.post("/users", url.Values{"name": {"zed"}, "role": {"approver"}, "clients": {"zeta"}}); got.code != http.StatusBadRequest || !strings.Contains(got.body, "client &#34;zeta&#34; is not defined") {
		t.Errorf("a person of an unknown client: %d %.3000s", got.code, got.body)
	}
	if got := root.post("/users/ann/role", url.Values{"role": {"approver"}, "clients": {"acme, bolt"}}); got.code != http.StatusOK {
		t.Fatalf("change ann: %d", got.code)
	}
	if u, _ := e.st.User("ann"); strings.Join(u.Clients, ",") != "acme,bolt" {
		t.Errorf("ann's clients after the change: %v", u.Clients)
	}
	wantAudit(t, e.st, "root", "create user", "change user")
}
