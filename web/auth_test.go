package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// TestLoginRateLimitParallel: twenty wrong passwords for one name, all
// released at once, get at most five "wrong" answers; the rest are refused
// before any password is compared.
func TestLoginRateLimitParallel(t *testing.T) {
	e := newTestEnv(t, nil)
	addUser(t, e.st, "ann", store.RoleApprover, "", "right-password")
	const n = 20
	codes := make([]int, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		b := newBrowser(t, e.url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i] = b.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"wrong-password"}}, nil).code
		}()
	}
	close(start)
	wg.Wait()
	wrong, limited := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusUnauthorized:
			wrong++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Errorf("a parallel login got %d", c)
		}
	}
	if wrong > 5 || wrong+limited != n {
		t.Errorf("%d answers said wrong password and %d were limited; want at most 5 compared", wrong, limited)
	}
}

// TestFailedLoginKeepsNoTypedName: a name that is no user (perhaps a
// password typed in the wrong field) is not written to the audit log.
func TestFailedLoginKeepsNoTypedName(t *testing.T) {
	e := newTestEnv(t, nil)
	b := newBrowser(t, e.url)
	const typed = "MySecretPassw0rd!"
	if p := b.do(http.MethodPost, "/login", url.Values{"name": {typed}, "password": {"x"}}, nil); p.code != http.StatusUnauthorized {
		t.Fatalf("got %d, want 401", p.code)
	}
	log, err := e.st.AuditLog(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != "login failed" || strings.Contains(log[0].Who, typed) {
		t.Errorf("audit %+v; want one failed login that does not hold %q", log, typed)
	}
}

// TestFormBodiesAreBounded: the dashboard refuses multipart bodies and forms
// over 64 KiB before parsing them; nothing changes.
func TestFormBodiesAreBounded(t *testing.T) {
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	d := pending(t, e, "demo", "big-1", "hello")
	big := b.post("/drafts/"+d.ID+"/approve", url.Values{"text": {strings.Repeat("x", maxFormBody+1)}})
	if big.code != http.StatusRequestEntityTooLarge && big.code != http.StatusForbidden && big.code != http.StatusBadRequest {
		t.Errorf("an oversize form got %d, want it refused", big.code)
	}
	multi := b.do(http.MethodPost, "/login", nil, http.Header{"Content-Type": {"multipart/form-data; boundary=x"}})
	if multi.code != http.StatusUnsupportedMediaType {
		t.Errorf("a multipart login got %d, want 415", multi.code)
	}
	got, err := e.st.Draft(d.ID)
	if err != nil || got.Status != store.DraftPending {
		t.Errorf("draft after refused requests: %s, %v; want still pending", got.Status, err)
	}
}

// TestAPISessionNeedsCSRFHeader: a session may use the JSON API, but an
// unsafe call must carry X-CSRF-Token; a csrf form field is not enough.
func TestAPISessionNeedsCSRFHeader(t *testing.T) {
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	d := pending(t, e, "demo", "api-csrf-1", "hello")
	p := b.do(http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", url.Values{"csrf": {b.csrf}}, nil)
	if p.code != http.StatusForbidden {
		t.Errorf("session API approve with the token only as a form field got %d, want 403", p.code)
	}
	if got, _ := e.st.Draft(d.ID); got.Status != store.DraftPending {
		t.Fatalf("the refused call approved the draft")
	}
	p = b.do(http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", nil, http.Header{"X-Csrf-Token": {b.csrf}})
	if p.code != http.StatusOK {
		t.Errorf("session API approve with the header got %d %.200s, want 200", p.code, p.body)
	}
}

// proxiedConfig trusts the test's own loopback peer as a reverse proxy, so
// that X-Forwarded-For names the client address of each request.
func proxiedConfig() *config.Config {
	cfg := config.Default()
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	return cfg
}

// from is the header of a request forwarded for addr.
func from(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }

func loginFrom(b *browser, addr, name, pw string) page {
	b.t.Helper()
	return b.do(http.MethodPost, "/login", url.Values{"name": {name}, "password": {pw}}, from(addr))
}

// TestLockoutCannotBeAimed: a stranger who fails for "boss" from one
// address is refused after five tries and slowed from others, and the
// right password from a second address still logs in; an admin can lift
// the stranger's lockout, and that is audited.
func TestLockoutCannotBeAimed(t *testing.T) {
	t.Parallel()
	// A clock that stands still: the back-off does not end mid-test
	// however slow the password comparisons are.
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, proxiedConfig(), envOptions{now: clk.Now})
	addUser(t, e.st, "boss", store.RoleAdmin, "", "right-password-1")
	stranger := newBrowser(t, e.url)
	for i := 1; i <= users.LoginPerPair; i++ {
		if p := loginFrom(stranger, "198.51.100.7", "boss", "wrong-password"); p.code != http.StatusUnauthorized {
			t.Fatalf("stranger's wrong password %d: %d %.200s", i, p.code, p.body)
		}
	}
	p := loginFrom(stranger, "198.51.100.7", "boss", "wrong-password")
	if p.code != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
		t.Fatalf("stranger's 6th try: %d (Retry-After %q), want 429 with Retry-After", p.code, p.header.Get("Retry-After"))
	}
	// The same stranger from more addresses: the name is in back-off now,
	// so each new address gets one compared guess, then waits.
	for _, addr := range []string{"198.51.100.8", "198.51.100.9"} {
		if p := loginFrom(stranger, addr, "boss", "wrong-password"); p.code != http.StatusUnauthorized {
			t.Fatalf("first guess from %s: %d, want 401 (compared)", addr, p.code)
		}
		if p := loginFrom(stranger, addr, "boss", "wrong-password"); p.code != http.StatusTooManyRequests {
			t.Fatalf("second guess from %s in the back-off: %d, want 429", addr, p.code)
		}
	}
	// Even the right password from a locked address is refused uncompared...
	if p := loginFrom(stranger, "198.51.100.7", "boss", "right-password-1"); p.code != http.StatusTooManyRequests {
		t.Fatalf("right password from the locked address: %d, want 429", p.code)
	}
	// ...but from a second address it logs in.
	owner := newBrowser(t, e.url)
	if p := loginFrom(owner, "203.0.113.5", "boss", "right-password-1"); p.code != http.StatusSeeOther || !strings.Contains(p.header.Get("Set-Cookie"), sessionCookie+"=") {
		t.Fatalf("the right password from a second address while the name is attacked: %d %.200s, want 303 and a session", p.code, p.body)
	}
	log, err := e.st.AuditLog(50)
	if err != nil {
		t.Fatal(err)
	}
	froms := map[string]bool{}
	for _, en := range log {
		froms[en.Action+" "+en.From] = true
	}
	if !froms["login 203.0.113.5"] || !froms["login failed 198.51.100.7"] || froms["login failed 127.0.0.1"] {
		t.Errorf("the audit log's From is not the forwarded client address: %v", froms)
	}

	// The admin sees the lockouts and lifts the name's; the stranger's
	// address is compared again (and fails again).
	page := owner.getOK("/users")
	if !strings.Contains(page.body, "boss from 198.51.100.7") {
		t.Errorf("/users does not list the locked pair: %.2000s", page.body)
	}
	if p := owner.do(http.MethodPost, "/users/unlock", url.Values{"name": {"boss"}, "csrf": {owner.csrf}}, from("203.0.113.5")); p.code != http.StatusOK || !strings.Contains(p.body, "Unlocked name boss") {
		t.Fatalf("unlock: %d %.300s", p.code, p.body)
	}
	if p := loginFrom(stranger, "198.51.100.7", "boss", "wrong-password"); p.code != http.StatusUnauthorized {
		t.Errorf("after the unlock the stranger's address got %d, want 401 (compared again)", p.code)
	}
	wantAudit(t, e.st, "boss", "unlock login")
}

// TestForwardedForIgnoredFromUntrustedPeers: with no trusted proxy (or a
// peer that is not one), X-Forwarded-For cannot buy fresh addresses.
func TestForwardedForIgnoredFromUntrustedPeers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		trusted []netip.Prefix
	}{
		{"no trusted proxies", nil},
		{"the peer is not a trusted proxy", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.TrustedProxies = tt.trusted
			e := newTestEnv(t, cfg)
			addUser(t, e.st, "ann", store.RoleApprover, "", "right-password-1")
			b := newBrowser(t, e.url)
			for i := range users.LoginPerPair {
				if p := loginFrom(b, fmt.Sprintf("198.51.100.%d", i+1), "ann", "wrong-password"); p.code != http.StatusUnauthorized {
					t.Fatalf("try %d: %d", i, p.code)
				}
			}
			if p := loginFrom(b, "198.51.100.99", "ann", "wrong-password"); p.code != http.StatusTooManyRequests {
				t.Errorf("a forged X-Forwarded-For got %d, want 429: the peer's own address counts", p.code)
			}
		})
	}
}

// TestClientIP walks the proxy headers as the limiter, the audit log and
// the logs see them.
func TestClientIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		header  string
		peer    string
		hdr     http.Header
		want    string
	}{
		{"no proxies: the peer", nil, config.HeaderXForwardedFor, "10.1.1.1:5000", from("1.2.3.4"), "10.1.1.1"},
		{"untrusted peer: the peer", proxies, config.HeaderXForwardedFor, "192.0.2.1:5000", from("1.2.3.4"), "192.0.2.1"},
		{"trusted peer: the client", proxies, config.HeaderXForwardedFor, "10.1.1.1:5000", from("1.2.3.4"), "1.2.3.4"},
		{"right-most untrusted", proxies, config.HeaderXForwardedFor, "10.1.1.1:5000", from("6.6.6.6, 1.2.3.4, 10.2.2.2"), "1.2.3.4"},
		{"several headers", proxies, config.HeaderXForwardedFor, "10.1.1.1:5000", http.Header{"X-Forwarded-For": {"6.6.6.6", "1.2.3.4"}}, "1.2.3.4"},
		{"loopback is not trusted by default", proxies, config.HeaderXForwardedFor, "127.0.0.1:5000", from("1.2.3.4"), "127.0.0.1"},
		{"trusted peer, no header", proxies, config.HeaderXForwardedFor, "10.1.1.1:5000", nil, "10.1.1.1"},
		{"XFF ignored when Forwarded is configured", proxies, config.HeaderForwarded, "10.1.1.1:5000", from("1.2.3.4"), "10.1.1.1"},
		{"Forwarded ignored when XFF is configured", proxies, config.HeaderXForwardedFor, "10.1.1.1:5000", http.Header{"Forwarded": {"for=1.2.3.4"}}, "10.1.1.1"},
		{"Forwarded", proxies, config.HeaderForwarded, "10.1.1.1:5000", http.Header{"Forwarded": {"for=6.6.6.6, for=1.2.3.4;proto=https;by=10.1.1.1"}}, "1.2.3.4"},
		{"Forwarded IPv6 with port", proxies, config.HeaderForwarded, "[2001:db8::1]:5000", http.Header{"Forwarded": {`for="[2001:db9::17]:4711"`}}, "2001:db9::17"},
		{"Forwarded through two proxies", proxies, config.HeaderForwarded, "10.1.1.1:5000", http.Header{"Forwarded": {"for=1.2.3.4", "For=10.3.3.3"}}, "1.2.3.4"},
		{"Forwarded unknown stops at the proxy", proxies, config.HeaderForwarded, "10.1.1.1:5000", http.Header{"Forwarded": {"for=unknown"}}, "10.1.1.1"},
		{"Forwarded from an untrusted peer", proxies, config.HeaderForwarded, "192.0.2.1:5000", http.Header{"Forwarded": {"for=1.2.3.4"}}, "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.peer
			r.Header = tt.hdr
			if r.Header == nil {
				r.Header = http.Header{}
			}
			if got := clientIP(tt.trusted, tt.header)(r); got != tt.want {
				t.Errorf("client address %q, want %q", got, tt.want)
			}
		})
	}
}

// tokenFor stores a token of scope made by the admin "boss" (added if
// needed) and returns its secret.
func tokenFor(t *testing.T, e *testEnv, scope store.Scope) string {
	t.Helper()
	if _, err := e.st.User("boss"); err != nil {
		addUser(t, e.st, "boss", store.RoleAdmin, "", "boss-password-1")
	}
	secret := users.NewSecret()
	tok := store.Token{ID: ulid.Make().String(), Name: string(scope) + "-" + secret[:6], User: "boss", Scope: scope, CreatedAt: time.Now()}
	if err := e.st.CreateToken(context.Background(), users.HashSecret(secret), tok); err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestKeysTokenRefusedOnBackups: an n8n flow's keys token claims keys,
// and is refused the backup (the whole database), dead letters and drafts.
func TestKeysTokenRefusedOnBackups(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	keys := http.Header{"Authorization": {"Bearer " + tokenFor(t, e, store.ScopeKeys)}}
	if code, ans := e.do(t, http.MethodPost, "/api/v1/keys/order-1/claim", "application/json", []byte(`{"a":1}`), keys); code != http.StatusCreated {
		t.Fatalf("a keys token claiming a key: %d %v", code, ans)
	}
	for _, path := range []string{"/api/v1/backup", "/api/v1/dead-letters", "/api/v1/drafts", "/metrics"} {
		code, ans := e.do(t, http.MethodGet, path, "", nil, keys)
		if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(ans["error"]), "keys scope") {
			t.Errorf("GET %s with a keys token: %d %v, want 403 naming the scope", path, code, ans)
		}
	}
}

// TestScopesOnEveryRoute sends every route of routes.go with each kind of
// credential and checks that exactly the scopes that should get in do.
// A route that is not in the table fails the test: add it, with the scope
// it needs.
func TestScopesOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	const (
		public = "public"  // no credential needed
		page   = "page"    // a dashboard page: sessions only, never a token
		read   = "read"    // the scopes are store.Scope values
		appr   = "approve" //
		keys   = "keys"    //
		admin  = "admin"   //
		metr   = "metrics" //
	)
	need := map[string]string{
		"GET /healthz": public, "GET /readyz": public, "POST /hooks/:channel": public, "GET /hooks/:channel": public,
		"GET /static/:name": public, "GET /favicon.ico": public, "GET /sw.js": public, "GET /login": public, "POST /login": public,
		"GET /setup/:token": public, "POST /setup/:token": public,
		// The approval surfaces verify their own signatures (web/surfaces.go).
		"POST /surfaces/:surface": public, "POST /surfaces/:surface/*": public,
		"GET /login/code": public, "POST /login/code": public,
		"GET /metrics": metr,
		// A dashboard form (sessions only) that decides drafts: an approver's.
		"POST /drafts/selected": page,

		"GET /api/v1/events/*": read, "GET /api/v1/handoffs": read, "GET /api/v1/drafts": read, "GET /api/v1/outbox/*": read, "GET /api/v1/stats/quality": read, "GET /api/v1/canary": read,
		"POST /api/v1/drafts/:id/approve": appr, "POST /api/v1/drafts/:id/reject": appr, "POST /api/v1/events/*": appr,
		"POST /api/v1/drafts/:id/undo": appr, "GET /api/v1/keys/:key": keys, "POST /api/v1/drafts/:id/template": appr,
		"POST /api/v1/handoffs/*":      appr,
		"POST /api/v1/keys/:key/claim": keys, "POST /api/v1/keys/:key/effect-pending": keys,
		"POST /api/v1/keys/:key/complete": keys, "POST /api/v1/keys/:key/reconcile": keys,
		"POST /api/v1/reconcile/*": admin, "GET /api/v1/sandbox/messages": admin, "GET /api/v1/dead-letters": admin, "POST /api/v1/canary/:client/:action": admin,
		"POST /api/v1/dead-letters/replay": admin, "GET /api/v1/dead-letters/bulk/:id": admin,
		"POST /api/v1/dead-letters/bulk/:id/cancel": admin, "POST /api/v1/dead-letters/*": admin, "GET /api/v1/backup": admin,
		"POST /api/v1/backups": admin, "GET /api/v1/backups/offsite": admin,
		"GET /api/v1/clients/:id/facts": admin, "PUT /api/v1/clients/:id/facts": admin, "GET /api/v1/clients/:id/facts/:version": admin,
		// Dashboard routes need no entry (they are pages); these are listed
		// so the dead-letter table's routes are seen to be checked.
		"GET /dead-letters/*": page, "POST /dead-letters/replay-selected": page,
	}
	secrets := map[store.Scope]string{}
	for _, sc := range store.Scopes {
		secrets[sc] = tokenFor(t, e, sc)
	}
	// What each scope covers (users.Caller.May), written out again here.
	covers := map[store.Scope][]string{
		store.ScopeMetrics: {metr}, store.ScopeKeys: {keys}, store.ScopeRead: {read},
		store.ScopeApprove: {read, appr}, store.ScopeAdmin: {read, appr, keys, admin, metr},
	}
	routes := e.srv.e.Router().Routes()
	seen := 0
	for _, r := range routes {
		switch r.Method {
		case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue // the groups' not-found routes
		}
		key := r.Method + " " + r.Path
		want, listed := need[key]
		if !listed {
			if strings.HasPrefix(r.Path, "/api/") || r.Path == "/metrics" {
				t.Errorf("%s is not in the access table: add it with the scope it needs", key)
				continue
			}
			want = page // every other route is a dashboard page
		}
		seen++
		path := strings.NewReplacer("*", "x", ":channel", "demo", ":name", "x", ":token", "x", ":id", "x", ":key", "k-"+strings.ReplaceAll(r.Path, "/", "-")).Replace(r.Path)
		t.Run(key, func(t *testing.T) {
			call := func(secret string) (int, string) {
				t.Helper()
				req, err := http.NewRequest(r.Method, e.url+path, strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				if secret != "" {
					req.Header.Set("Authorization", "Bearer "+secret)
				}
				c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(raw)
			}
			if want == public {
				return
			}
			if code, body := call(""); code != http.StatusUnauthorized && !(want == page && code == http.StatusSeeOther) {
				t.Errorf("no credential: %d %.200s, want 401 (or, for a page, 303 to /login)", code, body)
			}
			for _, sc := range store.Scopes {
				code, body := call(secrets[sc])
				in := slices.Contains(covers[sc], want)
				switch {
				case want == page:
					if code != http.StatusSeeOther && code != http.StatusUnauthorized {
						t.Errorf("a %s token on a page: %d, want 303 to /login or 401: tokens never open pages", sc, code)
					}
				case in && (code == http.StatusUnauthorized || code == http.StatusForbidden):
					t.Errorf("a %s token: %d %.200s, want it let in", sc, code, body)
				case !in && (code != http.StatusForbidden || !strings.Contains(body, "scope")):
					t.Errorf("a %s token: %d %.200s, want 403 naming the scope", sc, code, body)
				}
			}
		})
	}
	if seen < len(need) {
		t.Errorf("only %d routes found for %d in the table: a route was removed or renamed", seen, len(need))
	}
}

// TestOldTokenOwnerMustStayAdmin: a token stops when its owner is demoted.
func TestTokenOwnerMustStayAdmin(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	secret := tokenFor(t, e, store.ScopeRead)
	addUser(t, e.st, "root", store.RoleAdmin, "", "root-password-1") // boss may not be the last admin
	h := http.Header{"Authorization": {"Bearer " + secret}}
	if code, ans := e.do(t, http.MethodGet, "/api/v1/handoffs", "", nil, h); code != http.StatusOK {
		t.Fatalf("before: %d %v", code, ans)
	}
	if err := e.st.Update(context.Background(), func(tx *store.Tx) error {
		u, err := tx.User("boss")
		if err != nil {
			return err
		}
		u.Role = store.RoleApprover
		return tx.PutUser(u)
	}); err != nil {
		t.Fatal(err)
	}
	if code, ans := e.do(t, http.MethodGet, "/api/v1/handoffs", "", nil, h); code != http.StatusUnauthorized || !strings.Contains(fmt.Sprint(ans["error"]), "no longer an active admin") {
		t.Errorf("after the owner was demoted: %d %v, want 401", code, ans)
	}
}

// TestBearerGuessingLimited: sixty wrong tokens from one address, all at
// once, get at most users.BearerPerAddr looked up; the rest are 429 with
// Retry-After; the audit log holds two entries, not sixty; a right token
// from that address waits too, and from another address it works.
func TestBearerGuessingLimited(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, proxiedConfig())
	good := tokenFor(t, e, store.ScopeRead)
	const n = 60
	codes := make([]int, n)
	retry := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/handoffs", nil)
			req.Header.Set("Authorization", fmt.Sprintf("Bearer guess-%d", i))
			req.Header.Set("X-Forwarded-For", "198.51.100.7")
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i], retry[i] = resp.StatusCode, resp.Header.Get("Retry-After")
		}()
	}
	close(start)
	wg.Wait()
	refused, limited := 0, 0
	for i, c := range codes {
		switch {
		case c == http.StatusUnauthorized:
			refused++
		case c == http.StatusTooManyRequests && retry[i] != "":
			limited++
		default:
			t.Errorf("guess %d: %d (Retry-After %q)", i, c, retry[i])
		}
	}
	if refused != users.BearerPerAddr || limited != n-users.BearerPerAddr {
		t.Errorf("%d refused and %d limited, want %d and %d", refused, limited, users.BearerPerAddr, n-users.BearerPerAddr)
	}
	log, err := e.st.AuditLog(200)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, en := range log {
		if en.From == "198.51.100.7" {
			actions = append(actions, en.Action)
		}
	}
	slices.Sort(actions)
	if !slices.Equal(actions, []string{"token refused", "tokens limited"}) {
		t.Errorf("audit entries from the guessing address: %v, want one refusal and one limit", actions)
	}
	h := http.Header{"Authorization": {"Bearer " + good}, "X-Forwarded-For": {"198.51.100.7"}}
	if code, _ := e.do(t, http.MethodGet, "/api/v1/handoffs", "", nil, h); code != http.StatusTooManyRequests {
		t.Errorf("a right token from the limited address: %d, want 429 (not even looked up)", code)
	}
	h.Set("X-Forwarded-For", "203.0.113.5")
	if code, ans := e.do(t, http.MethodGet, "/api/v1/handoffs", "", nil, h); code != http.StatusOK {
		t.Errorf("a right token from another address: %d %v, want 200", code, ans)
	}
}

// TestSecurityHeaders: with an https base_url every answer carries HSTS
// and the session cookie is __Host- (Secure, Path=/, no Domain); JSON
// answers are nosniff and no-store; with http, no HSTS and the plain name.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"https://handoff.example.com", "http://127.0.0.1:8080"} {
		t.Run(base, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.BaseURL = base
			e := newTestEnv(t, cfg)
			https := strings.HasPrefix(base, "https:")
			addUser(t, e.st, "ann", store.RoleApprover, "", "right-password-1")
			b := newBrowser(t, e.url)
			p := b.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"right-password-1"}}, nil)
			if p.code != http.StatusSeeOther {
				t.Fatalf("login: %d %.200s", p.code, p.body)
			}
			ck, err := http.ParseSetCookie(p.header.Get("Set-Cookie"))
			if err != nil {
				t.Fatal(err)
			}
			wantName := sessionCookie
			if https {
				wantName = "__Host-" + sessionCookie
			}
			if ck.Name != wantName || ck.Secure != https || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly {
				t.Errorf("session cookie %+v, want %s, Secure %v, Path=/, no Domain, HttpOnly", ck, wantName, https)
			}
			// The cookie, sent back by hand (the jar keeps Secure cookies
			// off plain http), opens the API.
			req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/handoffs", nil)
			req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the %s cookie on the API: %d", ck.Name, resp.StatusCode)
			}
			for _, path := range []string{"/api/v1/handoffs", "/healthz", "/api/v1/nope"} {
				req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
				req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				h := resp.Header
				if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
					t.Errorf("GET %s: %d %v, want JSON with nosniff and no-store", path, resp.StatusCode, h)
				}
				if hsts := h.Get("Strict-Transport-Security"); (hsts != "") != https {
					t.Errorf("GET %s: Strict-Transport-Security %q with base_url %s", path, hsts, base)
				}
			}
		})
	}
}

// TestReadyzDoesNotWritePerRequest: a flood of /readyz is one commit.
func TestReadyzDoesNotWritePerRequest(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	var pings atomic.Int32
	real := e.srv.ready.ping
	e.srv.ready.mu.Lock()
	e.srv.ready.ping = func(ctx context.Context) error { pings.Add(1); return real(ctx) }
	e.srv.ready.at = time.Time{}
	e.srv.ready.mu.Unlock()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if code, _ := e.do(t, http.MethodGet, "/readyz", "", nil, nil); code != http.StatusOK {
				t.Errorf("/readyz: %d", code)
			}
		}()
	}
	close(start)
	wg.Wait()
	if got := pings.Load(); got != 1 {
		t.Errorf("50 calls of /readyz committed %d times, want 1", got)
	}
	// Once the answer is older than readyFor, the next call checks again.
	e.srv.ready.mu.Lock()
	e.srv.ready.at = time.Now().Add(-readyFor)
	e.srv.ready.mu.Unlock()
	e.do(t, http.MethodGet, "/readyz", "", nil, nil)
	if got := pings.Load(); got != 2 {
		t.Errorf("after readyFor, %d commits, want 2", got)
	}
}

// TestLockoutSecondLoopbackAddress: the same without any proxy, from a
// real second address: the connections of 127.0.0.2 are a client apart.
func TestLockoutSecondLoopbackAddress(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, nil, envOptions{now: clk.Now})
	addUser(t, e.st, "boss", store.RoleAdmin, "", "right-password-1")
	first := newBrowser(t, e.url)
	for i := 1; i <= users.LoginPerPair; i++ {
		if p := first.do(http.MethodPost, "/login", url.Values{"name": {"boss"}, "password": {"wrong-password"}}, nil); p.code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i, p.code)
		}
	}
	if p := first.do(http.MethodPost, "/login", url.Values{"name": {"boss"}, "password": {"right-password-1"}}, nil); p.code != http.StatusTooManyRequests {
		t.Fatalf("the right password from the locked 127.0.0.1: %d, want 429", p.code)
	}
	second := newBrowser(t, e.url)
	second.c.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	p := second.do(http.MethodPost, "/login", url.Values{"name": {"boss"}, "password": {"right-password-1"}}, nil)
	if p.code != http.StatusSeeOther {
		t.Fatalf("the right password from 127.0.0.2 while 127.0.0.1 is locked: %d %.200s, want 303", p.code, p.body)
	}
	wantAudit(t, e.st, "boss", "login")
	log, err := e.st.AuditLog(20)
	if err != nil {
		t.Fatal(err)
	}
	// The clock stands still, so entries share a millisecond: look for it.
	if !slices.ContainsFunc(log, func(en store.AuditEntry) bool { return en.Action == "login" && en.From == "127.0.0.2" }) {
		t.Errorf("audit %+v, want a login from 127.0.0.2", log)
	}
}
