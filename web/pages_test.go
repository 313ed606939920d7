package web

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/static"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// browser is a dashboard client: a cookie jar, redirects not followed, and
// the CSRF token read from the last page it rendered.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
	pw   string // the password it logged in with, for a step-up
}

// page is an answer: status, body and headers.
type page struct {
	code   int
	body   string
	header http.Header
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)"`)

func (b *browser) do(method, path string, form url.Values, header http.Header) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	p := page{code: resp.StatusCode, body: string(raw), header: resp.Header}
	if m := csrfMeta.FindStringSubmatch(p.body); m != nil {
		b.csrf = m[1]
	}
	return p
}

func (b *browser) get(path string) page { b.t.Helper(); return b.do(http.MethodGet, path, nil, nil) }

// getOK gets a page that must answer 200, so that a check of what it does
// not show cannot pass on an error page.
func (b *browser) getOK(path string) page {
	b.t.Helper()
	p := b.get(path)
	if p.code != http.StatusOK {
		b.t.Fatalf("GET %s: %d, want 200: %.300s", path, p.code, p.body)
	}
	return p
}

// post sends a form with the CSRF token as the dashboard's forms do.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", b.csrf)
	return b.do(http.MethodPost, path, form, nil)
}

// postStepped posts a form whose action asks for the password again
// (stepup.go), with the password the browser logged in with.
func (b *browser) postStepped(path string, form url.Values) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("current", b.pw)
	return b.post(path, form)
}

// hx posts like htmx: the token in the header, HX-Request set.
func (b *browser) hx(path string, form url.Values) page {
	b.t.Helper()
	return b.do(http.MethodPost, path, form, http.Header{"Hx-Request": {"true"}, "X-Csrf-Token": {b.csrf}})
}

// login logs in through the form and reads the CSRF token from a page.
func (b *browser) login(name, password string) {
	b.t.Helper()
	p := b.do(http.MethodPost, "/login", url.Values{"name": {name}, "password": {password}}, nil)
	if p.code != http.StatusSeeOther {
		b.t.Fatalf("login %s: got %d, want 303: %s", name, p.code, p.body)
	}
	b.pw = password
	if p := b.get("/drafts"); p.code != http.StatusOK || b.csrf == "" {
		b.t.Fatalf("after login, /drafts: %d, csrf %q", p.code, b.csrf)
	}
}

func addUser(t *testing.T, st *store.Store, name string, role store.Role, owner, pw string) {
	t.Helper()
	hash, err := password.Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateUser(context.Background(), store.User{Name: name, Role: role, Owner: owner, PasswordHash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// loggedIn adds a person and returns a browser logged in as them.
func loggedIn(t *testing.T, e *testEnv, name string, role store.Role, owner string) *browser {
	t.Helper()
	addUser(t, e.st, name, role, owner, name+"-password")
	b := newBrowser(t, e.url)
	b.login(name, name+"-password")
	return b
}

// pending records an event on channel and waits for its draft. The
// message is id from id@example.com (its conversation), named "Person
// id", saying text, in a corpus body whose layout id picks (corpus.Message
// with text replaced: pretty, CRLF, Python's, PHP's or Go's escapes ...).
func pending(t *testing.T, e *testEnv, channel, id, text string) store.Draft {
	t.Helper()
	return pendingCorpus(t, e, channel, demoMessage(t, id, "", id+"@example.com", "Person "+id, text))
}

// demoMessage is a demo-channel corpus body of message id of conversation
// conv (when "", the body has none: the conversation is the contact's)
// from contact, named name (none when ""), saying text; id picks its
// layout, deterministically.
func demoMessage(t *testing.T, id, conv, contact, name, text string) corpus.Body {
	t.Helper()
	h := fnv.New32a()
	h.Write([]byte(id))
	b := corpus.Message(int(h.Sum32()%uint32(len(corpus.Texts())*len(corpus.Layouts(corpus.Demo)))), id, conv, contact)
	if conv == "" {
		b = withoutMembers(t, b, "conversation_id")
	}
	if name == "" {
		b = withoutMembers(t, b, "name")
		return withMembers(t, b, "text", text)
	}
	return withMembers(t, b, "name", name, "text", text)
}

// signingSecret is a Standard Webhooks secret: "whsec_" and base64.
const signingSecret = "whsec_c2lnbmluZy1zZWNyZXQtdmFsdWUtNzM="

// pagesConfig is the demo plus a channel whose provider never knows if it
// sent (so replies need reconciling), an http provider and secrets.
func pagesConfig() *config.Config {
	cfg := config.Default()
	amb := cfg.Channels[0]
	amb.Name, amb.Provider = "amb", "amb"
	signed := cfg.Channels[0]
	signed.Name = "signed"
	signed.Signature = &config.Signature{Scheme: "hmac-sha256", Secret: "hmac-secret-value-71", Header: "X-Signature"}
	cfg.Channels = append(cfg.Channels, amb, signed)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "amb", Kind: "sandbox", Fail: "ambiguous", NoLookup: true, Timeout: time.Second},
		config.Provider{Name: "crm", Kind: "http", URL: "https://bot:url-password-72@crm.example/messages", SigningSecret: signingSecret, Timeout: time.Second},
	)
	cfg.Drafter.APIKey = "sk-api-key-value-74"
	cfg.BaseURL = "http://admin:base-url-password-75@127.0.0.1"
	cfg.Routing.Rules = []config.Rule{{When: config.When{TextContains: "refund"}, Owner: "billing"}}
	return cfg
}

// needsReconciliation approves a draft on channel amb and waits until its
// reply needs a person.
func needsReconciliation(t *testing.T, e *testEnv, id string) store.Outbox {
	t.Helper()
	d := pending(t, e, "amb", id, "hello")
	code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", "", nil, http.Header{"Authorization": {"Bearer " + testToken}})
	if code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, ans)
	}
	var o store.Outbox
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		o, err = e.st.OutboxRow(ans["outbox_id"].(string))
		return err == nil && o.Status == store.OutboxNeedsReconciliation
	}, "the reply to need reconciling")
	return o
}

func TestPagesAccess(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, pagesConfig())
	d1 := pending(t, e, "demo", "a1", "first")
	d2 := pending(t, e, "demo", "a2", "second")
	row := needsReconciliation(t, e, "r1")
	if err := e.st.CreateToken(context.Background(), users.HashSecret("tok-1"), store.Token{ID: "T1", Name: "one", User: "boss", Role: store.RoleApprover, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	anon := newBrowser(t, e.url)
	approver := loggedIn(t, e, "ann", store.RoleApprover, "sales")
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	newUser := 0

	const redirect = -1 // logged out: 303 to /login for a GET, 401 for a POST
	tests := []struct {
		method, path string
		form         func() url.Values
		anon, appr   int
		admin        int
	}{
		{"GET", "/", nil, redirect, 200, 200},
		{"GET", "/drafts", nil, redirect, 200, 200},
		{"GET", "/drafts?id=" + d2.ID, nil, redirect, 200, 200},
		{"GET", "/drafts?owner=mine&channel=demo", nil, redirect, 200, 200},
		{"GET", "/handoffs", nil, redirect, 200, 200},
		{"GET", "/handoffs?status=owned&stuck=true", nil, redirect, 200, 200},
		{"GET", "/events/" + url.PathEscape(d1.EventKey), nil, redirect, 200, 200},
		{"GET", "/search?q=" + url.QueryEscape(d1.EventKey), nil, redirect, 303, 303},
		{"GET", "/search?q=nothing-here", nil, redirect, 404, 404},
		{"GET", "/reconcile", nil, redirect, 403, 200},
		{"GET", "/users", nil, redirect, 403, 200},
		{"GET", "/settings", nil, redirect, 403, 200},
		{"GET", "/audit", nil, redirect, 403, 200},
		{"GET", "/login", nil, 200, 303, 303},
		{"GET", static.URL("app.css"), nil, 200, 200, 200},
		{"POST", "/drafts/" + d1.ID + "/approve", func() url.Values { return url.Values{"action": {"approve"}} }, redirect, 303, 303},
		{"POST", "/drafts/" + d2.ID + "/reject", func() url.Values { return url.Values{"reason": {"no"}} }, redirect, 303, 303},
		{"POST", "/reconcile/" + url.PathEscape(row.ID), func() url.Values {
			return url.Values{"outcome": {"sent"}, "provider_id": {"prov-1"}, "checked": {"yes"}}
		}, redirect, 403, 303},
		{"POST", "/users", func() url.Values {
			newUser++
			return url.Values{"name": {fmt.Sprintf("new%d", newUser)}, "role": {"approver"}, "password": {"a-long-password"}}
		}, redirect, 403, 200},
		{"POST", "/users/tokens", func() url.Values {
			return url.Values{"name": {"ci"}, "scope": {"approve"}, "current": {"boss-password"}}
		}, redirect, 403, 200},
		{"POST", "/users/tokens/T1/revoke", nil, redirect, 403, 303},
		{"POST", "/logout", nil, redirect, 303, 303}, // last: it ends the sessions
	}
	for _, tt := range tests {
		for _, who := range []struct {
			name string
			b    *browser
			want int
		}{{"logged out", anon, tt.anon}, {"approver", approver, tt.appr}, {"admin", admin, tt.admin}} {
			t.Run(tt.method+" "+tt.path+" "+who.name, func(t *testing.T) {
				who.b.t = t
				var p page
				if tt.method == http.MethodGet {
					p = who.b.get(tt.path)
				} else {
					var form url.Values
					if tt.form != nil {
						form = tt.form()
					}
					p = who.b.post(tt.path, form)
				}
				want := who.want
				if want == redirect {
					want = http.StatusSeeOther
					if tt.method == http.MethodPost {
						want = http.StatusUnauthorized
					}
				}
				if p.code != want {
					t.Fatalf("got %d, want %d: %.300s", p.code, want, p.body)
				}
				if who.want == redirect && tt.method == http.MethodGet && !strings.HasPrefix(p.header.Get("Location"), "/login?next=") {
					t.Errorf("redirected to %q, want /login?next=…", p.header.Get("Location"))
				}
				if p.code == http.StatusOK && tt.method == http.MethodGet && !strings.HasPrefix(tt.path, "/static/") {
					if ct := p.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
						t.Errorf("Content-Type %q, want text/html", ct)
					}
				}
			})
		}
	}
	if o, _ := e.st.OutboxRow(row.ID); o.Status != store.OutboxSent || o.ProviderID != "prov-1" {
		t.Errorf("reconciled row: %s %q, want sent prov-1", o.Status, o.ProviderID)
	}
	if d, _ := e.st.Draft(d1.ID); d.Decision == nil || d.Decision.By != "ann" {
		t.Errorf("draft 1 decision %+v, want approved by ann (the admin's approval was the idempotent repeat)", d.Decision)
	}
}

func TestForbiddenPageIsHTML(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.do(http.MethodGet, "/settings", nil, http.Header{"Accept": {"text/html,application/xhtml+xml"}})
	if p.code != http.StatusForbidden || !strings.Contains(p.body, "only an admin may do this") || !strings.Contains(p.header.Get("Content-Type"), "text/html") {
		t.Errorf("got %d %q: %.300s, want a 403 page saying only an admin may", p.code, p.header.Get("Content-Type"), p.body)
	}
	if strings.Contains(p.body, `href="/settings"`) {
		t.Error("the error page links to an admin page")
	}
	dash := b.getOK("/drafts")
	for _, admin := range []string{`href="/users"`, `href="/settings"`, `href="/reconcile"`, `href="/audit"`, `href="/dead-letters"`, `href="/backups"`} {
		if strings.Contains(dash.body, admin) {
			t.Errorf("an approver's navigation links to %s", admin)
		}
	}
	if !strings.Contains(dash.body, "ann") || !strings.Contains(dash.body, "approver") {
		t.Error("the layout does not show who is logged in and their role")
	}
}

// TestCrossSiteAndCSRF: an approval posted cross-site, from a foreign
// origin, or without the session's CSRF token is refused and leaves the
// draft waiting; the same session's own post approves it. The drafts are
// of corpus messages (pretty with markup, compact with emoji, RTL with
// Python's escapes).
func TestCrossSiteAndCSRF(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	for _, m := range []corpus.Body{
		corpus.MessageAs("fish", "pretty2", "x1", "", "x1@example.com"),
		corpus.MessageAs("emoji", "compact", "x2", "", "x2@example.com"),
		corpus.MessageAs("arabic", "python", "x3", "", "x3@example.com"),
	} {
		d := pendingCorpus(t, e, "demo", m)
		path := "/drafts/" + d.ID + "/approve"
		tests := []struct {
			name   string
			header http.Header
			form   url.Values
		}{
			{"Sec-Fetch-Site cross-site", http.Header{"Sec-Fetch-Site": {"cross-site"}, "X-Csrf-Token": {b.csrf}}, url.Values{"csrf": {b.csrf}}},
			{"foreign Origin", http.Header{"Origin": {"https://evil.example"}, "X-Csrf-Token": {b.csrf}}, url.Values{"csrf": {b.csrf}}},
			{"no CSRF token", nil, url.Values{"action": {"approve"}}},
			{"wrong CSRF token", http.Header{"X-Csrf-Token": {"not-the-token"}}, nil},
		}
		for _, tt := range tests {
			t.Run(m.Name()+"/"+tt.name, func(t *testing.T) {
				b.t = t
				form := tt.form
				if form == nil {
					form = url.Values{}
				}
				if p := b.do(http.MethodPost, path, form, tt.header); p.code != http.StatusForbidden {
					t.Errorf("got %d, want 403: %.200s", p.code, p.body)
				}
			})
		}
		b.t = t
		got, err := e.st.Draft(d.ID)
		if err != nil || got.Status != store.DraftPending || got.OutboxID != "" {
			t.Fatalf("%s: draft after refused posts: %+v %v, want still pending", m.Name(), got, err)
		}
		// The same session and token from this site are accepted.
		if p := b.hx(path, url.Values{"action": {"approve"}}); p.code != http.StatusOK {
			t.Fatalf("%s: same-site approval: %d %.200s", m.Name(), p.code, p.body)
		}
	}
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	addUser(t, e.st, "ann", store.RoleApprover, "", "right-password")
	b := newBrowser(t, e.url)
	for i := 1; i <= 5; i++ {
		p := b.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"wrong-password"}}, nil)
		if p.code != http.StatusUnauthorized || !strings.Contains(p.body, "the name or password is wrong") {
			t.Fatalf("wrong password %d: got %d %.200s", i, p.code, p.body)
		}
	}
	p := b.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"wrong-password"}}, nil)
	if p.code != http.StatusTooManyRequests || !strings.Contains(p.body, "too many failed logins") {
		t.Fatalf("6th wrong password: got %d %.200s, want 429", p.code, p.body)
	}
	p = b.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"right-password"}}, nil)
	if p.code != http.StatusTooManyRequests || p.header.Get("Set-Cookie") != "" {
		t.Fatalf("right password while blocked: got %d (cookie %q), want 429 and no session", p.code, p.header.Get("Set-Cookie"))
	}
	// An unknown name gets the same sentence as a wrong password.
	p = b.do(http.MethodPost, "/login", url.Values{"name": {"nobody"}, "password": {"whatever-pass"}}, nil)
	if p.code != http.StatusUnauthorized || !strings.Contains(p.body, "the name or password is wrong") {
		t.Fatalf("unknown name: got %d %.200s", p.code, p.body)
	}
}

func TestLoginNext(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	addUser(t, e.st, "ann", store.RoleApprover, "", "right-password")
	tests := []struct{ next, want string }{
		{"/handoffs?status=owned", "/handoffs?status=owned"},
		{"", "/"},
		{"//evil.example/x", "/"},
		{"https://evil.example/", "/"},
		{"/\\evil.example", "/"},
		{"drafts", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.next, func(t *testing.T) {
			b := newBrowser(t, e.url)
			p := b.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"right-password"}, "next": {tt.next}}, nil)
			if p.code != http.StatusSeeOther || p.header.Get("Location") != tt.want {
				t.Errorf("got %d to %q, want 303 to %q", p.code, p.header.Get("Location"), tt.want)
			}
		})
	}
	// The login form carries next from the redirect that sent the person there.
	b := newBrowser(t, e.url)
	p := b.get("/handoffs?stuck=true")
	if loc := p.header.Get("Location"); loc != "/login?next="+url.QueryEscape("/handoffs?stuck=true") {
		t.Fatalf("logged out GET went to %q", loc)
	}
	if form := b.get(p.header.Get("Location")); !strings.Contains(form.body, `value="/handoffs?stuck=true"`) {
		t.Errorf("the login form lost next: %.500s", form.body)
	}
}

// clock is a time a test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSessionIdleExpiry(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	clk := &clock{t: time.Now()}
	srv, err := New(Deps{Config: e.cfg, Store: e.st, Jobs: e.runner, Logger: discardLogger(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	addUser(t, e.st, "ann", store.RoleApprover, "", "right-password")
	b := newBrowser(t, hs.URL)
	b.login("ann", "right-password")

	clk.Add(11 * time.Hour) // active within the idle limit: still in, and the session is touched
	if p := b.get("/"); p.code != http.StatusOK {
		t.Fatalf("after 11h: got %d, want 200", p.code)
	}
	clk.Add(11 * time.Hour)
	if p := b.get("/"); p.code != http.StatusOK {
		t.Fatalf("11h after the last request: got %d, want 200", p.code)
	}
	clk.Add(13 * time.Hour)
	p := b.get("/drafts")
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/login") {
		t.Fatalf("13h idle: got %d to %q, want 303 to /login", p.code, p.header.Get("Location"))
	}
	if p := b.post("/drafts/dx/approve", nil); p.code != http.StatusUnauthorized {
		t.Errorf("POST with an expired session: got %d, want 401", p.code)
	}
}

func TestLogoutEndsSession(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	u, _ := url.Parse(e.url)
	old := b.c.Jar.Cookies(u)
	if len(old) != 1 || old[0].Name != sessionCookie {
		t.Fatalf("cookies after login: %v", old)
	}
	p := b.post("/logout", nil)
	if p.code != http.StatusSeeOther || p.header.Get("Location") != "/login" {
		t.Fatalf("logout: got %d to %q", p.code, p.header.Get("Location"))
	}
	if !strings.Contains(p.header.Get("Set-Cookie"), sessionCookie+"=;") {
		t.Errorf("logout did not clear the cookie: %q", p.header.Get("Set-Cookie"))
	}
	// The old cookie, replayed, no longer opens anything.
	replay := newBrowser(t, e.url)
	replay.c.Jar.SetCookies(u, old)
	if p := replay.get("/drafts"); p.code != http.StatusSeeOther {
		t.Errorf("old cookie after logout: got %d, want 303 to /login", p.code)
	}
	if p := replay.do(http.MethodGet, "/api/v1/handoffs", nil, nil); p.code != http.StatusUnauthorized {
		t.Errorf("old cookie on the API after logout: got %d, want 401", p.code)
	}
}

var secretValue = regexp.MustCompile(`<code class="secret-value">([^<]*)</code>`)

func TestTokenRevocation(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	p := admin.postStepped("/users/tokens", url.Values{"name": {"n8n"}, "scope": {"approve"}})
	m := secretValue.FindStringSubmatch(p.body)
	if p.code != http.StatusOK || m == nil {
		t.Fatalf("create token: %d %.300s", p.code, p.body)
	}
	secret := html.UnescapeString(m[1])
	if again := admin.getOK("/users"); strings.Contains(again.body, secret) {
		t.Error("the token's secret is shown a second time")
	}
	toks, err := e.st.Tokens()
	if err != nil || len(toks) != 1 || toks[0].Name != "n8n" || toks[0].User != "boss" || toks[0].Scope != store.ScopeApprove {
		t.Fatalf("tokens %+v %v", toks, err)
	}
	bearer := http.Header{"Authorization": {"Bearer " + secret}}
	if code, ans := e.do(t, http.MethodGet, "/api/v1/handoffs", "", nil, bearer); code != http.StatusOK {
		t.Fatalf("new token: %d %v", code, ans)
	}
	if p := admin.post("/users/tokens/"+toks[0].ID+"/revoke", nil); p.code != http.StatusSeeOther {
		t.Fatalf("revoke: %d %.200s", p.code, p.body)
	}
	if code, _ := e.do(t, http.MethodGet, "/api/v1/handoffs", "", nil, bearer); code != http.StatusUnauthorized {
		t.Fatalf("revoked token: got %d, want 401", code)
	}
	if p := admin.get("/users?revoked=" + toks[0].ID); !strings.Contains(p.body, "Token n8n is revoked") {
		t.Errorf("no revocation notice: %.300s", p.body)
	}
	wantAudit(t, e.st, "boss", "create token", "revoke token")
}

// wantAudit checks that who did each action, from an address.
func wantAudit(t *testing.T, st *store.Store, who string, actions ...string) {
	t.Helper()
	log, err := st.AuditLog(200)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		found := false
		for _, en := range log {
			found = found || (en.Action == a && en.Who == who && en.From != "")
		}
		if !found {
			t.Errorf("no audit entry %q by %s with an address in %+v", a, who, log)
		}
	}
}

func TestUsersPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	p := admin.post("/users", url.Values{"name": {"dana"}, "role": {"approver"}, "owner": {"billing"}})
	m := secretValue.FindStringSubmatch(p.body)
	if p.code != http.StatusOK || m == nil {
		t.Fatalf("add with a generated password: %d %.300s", p.code, p.body)
	}
	dana := newBrowser(t, e.url)
	dana.login("dana", html.UnescapeString(m[1]))
	if u, err := e.st.User("dana"); err != nil || u.Owner != "billing" || u.Role != store.RoleApprover {
		t.Errorf("stored user %+v %v", u, err)
	}
	tests := []struct {
		name string
		form url.Values
		code int
		want string
	}{
		{"taken", url.Values{"name": {"dana"}, "role": {"approver"}}, 409, "already a person named dana"},
		{"short password", url.Values{"name": {"eli"}, "role": {"approver"}, "password": {"short"}}, 400, "at least 12"},
		{"bad role", url.Values{"name": {"eli"}, "role": {"root"}}, 400, "admin or approver"},
		{"bad name", url.Values{"name": {"a b"}, "role": {"approver"}}, 400, "A name is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admin.t = t
			if p := admin.post("/users", tt.form); p.code != tt.code || !strings.Contains(p.body, tt.want) {
				t.Errorf("got %d, want %d with %q: %.300s", p.code, tt.code, tt.want, p.body)
			}
		})
	}
	admin.t = t
	wantAudit(t, e.st, "boss", "create user")
}

func TestConcurrentDashboardApprovals(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	d := pending(t, e, "demo", "race", "who gets it")
	people := make([]*browser, 4)
	for i := range people {
		people[i] = loggedIn(t, e, fmt.Sprintf("person%d", i), store.RoleApprover, "")
	}
	const n = 20
	start := make(chan struct{})
	answers := make([]page, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := people[i%len(people)]
			<-start
			answers[i] = b.do(http.MethodPost, "/drafts/"+d.ID+"/approve", url.Values{"action": {"approve"}},
				http.Header{"Hx-Request": {"true"}, "X-Csrf-Token": {b.csrf}})
		}()
	}
	close(start)
	wg.Wait()

	got, err := e.st.Draft(d.ID)
	if err != nil || got.Decision == nil || got.OutboxID == "" {
		t.Fatalf("draft after the race: %+v %v", got, err)
	}
	winner := got.Decision.By
	fresh := 0
	for i, a := range answers {
		if a.code != http.StatusOK {
			t.Errorf("answer %d: %d %.200s", i, a.code, a.body)
		}
		if !strings.Contains(a.body, "pproved by "+winner+" at") {
			t.Errorf("answer %d does not name the approver %s: %.400s", i, winner, a.body)
		}
		if strings.Contains(a.body, "is on its way") {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d answers say they approved it, want exactly 1", fresh)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		o, err := e.st.OutboxRow(got.OutboxID)
		return err == nil && o.Status == store.OutboxSent
	}, "the reply to be sent")
	rows := 0
	for _, st := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending, store.OutboxSent, store.OutboxNeedsReconciliation, store.OutboxFailed} {
		os, err := e.st.OutboxByStatus(st, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range os {
			if o.DraftID == d.ID {
				rows++
			}
		}
	}
	var jobs []store.Job
	err = e.st.View(func(tx *store.Tx) (err error) { jobs, err = tx.JobsByCorrelation(d.CorrelationID); return err })
	if err != nil {
		t.Fatal(err)
	}
	deliver := 0
	for _, j := range jobs {
		if j.Kind == store.KindDeliver {
			deliver++
		}
	}
	if rows != 1 || deliver != 1 {
		t.Errorf("%d outbox rows and %d deliver jobs, want 1 and 1", rows, deliver)
	}
}

var cardDraft = regexp.MustCompile(`<section id="card" class="card[^"]*" data-draft="([^"]*)"`)

func TestQueueAdvances(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	d1 := pending(t, e, "demo", "q1", "first message")
	d2 := pending(t, e, "demo", "q2", "second message")
	d3 := pending(t, e, "demo", "q3", "third message")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")

	p := b.get("/drafts")
	if m := cardDraft.FindStringSubmatch(p.body); m == nil || m[1] != d1.ID {
		t.Fatalf("the queue opens on %v, want the oldest %s", m, d1.ID)
	}
	for _, want := range []string{"first message", "Person q1", "q1@example.com", d1.Text, "second message"} {
		if !strings.Contains(p.body, html.EscapeString(want)) {
			t.Errorf("the queue page lacks %q", want)
		}
	}
	for _, want := range []string{`id="queue-list"`, "<kbd>j</kbd>", `id="draft-text"`, `id="reject-reason"`, `hx-post="/drafts/` + d1.ID + `/approve"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the queue page lacks %s", want)
		}
	}

	// Edit and approve: the answer is the next card, the list and count out of band.
	p = b.hx("/drafts/"+d1.ID+"/approve", url.Values{"action": {"edit"}, "text": {"  An edited reply.  "}})
	if m := cardDraft.FindStringSubmatch(p.body); p.code != 200 || m == nil || m[1] != d2.ID {
		t.Fatalf("after approving the first: %d, card %v, want %s: %.300s", p.code, m, d2.ID, p.body)
	}
	if !strings.Contains(p.body, `id="queue-list" class="queue-list" hx-swap-oob="true"`) || !strings.Contains(p.body, `id="nav-drafts-count" hx-swap-oob="true"`) {
		t.Error("the answer does not refresh the list and the count out of band")
	}
	if got, _ := e.st.Draft(d1.ID); got.Decision == nil || got.Decision.Text != "An edited reply." || !got.Decision.Edited {
		t.Errorf("edited approval stored %+v", got.Decision)
	}

	// Reject with a reason: the next card is the third.
	p = b.hx("/drafts/"+d2.ID+"/reject", url.Values{"reason": {"spam"}})
	if m := cardDraft.FindStringSubmatch(p.body); p.code != 200 || m == nil || m[1] != d3.ID {
		t.Fatalf("after rejecting the second: %d, card %v, want %s", p.code, m, d3.ID)
	}
	if got, _ := e.st.Draft(d2.ID); got.Status != store.DraftRejected || got.Decision.Reason != "spam" {
		t.Errorf("rejection stored %+v", got)
	}
	// The same person rejecting it again (a second tab): the flash says it
	// was already rejected, and the first reason stands.
	p = b.hx("/drafts/"+d2.ID+"/reject", url.Values{"reason": {"twice"}})
	if m := cardDraft.FindStringSubmatch(p.body); p.code != 200 || m == nil || m[1] != d2.ID || !strings.Contains(p.body, "Already rejected by ann") || !strings.Contains(p.body, "Reason: spam") {
		t.Errorf("rejecting again: %d, card %v, want %s's card saying it was already rejected by ann: %.400s", p.code, m, d2.ID, p.body)
	}
	if got, _ := e.st.Draft(d2.ID); got.Decision.Reason != "spam" {
		t.Errorf("a second rejection changed the decision to %+v", got.Decision)
	}

	// Approving a rejected draft is a conflict that names the decision.
	p = b.hx("/drafts/"+d2.ID+"/approve", url.Values{"action": {"approve"}})
	if p.code != http.StatusConflict || !strings.Contains(p.body, "already rejected by ann") || !strings.Contains(p.body, `id="card-next"`) {
		t.Errorf("approve after reject: %d %.400s", p.code, p.body)
	}
	// An empty edit is refused and changes nothing.
	if p := b.hx("/drafts/"+d3.ID+"/approve", url.Values{"action": {"edit"}, "text": {"   "}}); p.code != http.StatusBadRequest || p.header.Get("HX-Retarget") != "#flash" {
		t.Errorf("empty edit: %d (retarget %q)", p.code, p.header.Get("HX-Retarget"))
	}
	// The last one: the queue is empty afterwards.
	p = b.hx("/drafts/"+d3.ID+"/approve", url.Values{"action": {"approve"}})
	if p.code != 200 || !strings.Contains(p.body, "Nothing is waiting for approval") {
		t.Errorf("after the last: %d %.300s", p.code, p.body)
	}
	// Without htmx, a decision goes back to the queue.
	d4 := pending(t, e, "demo", "q4", "fourth")
	if p := b.post("/drafts/"+d4.ID+"/approve", url.Values{"action": {"approve"}, "owner": {"mine"}}); p.code != http.StatusSeeOther || p.header.Get("Location") != "/drafts?owner=mine" {
		t.Errorf("plain form post: %d to %q", p.code, p.header.Get("Location"))
	}
}

func TestQueueFilterPages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, pagesConfig())
	var billing, all []string
	for i := range 7 {
		text := "hello"
		if i%3 == 0 {
			text = "I want a refund"
		}
		d := pending(t, e, "demo", fmt.Sprintf("f%d", i), text)
		all = append(all, d.ID)
		if i%3 == 0 {
			billing = append(billing, d.ID)
		}
	}
	srv, err := New(Deps{Config: e.cfg, Store: e.st, Jobs: e.runner, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	me := &principal{Caller: users.Caller{Name: "ann", Owner: "billing"}}
	walk := func(owner, channel string, n int) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for range 20 {
			v, err := newQueueView(me, owner, channel, cursor)
			if err != nil {
				t.Fatal(err)
			}
			page, next, _, err := srv.pendingPage(v, n)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page {
				ids = append(ids, d.ID)
			}
			if next == nil {
				return ids
			}
			cursor = base64.RawURLEncoding.EncodeToString(next)
		}
		t.Fatal("the pages never end")
		return nil
	}
	tests := []struct {
		name, owner, channel string
		n                    int
		want                 []string
	}{
		{"all, pages of 3", "", "", 3, all},
		{"all, pages of 1", "", "", 1, all},
		{"billing, pages of 1", "billing", "", 1, billing},
		{"billing, pages of 2", "billing", "", 2, billing},
		{"mine is billing", "mine", "", 2, billing},
		{"channel demo", "", "demo", 4, all},
		{"channel amb", "", "amb", 4, nil},
		{"nobody's", "support", "", 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := walk(tt.owner, tt.channel, tt.n); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %v, want %v (oldest first, each once)", got, tt.want)
			}
		})
	}
	if _, err := newQueueView(me, "", "", "bm90LWEtY3Vyc29y"); err == nil {
		t.Error("a cursor the queue did not give out was accepted")
	}

	b := loggedIn(t, e, "bea", store.RoleApprover, "billing")
	p := b.get("/drafts?owner=mine")
	if m := cardDraft.FindStringSubmatch(p.body); m == nil || m[1] != billing[0] {
		t.Errorf("mine opens on %v, want %s", m, billing[0])
	}
	if n := strings.Count(p.body, "<li class=\""); n != len(billing) {
		t.Errorf("mine lists %d drafts, want %d", n, len(billing))
	}
	if p := b.get("/drafts?cursor=nope!"); p.code != http.StatusBadRequest {
		t.Errorf("a bad cursor: got %d, want 400", p.code)
	}
}

func TestTimelinePage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, pagesConfig())
	o := needsReconciliation(t, e, "t/1 x")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.get(views.EventURL(o.EventKey))
	if p.code != http.StatusOK {
		t.Fatalf("timeline: %d %.300s", p.code, p.body)
	}
	d, err := e.st.DraftByEvent(o.EventKey)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.Job
	err = e.st.View(func(tx *store.Tx) (err error) { jobs, err = tx.JobsByCorrelation(d.CorrelationID); return err })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"amb:t/1 x", d.CorrelationID, d.ID, d.InputHash, "Prompt version", "Approved by api-token", o.ID, "needs_reconciliation",
		"Provider send: ambiguous", "Lead owned", "configured to fail with 503"}
	for _, j := range jobs {
		for _, a := range j.Attempts {
			want = append(want, a.ExecutionID)
		}
	}
	for _, w := range want {
		if !strings.Contains(p.body, html.EscapeString(w)) {
			t.Errorf("the timeline lacks %q", w)
		}
	}
	if p := b.get("/events/amb:none"); p.code != http.StatusNotFound {
		t.Errorf("unknown event: %d", p.code)
	}
	// Search finds the event by key, draft id and outbox id.
	for _, q := range []string{o.EventKey, d.ID, o.ID} {
		if p := b.get("/search?q=" + url.QueryEscape(q)); p.code != http.StatusSeeOther || p.header.Get("Location") != views.EventURL(o.EventKey) {
			t.Errorf("search %q: %d to %q", q, p.code, p.header.Get("Location"))
		}
	}
	if p := b.get("/search?q=zzz"); p.code != http.StatusNotFound || !strings.Contains(p.body, "Nothing found") {
		t.Errorf("search for nothing: %d", p.code)
	}
}

func TestReconcilePage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, pagesConfig())
	o := needsReconciliation(t, e, "rc")
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	p := admin.get("/reconcile")
	for _, w := range []string{o.ID, o.To, o.Text, "configured to fail with 503", "I checked with the provider"} {
		if !strings.Contains(p.body, html.EscapeString(w)) {
			t.Errorf("the reconcile page lacks %q", w)
		}
	}
	path := "/reconcile/" + url.PathEscape(o.ID)
	if p := admin.post(path, url.Values{"outcome": {"not_sent"}}); p.code != http.StatusBadRequest {
		t.Errorf("without the checkbox: %d, want 400", p.code)
	}
	if p := admin.post(path, url.Values{"outcome": {"sent"}, "checked": {"yes"}}); p.code != http.StatusBadRequest {
		t.Errorf("sent without a provider id: %d, want 400", p.code)
	}
	if got, _ := e.st.OutboxRow(o.ID); got.Status != store.OutboxNeedsReconciliation {
		t.Fatalf("refused verdicts changed the row to %s", got.Status)
	}
	p = admin.post(path, url.Values{"outcome": {"not_sent"}, "checked": {"yes"}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("requeue: %d %.200s", p.code, p.body)
	}
	if p := admin.get(p.header.Get("Location")); !strings.Contains(p.body, "was queued again by boss") {
		t.Errorf("no outcome notice: %.300s", p.body)
	}
	if p := admin.post(path, url.Values{"outcome": {"not_sent"}, "checked": {"yes"}}); p.code != http.StatusConflict && p.code != http.StatusSeeOther {
		t.Errorf("a second verdict: %d", p.code)
	}
	wantAudit(t, e.st, "boss", "reconcile")
}

func TestSettingsHideSecrets(t *testing.T) {
	t.Parallel()
	cfg := pagesConfig()
	e := newTestEnv(t, cfg)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	p := admin.get("/settings")
	if p.code != http.StatusOK {
		t.Fatalf("settings: %d", p.code)
	}
	for _, secret := range []string{"hmac-secret-value-71", "url-password-72", signingSecret, "c2lnbmluZy1zZWNyZXQtdmFsdWUtNzM", "sk-api-key-value-74", "base-url-password-75"} {
		if strings.Contains(p.body, secret) {
			t.Errorf("the settings page shows the secret %q", secret)
		}
	}
	for _, w := range []string{"signed", "hmac-sha256", "set (hidden)", "crm.example", "refund", "billing", "0 * * * *"} {
		if !strings.Contains(p.body, html.EscapeString(w)) {
			t.Errorf("the settings page lacks %q", w)
		}
	}
	for _, w := range cfg.Warnings() {
		if !strings.Contains(p.body, html.EscapeString(w)) {
			t.Errorf("the settings page lacks the warning %q", w)
		}
	}
}

func TestStaticFiles(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	dash := b.get("/drafts")
	for _, name := range []string{"app.css", "app.js", "htmx.min.js"} {
		u := static.URL(name)
		if !strings.Contains(dash.body, u) {
			t.Errorf("the layout does not link %s", u)
		}
		p := b.get(u)
		if p.code != http.StatusOK || p.header.Get("Cache-Control") != "public, max-age=31536000, immutable" || len(p.body) == 0 {
			t.Errorf("%s: %d %q", u, p.code, p.header.Get("Cache-Control"))
		}
	}
	if ct := b.get(static.URL("app.css")).header.Get("Content-Type"); !strings.HasPrefix(ct, "text/css") {
		t.Errorf("app.css is served as %q", ct)
	}
	if p := b.get("/static/app.css"); p.code != http.StatusNotFound {
		t.Errorf("an unhashed name: %d, want 404", p.code)
	}
	if csp := dash.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("pages carry CSP %q", csp)
	}
}

// TestHandoffsPage: the handoffs page lists each owned lead (of a corpus
// message: pretty with markup, PHP's escapes with Hebrew), as stuck only
// once it has been owned longer than stuck.owned, with its timeline link;
// the overview lists it then too; bad filters are refused.
func TestHandoffsPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	var ds []store.Draft
	for _, m := range []corpus.Body{
		corpus.MessageAs("fish", "pretty2", "h1", "", "h1@example.com"),
		corpus.MessageAs("hebrew", "php", "h2", "", "h2@example.com"),
	} {
		ds = append(ds, pendingCorpus(t, e, "demo", m))
	}
	clk := &clock{t: time.Now().Add(time.Hour)} // an hour on: the owned lead is not yet stuck (4h)
	srv, err := New(Deps{Config: e.cfg, Store: e.st, Jobs: e.runner, Logger: discardLogger(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	addUser(t, e.st, "ann", store.RoleApprover, "", "right-password")
	b := newBrowser(t, hs.URL)
	b.login("ann", "right-password")
	for _, d := range ds {
		lead := store.LeadKey(d.Channel, d.ConversationID)
		if p := b.get("/handoffs?status=owned"); !strings.Contains(p.body, lead) || strings.Contains(p.body, ">stuck</span>") {
			t.Errorf("owned tab: %d, want the lead %s, not stuck: %.400s", p.code, lead, p.body)
		}
		if p := b.getOK("/handoffs?stuck=true"); strings.Contains(p.body, lead) {
			t.Errorf("a lead an hour in owned (%s) is listed as stuck", lead)
		}
	}
	clk.Add(4 * time.Hour)
	for _, d := range ds {
		lead := store.LeadKey(d.Channel, d.ConversationID)
		p := b.get("/handoffs?stuck=true")
		if !strings.Contains(p.body, lead) || !strings.Contains(p.body, ">stuck</span>") || !strings.Contains(p.body, views.EventURL(d.EventKey)) {
			t.Errorf("after 5h: the lead %s is not listed as stuck with its timeline link: %.500s", lead, p.body)
		}
		if p := b.get("/"); !strings.Contains(p.body, lead) {
			t.Errorf("the overview does not list the stuck lead %s", lead)
		}
	}
	for _, bad := range []string{"/handoffs?status=lost", "/handoffs?stuck=maybe", "/handoffs?status=replied&stuck=true"} {
		if p := b.get(bad); p.code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, p.code)
		}
	}
}
