package web

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/users"
)

// wantLoggedOut: the browser's session no longer opens a page.
func wantLoggedOut(t *testing.T, b *browser, why string) {
	t.Helper()
	p := b.get("/drafts")
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/login") {
		t.Errorf("%s: GET /drafts = %d to %q, want 303 to /login", why, p.code, p.header.Get("Location"))
	}
	if p := b.post("/drafts/dx/approve", nil); p.code != http.StatusUnauthorized {
		t.Errorf("%s: a POST = %d, want 401", why, p.code)
	}
}

// bearerGet sends GET path with a bearer token.
func bearerGet(t *testing.T, base, path, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDisabledUserLiveSessionRefused: a person disabled while logged in
// loses every open session, and an admin their API tokens, on the next
// request; they cannot log in again, and are let in again once enabled.
// All of it is audited.
func TestDisabledUserLiveSessionRefused(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	boss := loggedIn(t, e, "boss", store.RoleAdmin, "")
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	annPhone := newBrowser(t, e.url)
	annPhone.login("ann", "ann-password")
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	const secret = "root-token-secret-0123456789abcdef"
	sum := sha256.Sum256([]byte(secret))
	if err := e.st.CreateToken(context.Background(), sum[:], store.Token{ID: ulid.Make().String(), Name: "root-n8n", User: "root", Scope: store.ScopeAdmin, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if code := bearerGet(t, e.url, "/api/v1/drafts", secret); code != http.StatusOK {
		t.Fatalf("root's token before: %d, want 200", code)
	}

	boss.getOK("/users")
	for _, name := range []string{"ann", "root"} {
		if p := boss.post("/users/"+name+"/disable", nil); p.code != http.StatusOK || !strings.Contains(p.body, name+" is disabled") {
			t.Fatalf("disable %s: %d %.300s", name, p.code, p.body)
		}
	}
	wantLoggedOut(t, ann, "ann's open session after she was disabled")
	wantLoggedOut(t, annPhone, "ann's other session")
	wantLoggedOut(t, root, "root's open session")
	if code := bearerGet(t, e.url, "/api/v1/drafts", secret); code != http.StatusUnauthorized {
		t.Errorf("root's token after root was disabled: %d, want 401", code)
	}
	again := newBrowser(t, e.url)
	p := again.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"ann-password"}}, nil)
	if p.code != http.StatusForbidden || !strings.Contains(p.body, "this account is disabled") {
		t.Errorf("a disabled person's login: %d %.300s; want 403 saying the account is disabled", p.code, p.body)
	}
	if p := again.do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"wrong-password-1"}}, nil); p.code != http.StatusUnauthorized || strings.Contains(p.body, "disabled") {
		t.Errorf("a wrong password for a disabled person: %d, and it must not say disabled", p.code)
	}

	for _, name := range []string{"ann", "root"} {
		if p := boss.post("/users/"+name+"/enable", nil); p.code != http.StatusOK {
			t.Fatalf("enable %s: %d %.300s", name, p.code, p.body)
		}
	}
	again.login("ann", "ann-password")
	if code := bearerGet(t, e.url, "/api/v1/drafts", secret); code != http.StatusOK {
		t.Errorf("root's token once root is enabled again: %d, want 200", code)
	}
	wantAudit(t, e.st, "boss", "disable user", "enable user")
}

// TestLastAdminOverHTTP: the only admin cannot disable, demote or remove
// themself; with two admins disabling each other at the same moment, one
// admin always remains.
func TestLastAdminOverHTTP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	boss := loggedIn(t, e, "boss", store.RoleAdmin, "")
	boss.getOK("/users")
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/users/boss/disable", nil},
		{"/users/boss/remove", nil},
		{"/users/boss/role", url.Values{"role": {"approver"}}},
	} {
		if p := boss.post(tc.path, tc.form); p.code != http.StatusConflict || !strings.Contains(p.body, "last enabled admin") {
			t.Errorf("POST %s as the only admin: %d %.200s; want 409 naming the last admin", tc.path, p.code, p.body)
		}
	}
	if p := boss.post("/users/nobody/disable", nil); p.code != http.StatusNotFound {
		t.Errorf("disable a name that is no person: %d, want 404", p.code)
	}

	for round := range 3 {
		a, b := "ada"+string(rune('a'+round)), "bob"+string(rune('a'+round))
		ba, bb := loggedIn(t, e, a, store.RoleAdmin, ""), loggedIn(t, e, b, store.RoleAdmin, "")
		ba.getOK("/users")
		bb.getOK("/users")
		// boss steps aside for the round: only a and b are enabled admins.
		if p := ba.post("/users/boss/disable", nil); p.code != http.StatusOK {
			t.Fatalf("disable boss: %d %.200s", p.code, p.body)
		}
		testkit.Together(2, func(i int) {
			if i == 0 {
				ba.post("/users/"+b+"/disable", nil)
			} else {
				bb.post("/users/"+a+"/disable", nil)
			}
		})
		var enabled []string
		people, _ := e.st.Users()
		for _, u := range people {
			if u.Role == store.RoleAdmin && !u.Disabled {
				enabled = append(enabled, u.Name)
			}
		}
		if len(enabled) != 1 {
			t.Fatalf("round %d: enabled admins %v, want exactly one", round, enabled)
		}
		// Back to boss as the one admin, the others removed.
		if err := e.st.Update(context.Background(), func(tx *store.Tx) error {
			u, err := tx.User("boss")
			if err != nil {
				return err
			}
			u.Disabled = false
			return tx.PutUser(u)
		}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{a, b} {
			if _, err := users.New(e.st, users.Options{}).Remove(context.Background(), n, time.Now(), store.AuditEntry{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAdminChangesPeople: reset a password (their sessions end), change
// role and owner, remove (the audit stays).
func TestAdminChangesPeople(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	boss := loggedIn(t, e, "boss", store.RoleAdmin, "")
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	boss.getOK("/users")

	if p := boss.post("/users/ann/password", url.Values{"password": {"password1234"}}); p.code != http.StatusBadRequest || !strings.Contains(p.body, "common") {
		t.Errorf("reset to a common password: %d %.300s; want 400 saying it is common", p.code, p.body)
	}
	p := boss.post("/users/ann/password", nil)
	m := regexp.MustCompile(`<code class="secret-value">([^<]+)</code>`).FindStringSubmatch(p.body)
	if p.code != http.StatusOK || m == nil {
		t.Fatalf("reset ann's password: %d, no password shown: %.300s", p.code, p.body)
	}
	wantLoggedOut(t, ann, "ann's session after her password was reset")
	ann = newBrowser(t, e.url)
	ann.login("ann", m[1])

	if p := boss.post("/users/ann/role", url.Values{"role": {"admin"}, "owner": {"sales"}}); p.code != http.StatusOK {
		t.Fatalf("make ann admin: %d %.300s", p.code, p.body)
	}
	if u, _ := e.st.User("ann"); u.Role != store.RoleAdmin || u.Owner != "sales" {
		t.Errorf("ann after the change: %s %q, want admin sales", u.Role, u.Owner)
	}
	if p := ann.get("/users"); p.code != http.StatusOK {
		t.Errorf("ann's open session sees her new role: /users %d, want 200", p.code)
	}
	if p := boss.post("/users/ann/role", url.Values{"role": {"boss"}}); p.code != http.StatusBadRequest {
		t.Errorf("a role that is none: %d, want 400", p.code)
	}
	if p := boss.post("/users/ann/remove", nil); p.code != http.StatusOK {
		t.Fatalf("remove ann: %d %.300s", p.code, p.body)
	}
	wantLoggedOut(t, ann, "a removed person's session")
	if _, err := e.st.User("ann"); err == nil {
		t.Errorf("ann is still a user")
	}
	wantAudit(t, e.st, "boss", "reset password", "change user", "remove user")
	wantAudit(t, e.st, "ann", "login")
	// Approvers may do none of it.
	cy := loggedIn(t, e, "cyd", store.RoleApprover, "")
	cy.getOK("/drafts")
	if p := cy.post("/users/boss/disable", nil); p.code != http.StatusForbidden {
		t.Errorf("an approver disabling an admin: %d, want 403", p.code)
	}
}

// TestChangeOwnPassword: the current password is needed, the new one must
// pass the rules, and the person's other sessions end.
func TestChangeOwnPassword(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	here := loggedIn(t, e, "ann", store.RoleApprover, "")
	there := newBrowser(t, e.url)
	there.login("ann", "ann-password")
	here.getOK("/account")
	if p := here.post("/account/password", url.Values{"current": {"not-my-password"}, "password": {"a brand new passphrase"}}); p.code != http.StatusForbidden || !strings.Contains(p.body, "current password is wrong") {
		t.Errorf("a wrong current password: %d %.200s", p.code, p.body)
	}
	for _, weak := range []string{"short-one", "qwertyuiop123", "aaaaaaaaaaaaaaa", "123456789012"} {
		if p := here.post("/account/password", url.Values{"current": {"ann-password"}, "password": {weak}}); p.code != http.StatusBadRequest {
			t.Errorf("new password %q: %d, want 400", weak, p.code)
		}
	}
	if p := here.post("/account/password", url.Values{"current": {"ann-password"}, "password": {"a brand new passphrase"}}); p.code != http.StatusOK {
		t.Fatalf("change: %d %.300s", p.code, p.body)
	}
	here.getOK("/drafts")
	wantLoggedOut(t, there, "the other session after a password change")
	if p := newBrowser(t, e.url).do(http.MethodPost, "/login", url.Values{"name": {"ann"}, "password": {"ann-password"}}, nil); p.code != http.StatusUnauthorized {
		t.Errorf("the old password: %d, want 401", p.code)
	}
	newBrowser(t, e.url).login("ann", "a brand new passphrase")
	wantAudit(t, e.st, "ann", "change password")

	// Log out my other sessions.
	third := newBrowser(t, e.url)
	third.login("ann", "a brand new passphrase")
	if p := here.post("/account/sessions/end", nil); p.code != http.StatusOK || !strings.Contains(p.body, "Logged out 2 other sessions") {
		t.Errorf("log out other sessions: %d %.300s", p.code, p.body)
	}
	wantLoggedOut(t, third, "a session logged out from another")
	here.getOK("/drafts")
}

var (
	totpSecretRe = regexp.MustCompile(`Secret: <code class="secret-value">([A-Z2-7]+)</code>`)
	recoveryRe   = regexp.MustCompile(`<li><code class="secret-value">([a-z2-7]{5}-[a-z2-7]{5})</code></li>`)
)

// enrol turns a second factor on for the browser's person and returns the
// secret and the recovery codes.
func enrol(t *testing.T, b *browser, clk *clock) (string, []string) {
	t.Helper()
	b.getOK("/account")
	p := b.postStepped("/account/totp/start", nil)
	m := totpSecretRe.FindStringSubmatch(p.body)
	if p.code != http.StatusOK || m == nil || !strings.Contains(p.body, "otpauth://totp/") {
		t.Fatalf("start enrolment: %d, no secret and URI: %.400s", p.code, p.body)
	}
	if p := b.post("/account/totp/confirm", url.Values{"code": {"000000"}}); p.code != http.StatusBadRequest {
		t.Errorf("confirm with a wrong code: %d, want 400", p.code)
	}
	code, err := password.TOTPCode(m[1], clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	p = b.post("/account/totp/confirm", url.Values{"code": {code}})
	var codes []string
	for _, c := range recoveryRe.FindAllStringSubmatch(p.body, -1) {
		codes = append(codes, c[1])
	}
	if p.code != http.StatusOK || len(codes) != password.RecoveryCount {
		t.Fatalf("confirm: %d, %d recovery codes: %.400s", p.code, len(codes), p.body)
	}
	if p := b.getOK("/account"); strings.Contains(p.body, m[1]) || strings.Contains(p.body, codes[0]) {
		t.Errorf("the account page shows the secret or a recovery code after enrolment")
	}
	return m[1], codes
}

// codeLogin logs in with a password and then code; it returns the answer
// to the code.
func codeLogin(t *testing.T, b *browser, name, pw, code string) page {
	t.Helper()
	p := b.do(http.MethodPost, "/login", url.Values{"name": {name}, "password": {pw}, "next": {"/handoffs"}}, nil)
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/login/code") {
		t.Fatalf("password of an enrolled person: %d to %q, want 303 to /login/code", p.code, p.header.Get("Location"))
	}
	// Only the code form opens before the code.
	if p := b.get("/drafts"); p.code != http.StatusSeeOther {
		t.Errorf("a page before the code: %d, want 303 to /login", p.code)
	}
	if p := b.get(p.header.Get("Location")); p.code != http.StatusOK || !strings.Contains(p.body, `name="code"`) {
		t.Fatalf("the code form: %d %.300s", p.code, p.body)
	}
	return b.do(http.MethodPost, "/login/code", url.Values{"code": {code}, "next": {"/handoffs"}}, nil)
}

// TestSecondFactorLogin: enrolment shows the secret once; a login then
// asks for a code; a code works once (no replay), a recovery code works
// once, wrong codes end the attempt, and the secret is never in the log
// or a page after enrolment.
func TestSecondFactorLogin(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, nil, envOptions{now: clk.Now})
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	secret, codes := enrol(t, ann, clk)
	wantAudit(t, e.st, "ann", "enrol second factor")

	// The code used at enrolment is spent: the same step is refused.
	now, _ := password.TOTPCode(secret, clk.Now())
	b := newBrowser(t, e.url)
	if p := codeLogin(t, b, "ann", "ann-password", now); p.code != http.StatusUnauthorized {
		t.Errorf("the enrolment code again: %d, want 401", p.code)
	}
	clk.Add(30 * time.Second)
	next, _ := password.TOTPCode(secret, clk.Now())
	if p := b.do(http.MethodPost, "/login/code", url.Values{"code": {next}, "next": {"/handoffs"}}, nil); p.code != http.StatusSeeOther || p.header.Get("Location") != "/handoffs" {
		t.Fatalf("the next code: %d to %q, want 303 to /handoffs: %.300s", p.code, p.header.Get("Location"), p.body)
	}
	b.getOK("/drafts")
	// That code cannot open a second browser.
	if p := codeLogin(t, newBrowser(t, e.url), "ann", "ann-password", next); p.code != http.StatusUnauthorized {
		t.Errorf("a code replayed in another browser: %d, want 401", p.code)
	}

	// A recovery code works once.
	r := newBrowser(t, e.url)
	if p := codeLogin(t, r, "ann", "ann-password", strings.ToUpper(codes[3])); p.code != http.StatusSeeOther {
		t.Fatalf("a recovery code: %d %.300s", p.code, p.body)
	}
	r.getOK("/drafts")
	if p := codeLogin(t, newBrowser(t, e.url), "ann", "ann-password", codes[3]); p.code != http.StatusUnauthorized {
		t.Errorf("a recovery code used twice: %d, want 401", p.code)
	}
	if u, _ := e.st.User("ann"); u.TOTP == nil || len(u.TOTP.Recovery) != password.RecoveryCount-1 {
		t.Errorf("recovery codes left: want %d", password.RecoveryCount-1)
	}

	// Five wrong codes end the attempt: the password is needed again.
	w := newBrowser(t, e.url)
	p := codeLogin(t, w, "ann", "ann-password", "111111")
	for range users.MaxCodeTries - 1 {
		p = w.do(http.MethodPost, "/login/code", url.Values{"code": {"111111"}}, nil)
	}
	if p.code != http.StatusUnauthorized || !strings.Contains(p.body, "log in again") {
		t.Errorf("the last wrong code: %d %.200s; want 401 asking to log in again", p.code, p.body)
	}
	clk.Add(30 * time.Second)
	good, _ := password.TOTPCode(secret, clk.Now())
	if p := w.do(http.MethodPost, "/login/code", url.Values{"code": {good}}, nil); p.code != http.StatusUnauthorized {
		t.Errorf("a right code after the attempt ended: %d, want 401", p.code)
	}

	// The pending session expires.
	x := newBrowser(t, e.url)
	codeLogin(t, x, "ann", "ann-password", "222222")
	clk.Add(store.SessionPending + time.Second)
	good, _ = password.TOTPCode(secret, clk.Now())
	if p := x.do(http.MethodPost, "/login/code", url.Values{"code": {good}}, nil); p.code != http.StatusUnauthorized {
		t.Errorf("a code after the pending session expired: %d, want 401", p.code)
	}

	// Turned off with the password and a code (the step-up at enrolment
	// is older than five minutes now); an admin can reset it too.
	ann.getOK("/account")
	if p := ann.post("/account/totp/remove", url.Values{"current": {"ann-password"}}); p.code != http.StatusForbidden || !strings.Contains(p.body, "current code") {
		t.Errorf("turn the second factor off with the password alone: %d %.300s, want 403 asking for the code", p.code, p.body)
	}
	clk.Add(30 * time.Second)
	good, _ = password.TOTPCode(secret, clk.Now())
	if p := ann.post("/account/totp/remove", url.Values{"current": {"ann-password"}, "current_code": {good}}); p.code != http.StatusOK {
		t.Fatalf("turn the second factor off: %d %.300s", p.code, p.body)
	}
	newBrowser(t, e.url).login("ann", "ann-password")
	wantAudit(t, e.st, "ann", "remove second factor")
	log, _ := e.st.AuditLog(500)
	for _, en := range log {
		if strings.Contains(en.Detail, secret) || strings.Contains(en.Detail, codes[0]) {
			t.Errorf("the audit log holds the secret or a code: %+v", en)
		}
	}
}

// TestRequireTOTPForAdmins: with auth.require_totp_for_admins an admin
// without a second factor reaches only their account page until enrolled;
// approvers are not held.
func TestRequireTOTPForAdmins(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Auth.RequireTOTPForAdmins = true
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, cfg, envOptions{now: clk.Now})
	loggedIn(t, e, "ann", store.RoleApprover, "")
	addUser(t, e.st, "boss", store.RoleAdmin, "", "boss-password")
	b := newBrowser(t, e.url)
	if p := b.do(http.MethodPost, "/login", url.Values{"name": {"boss"}, "password": {"boss-password"}}, nil); p.code != http.StatusSeeOther {
		t.Fatalf("login: %d", p.code)
	}
	b.pw = "boss-password"
	if p := b.get("/drafts"); p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/account") {
		t.Errorf("a page before enrolling: %d to %q, want 303 to /account", p.code, p.header.Get("Location"))
	}
	if p := b.getOK("/account"); !strings.Contains(p.body, "must use a second factor") {
		t.Errorf("the account page does not say why")
	}
	if p := b.post("/users", url.Values{"name": {"eve"}, "role": {"admin"}}); p.code != http.StatusForbidden {
		t.Errorf("an admin action before enrolling: %d, want 403", p.code)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/drafts", nil)
	for _, c := range b.c.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("the API with the session before enrolling: %v %v, want 403", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	enrol(t, b, clk)
	b.getOK("/drafts")
	b.getOK("/users")
	if p := b.post("/account/totp/remove", url.Values{"current": {"boss-password"}}); p.code != http.StatusConflict {
		t.Errorf("an admin turning off a required second factor: %d, want 409", p.code)
	}
}

// TestSetupLinkUsedTwice: the link's form creates the first admin and logs
// them in; the link then answers 410 with a clear sentence, to a GET and a
// POST alike; of ten browsers posting it at once, one wins.
func TestSetupLinkUsedTwice(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, nil, envOptions{now: clk.Now})
	const secret = "setup-secret-for-the-test-0123456789"
	if made, err := e.st.CreateSetupLink(context.Background(), users.HashSecret(secret), clk.Now().Add(time.Hour)); err != nil || !made {
		t.Fatalf("CreateSetupLink: %v %v", made, err)
	}
	b := newBrowser(t, e.url)
	if p := b.get("/setup/not-the-secret"); p.code != http.StatusGone {
		t.Errorf("a wrong link: %d, want 410", p.code)
	}
	p := b.get("/setup/" + secret)
	if p.code != http.StatusOK || !strings.Contains(p.body, "Create the first admin") || p.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the setup form: %d %q %.300s", p.code, p.header.Get("Cache-Control"), p.body)
	}
	if p := b.do(http.MethodPost, "/setup/"+secret, url.Values{"name": {"owner"}, "password": {"password1234"}}, nil); p.code != http.StatusBadRequest || !strings.Contains(p.body, "common") {
		t.Errorf("a common password: %d %.300s; want 400 with the sentence", p.code, p.body)
	}
	var won atomic.Int32
	testkit.Together(10, func(i int) {
		c := newBrowser(t, e.url)
		p := c.do(http.MethodPost, "/setup/"+secret, url.Values{"name": {"owner" + string(rune('a'+i))}, "password": {"a long setup passphrase"}}, nil)
		switch p.code {
		case http.StatusSeeOther:
			won.Add(1)
			if c.getOK("/users"); !strings.Contains(c.get("/users").body, "owner") {
				t.Errorf("the new admin does not see /users")
			}
		case http.StatusGone:
			if !strings.Contains(p.body, "already used or has expired") {
				t.Errorf("the refusal: %.300s", p.body)
			}
		default:
			t.Errorf("POST the link: %d %.300s", p.code, p.body)
		}
	})
	if won.Load() != 1 {
		t.Fatalf("%d browsers created an admin with the link, want 1", won.Load())
	}
	users, _ := e.st.Users()
	if len(users) != 1 || users[0].Role != store.RoleAdmin {
		t.Fatalf("users %+v, want one admin", users)
	}
	if p := b.get("/setup/" + secret); p.code != http.StatusGone || !strings.Contains(p.body, "already used") {
		t.Errorf("the link opened again: %d %.200s; want 410", p.code, p.body)
	}
	if p := b.do(http.MethodPost, "/setup/"+secret, url.Values{"name": {"late"}, "password": {"a long setup passphrase"}}, nil); p.code != http.StatusGone {
		t.Errorf("the link posted again: %d, want 410", p.code)
	}
	wantAudit(t, e.st, users[0].Name, "create user")
}
