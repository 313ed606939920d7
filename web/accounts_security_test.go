package web

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// createTokenAs creates a token on the dashboard as b (with a step-up)
// and returns its secret.
func createTokenAs(t *testing.T, b *browser, name string, scope store.Scope) string {
	t.Helper()
	p := b.postStepped("/users/tokens", url.Values{"name": {name}, "scope": {string(scope)}})
	m := secretValue.FindStringSubmatch(p.body)
	if p.code != http.StatusOK || m == nil {
		t.Fatalf("create token %s: %d %.300s", name, p.code, p.body)
	}
	return html.UnescapeString(m[1])
}

func bearerCode(t *testing.T, e *testEnv, secret string) int {
	t.Helper()
	code, _ := e.do(t, http.MethodGet, "/api/v1/drafts", "", nil, http.Header{"Authorization": {"Bearer " + secret}})
	return code
}

// TestRemovedAdminsTokenStaysDead: the review's attack. admin2 makes a
// token, is removed, and a new admin2 is created: the old token stays 401
// (it is revoked with the removal and bound to the old person's id), and
// /users lists it as revoked.
func TestRemovedAdminsTokenStaysDead(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	second := loggedIn(t, e, "admin2", store.RoleAdmin, "")
	secret := createTokenAs(t, second, "ci", store.ScopeAdmin)
	if code := bearerCode(t, e, secret); code != http.StatusOK {
		t.Fatalf("the token before: %d, want 200", code)
	}
	if p := root.post("/users/admin2/remove", nil); p.code != http.StatusOK || !strings.Contains(p.body, "Their API token is revoked (ci)") {
		t.Fatalf("remove admin2: %d %.300s", p.code, p.body)
	}
	if code := bearerCode(t, e, secret); code != http.StatusUnauthorized {
		t.Errorf("the removed admin's token: %d, want 401", code)
	}
	if p := root.post("/users", url.Values{"name": {"admin2"}, "role": {"admin"}, "password": {"correct horse battery staple"}}); p.code != http.StatusOK {
		t.Fatalf("create a new admin2: %d %.300s", p.code, p.body)
	}
	if code := bearerCode(t, e, secret); code != http.StatusUnauthorized {
		t.Errorf("the old token once a new admin2 exists: %d, want 401", code)
	}
	toks, err := e.st.Tokens()
	if err != nil || len(toks) != 1 || toks[0].RevokedAt == nil {
		t.Fatalf("tokens: %+v %v; want the one, revoked", toks, err)
	}
	u, _ := e.st.User("admin2")
	if u.ID == "" || u.ID == toks[0].UserID {
		t.Errorf("the new admin2's id %q is the old token's owner %q", u.ID, toks[0].UserID)
	}
	// Even unrevoked, a token of another person's id opens nothing.
	if err := e.st.CreateToken(context.Background(), users.HashSecret("forged-owner"), store.Token{ID: "T9", Name: "x", User: "admin2", UserID: toks[0].UserID, Scope: store.ScopeAdmin, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if code := bearerCode(t, e, "forged-owner"); code != http.StatusUnauthorized {
		t.Errorf("a live token bound to the removed admin2's id: %d, want 401", code)
	}
}

// TestDemotionRevokesTokens: an admin made approver loses every token at
// once, the change says so, /users showed how many would go, and making
// them admin again brings none back.
func TestDemotionRevokesTokens(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	bea := loggedIn(t, e, "beatrix", store.RoleAdmin, "")
	adminTok := createTokenAs(t, bea, "deploy", store.ScopeAdmin)
	readTok := createTokenAs(t, bea, "dash", store.ScopeRead)
	if p := root.getOK("/users"); !strings.Contains(p.body, "2 live tokens, revoked if demoted or removed") {
		t.Errorf("/users does not say whose tokens a demotion stops: %.3000s", p.body)
	}
	p := root.post("/users/beatrix/role", url.Values{"role": {"approver"}})
	if p.code != http.StatusOK || !strings.Contains(p.body, "Their 2 API tokens are revoked (dash, deploy)") {
		t.Fatalf("demote: %d %.300s", p.code, p.body)
	}
	root.post("/users/beatrix/role", url.Values{"role": {"admin"}})
	for name, tok := range map[string]string{"admin": adminTok, "read": readTok} {
		if code := bearerCode(t, e, tok); code != http.StatusUnauthorized {
			t.Errorf("the %s token after a demotion and a promotion: %d, want 401", name, code)
		}
	}
	wantAudit(t, e.st, "root", "change user")
}

// TestStolenSessionNeedsThePassword: a session cookie alone (no password)
// enrols no second factor, makes no token, changes no password and
// restores nothing; with the password it does, and the step-up then
// covers the next action for five minutes and no longer.
func TestStolenSessionNeedsThePassword(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, nil, envOptions{now: clk.Now})
	boss := loggedIn(t, e, "boss", store.RoleAdmin, "")
	boss.getOK("/account")
	for _, tc := range []struct{ path string }{
		{"/account/totp/start"}, {"/users/tokens"}, {"/account/password"}, {"/backups/restore"},
	} {
		form := url.Values{"name": {"stolen"}, "scope": {"admin"}, "password": {"an attacker passphrase"}, "source": {"local:x"}, "confirm": {"restore"}}
		if p := boss.post(tc.path, form); p.code != http.StatusForbidden || !strings.Contains(p.body, "password again") {
			t.Errorf("POST %s with the session alone: %d %.200s, want 403", tc.path, p.code, p.body)
		}
	}
	if u, _ := e.st.User("boss"); u.PendingTOTP != "" || u.TOTP != nil {
		t.Error("the session alone started an enrolment")
	}
	if toks, _ := e.st.Tokens(); len(toks) != 0 {
		t.Errorf("the session alone made tokens: %+v", toks)
	}
	// The owner can still log in: the password did not change.
	newBrowser(t, e.url).login("boss", "boss-password")

	if p := boss.postStepped("/account/totp/start", nil); p.code != http.StatusOK || !strings.Contains(p.body, "otpauth://") {
		t.Fatalf("enrol with the password: %d %.300s", p.code, p.body)
	}
	clk.Add(users.StepUpFor - time.Second)
	if p := boss.post("/users/tokens", url.Values{"name": {"within"}, "scope": {"read"}}); p.code != http.StatusOK {
		t.Errorf("a token within the step-up: %d %.200s", p.code, p.body)
	}
	clk.Add(2 * time.Second)
	if p := boss.post("/users/tokens", url.Values{"name": {"after"}, "scope": {"read"}}); p.code != http.StatusForbidden {
		t.Errorf("a token after the step-up ran out: %d, want 403", p.code)
	}
	wantAudit(t, e.st, "boss", "step-up")
}

// TestTokenClientsOnlyWhereMeaningful: a keys, metrics or admin token
// with clients is refused at creation (it would ignore them); read and
// approve tokens take them.
func TestTokenClientsOnlyWhereMeaningful(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	for _, sc := range []store.Scope{store.ScopeKeys, store.ScopeMetrics, store.ScopeAdmin} {
		p := root.postStepped("/users/tokens", url.Values{"name": {"t-" + string(sc)}, "scope": {string(sc)}, "clients": {"acme"}})
		if p.code != http.StatusBadRequest || !strings.Contains(p.body, "only a read or approve token can be limited to clients") {
			t.Errorf("a %s token with clients: %d %.200s, want 400", sc, p.code, p.body)
		}
	}
	if p := root.post("/users/tokens", url.Values{"name": {"r"}, "scope": {"read"}, "clients": {"acme"}}); p.code != http.StatusOK {
		t.Errorf("a read token with clients: %d %.200s", p.code, p.body)
	}
	if toks, _ := e.st.Tokens(); len(toks) != 1 || toks[0].Scope != store.ScopeRead {
		t.Errorf("tokens: %+v, want the read one only", toks)
	}
}

// TestMetricsSessionNeedsSecondFactor: with require_totp_for_admins, an
// admin's session without a second factor gets no /metrics; a token does.
func TestMetricsSessionNeedsSecondFactor(t *testing.T) {
	t.Parallel()
	cfg := pagesConfig()
	cfg.Auth.RequireTOTPForAdmins = true
	e := newTestEnv(t, cfg)
	addUser(t, e.st, "boss", store.RoleAdmin, "", "boss-password")
	b := newBrowser(t, e.url)
	if p := b.do(http.MethodPost, "/login", url.Values{"name": {"boss"}, "password": {"boss-password"}}, nil); p.code != http.StatusSeeOther {
		t.Fatalf("login: %d", p.code)
	}
	if p := b.get("/metrics"); p.code == http.StatusOK || strings.Contains(p.body, "handoff_") {
		t.Errorf("/metrics with an unenrolled admin's session: %d, want it refused", p.code)
	}
	if p := serveOnce(e.srv.e, http.MethodGet, "/metrics", "", testToken); p.Code != http.StatusOK {
		t.Errorf("/metrics with the API token: %d, want 200", p.Code)
	}
}

// TestPasswordsRefuseNames: an admin's new password built on the product's
// name, a client's name or a keyboard walk is refused, on the dashboard
// and on the account page; an approver's rule is the lower score.
func TestPasswordsRefuseNames(t *testing.T) {
	t.Parallel()
	cfg := twoClients()
	cfg.Clients[0].Name = "Acme Ltd"
	e := newTestEnv(t, cfg)
	root := loggedIn(t, e, "root", store.RoleAdmin, "")
	for _, weak := range []string{"handoff12345", "acmeltd2026!", "qwertyuiopas"} {
		p := root.post("/users", url.Values{"name": {"adm"}, "role": {"admin"}, "password": {weak}})
		if p.code != http.StatusBadRequest || !strings.Contains(p.body, "easy to guess") && !strings.Contains(p.body, "common") {
			t.Errorf("an admin with password %q: %d %.200s, want 400", weak, p.code, p.body)
		}
		if p := root.postStepped("/account/password", url.Values{"password": {weak}}); p.code != http.StatusBadRequest {
			t.Errorf("root's own password %q: %d, want 400", weak, p.code)
		}
	}
	if _, err := e.st.User("adm"); err == nil {
		t.Error("a refused admin was created")
	}
	// The person's own name.
	if p := root.post("/users", url.Values{"name": {"rosalind"}, "role": {"admin"}, "password": {"rosalind2026!"}}); p.code != http.StatusBadRequest {
		t.Errorf("an admin named rosalind with password rosalind2026!: %d, want 400", p.code)
	}
	if p := root.post("/users", url.Values{"name": {"adm"}, "role": {"admin"}, "password": {"violet tractor harbour"}}); p.code != http.StatusOK {
		t.Errorf("an admin with a good passphrase: %d %.200s", p.code, p.body)
	}
	// An approver's rule is score 2: a walk is still out.
	if p := root.post("/users", url.Values{"name": {"appr"}, "role": {"approver"}, "password": {"qwertyuiopas"}}); p.code != http.StatusBadRequest {
		t.Errorf("an approver with a keyboard walk: %d, want 400", p.code)
	}
}

// TestSecondFactorSealed: with a secret key, the stored second-factor
// secret is sealed (the plain one is nowhere in the record), a login's
// code still works, and a plain secret stored before the key is read and
// sealed on its next use; the account page says what a backup reveals
// without a key.
func TestSecondFactorSealed(t *testing.T) {
	t.Parallel()
	cfg := pagesConfig()
	cfg.Auth.SecretKey = strings.Repeat("k", 40)
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, cfg, envOptions{now: clk.Now})
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	secret, _ := enrol(t, ann, clk)
	u, _ := e.st.User("ann")
	if !password.Sealed(u.TOTP.Secret) || strings.Contains(u.TOTP.Secret, secret) {
		t.Fatalf("the stored secret %q is not sealed", u.TOTP.Secret)
	}
	if p := ann.getOK("/account"); !strings.Contains(p.body, "encrypted in the database") {
		t.Error("the account page does not say the secrets are encrypted")
	}
	clk.Add(30 * time.Second)
	code, _ := password.TOTPCode(secret, clk.Now())
	if p := codeLogin(t, newBrowser(t, e.url), "ann", "ann-password", code); p.code != http.StatusSeeOther {
		t.Errorf("a login with a sealed secret's code: %d %.200s", p.code, p.body)
	}

	// A secret stored plain (before the key) works, and is sealed by it.
	plain, _, _ := password.NewTOTP("handoff", "bob")
	addUser(t, e.st, "bobby", store.RoleApprover, "", "bobby-password")
	if err := e.st.Update(context.Background(), func(tx *store.Tx) error {
		u, err := tx.User("bobby")
		if err != nil {
			return err
		}
		u.TOTP = &store.TOTP{Secret: plain, EnrolledAt: clk.Now()}
		return tx.PutUser(u)
	}); err != nil {
		t.Fatal(err)
	}
	code, _ = password.TOTPCode(plain, clk.Now())
	if p := codeLogin(t, newBrowser(t, e.url), "bobby", "bobby-password", code); p.code != http.StatusSeeOther {
		t.Errorf("a login with a plain secret: %d %.200s", p.code, p.body)
	}
	if u, _ := e.st.User("bobby"); !password.Sealed(u.TOTP.Secret) {
		t.Errorf("the plain secret is still plain after its use: %q", u.TOTP.Secret)
	}

	// Without a key the account page says what a backup reveals.
	plainEnv := newTestEnv(t, nil)
	if p := loggedIn(t, plainEnv, "cyril", store.RoleApprover, "").getOK("/account"); !strings.Contains(p.body, "anyone with the database file or a backup of it can make this account") {
		t.Error("without a key the account page does not say what a backup reveals")
	}
}
