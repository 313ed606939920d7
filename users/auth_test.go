package users

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// addWithPassword adds name with the password pw.
func addWithPassword(t *testing.T, st *store.Store, name string, role store.Role, pw string) {
	t.Helper()
	hash, err := password.Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateUser(context.Background(), store.User{Name: name, Role: role, PasswordHash: hash, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
}

// TestLoginSessionLifetime: a right password starts a session the secret
// finds; a wrong one is ErrLoginFailed and counts; a session idle past
// SessionIdle opens nothing and is gone; a disabled person's session
// opens nothing.
func TestLoginSessionLifetime(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	addWithPassword(t, st, "ann", store.RoleAdmin, "ann-password-1")
	a := New(st, Options{})
	if _, err := a.Login(ctx, "ann", "wrong", "192.0.2.1", t0); !errors.Is(err, ErrLoginFailed) {
		t.Fatalf("wrong password: %v, want ErrLoginFailed", err)
	}
	if _, err := a.Login(ctx, "nobody", "x", "192.0.2.1", t0); !errors.Is(err, ErrLoginFailed) {
		t.Fatalf("unknown name: %v, want ErrLoginFailed", err)
	}
	secret, err := a.Login(ctx, "ann", "ann-password-1", "192.0.2.1", t0)
	if err != nil {
		t.Fatal(err)
	}
	sess, u, hash, err := a.Session(ctx, secret, t0.Add(time.Minute))
	if err != nil || u.Name != "ann" || sess.CSRF == "" || len(hash) == 0 {
		t.Fatalf("the new session: %+v %q %v", sess, u.Name, err)
	}
	if _, _, _, err := a.Session(ctx, secret, t0.Add(SessionIdle+2*time.Minute)); !errors.Is(err, ErrNoSession) {
		t.Fatalf("an idle session: %v, want ErrNoSession", err)
	}
	if _, err := st.Session(HashSecret(secret)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired session is still stored: %v", err)
	}

	again, err := a.Login(ctx, "ann", "ann-password-1", "192.0.2.1", t0)
	if err != nil {
		t.Fatal(err)
	}
	addTestUser(t, st, "bob", store.RoleAdmin)
	if err := a.SetDisabled(ctx, "ann", true, store.AuditEntry{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.Session(ctx, again, t0); !errors.Is(err, ErrNoSession) {
		t.Errorf("a disabled person's session: %v, want ErrNoSession", err)
	}
	if _, err := a.Login(ctx, "ann", "ann-password-1", "192.0.2.1", t0); !errors.Is(err, ErrAccountDisabled) {
		t.Errorf("a disabled person's login: %v, want ErrAccountDisabled", err)
	}
}

// TestLoginLockout: past LoginPerPair failures of a name from an address
// the right password is refused with *TooMany, from that address only.
func TestLoginLockout(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	addWithPassword(t, st, "ann", store.RoleAdmin, "ann-password-1")
	a := New(st, Options{})
	for range LoginPerPair {
		if _, err := a.Login(ctx, "ann", "wrong", "192.0.2.1", t0); !errors.Is(err, ErrLoginFailed) {
			t.Fatal(err)
		}
	}
	var tm *TooMany
	if _, err := a.Login(ctx, "ann", "ann-password-1", "192.0.2.1", t0); !errors.As(err, &tm) || tm.Retry != LoginWindow {
		t.Fatalf("the right password past the limit: %v, want *TooMany for %s", err, LoginWindow)
	}
	if _, err := a.Login(ctx, "ann", "ann-password-1", "198.51.100.1", t0); err != nil {
		t.Errorf("another address's first try: %v, want a session", err)
	}
	if !a.Logins().UnlockName("ann") {
		t.Fatal("nothing to unlock")
	}
	if _, err := a.Login(ctx, "ann", "ann-password-1", "192.0.2.1", t0); err != nil {
		t.Errorf("after the unlock: %v, want a session", err)
	}
}

// TestStepUpWindow: a step-up with the right password covers StepUpFor
// and no longer; a wrong password is ErrWrongPassword and records none.
func TestStepUpWindow(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	addWithPassword(t, st, "ann", store.RoleAdmin, "ann-password-1")
	a := New(st, Options{})
	secret, err := a.Login(ctx, "ann", "ann-password-1", "192.0.2.1", t0)
	if err != nil {
		t.Fatal(err)
	}
	hash := HashSecret(secret)
	if err := a.StepUp(ctx, "ann", hash, "wrong", "", "192.0.2.1", t0); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	if sess, _ := st.Session(hash); SteppedUp(&sess, t0) {
		t.Fatal("a wrong password stepped up")
	}
	if err := a.StepUp(ctx, "ann", hash, "ann-password-1", "", "192.0.2.1", t0); err != nil {
		t.Fatal(err)
	}
	sess, err := st.Session(hash)
	if err != nil {
		t.Fatal(err)
	}
	if !SteppedUp(&sess, t0.Add(StepUpFor-time.Second)) || SteppedUp(&sess, t0.Add(StepUpFor)) {
		t.Errorf("the step-up at %s covers %s-1s: %v, %s: %v; want true, false", t0, StepUpFor,
			SteppedUp(&sess, t0.Add(StepUpFor-time.Second)), StepUpFor, SteppedUp(&sess, t0.Add(StepUpFor)))
	}
}

// TestTokenRules: a minted token acts for its admin with its scope; a
// limit to clients is refused on a scope that reads none or all; a token
// is refused once revoked, or once its admin is demoted; scopes cover
// what they should.
func TestTokenRules(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	addTestUser(t, st, "boss", store.RoleAdmin)
	addTestUser(t, st, "other", store.RoleAdmin)
	a := New(st, Options{APIToken: "the-api-token"})
	if _, _, err := a.MintToken(ctx, NewToken{Name: "k", User: "boss", Scope: store.ScopeKeys, Clients: []string{"acme"}}, t0, store.AuditEntry{}); !errors.As(err, new(*Invalid)) {
		t.Errorf("a keys token limited to clients: %v, want *Invalid", err)
	}
	if _, _, err := a.MintToken(ctx, NewToken{Name: "bad name!", User: "boss", Scope: store.ScopeRead}, t0, store.AuditEntry{}); !errors.Is(err, ErrTokenName) {
		t.Errorf("a bad name: %v, want ErrTokenName", err)
	}
	secret, tok, err := a.MintToken(ctx, NewToken{Name: "r", User: "boss", Scope: store.ScopeRead, Clients: []string{"acme"}}, t0, store.AuditEntry{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Bearer(ctx, secret, "192.0.2.1", t0)
	if err != nil || c.Scope != store.ScopeRead || len(c.Clients) != 1 || !c.May(store.ScopeRead) || c.May(store.ScopeApprove) {
		t.Fatalf("the read token: %+v %v", c, err)
	}
	if c, err := a.Bearer(ctx, "the-api-token", "192.0.2.1", t0); err != nil || !c.May(store.ScopeAdmin) {
		t.Errorf("the API token: %+v %v", c, err)
	}
	var refused *TokenRefused
	if _, err := a.Bearer(ctx, "", "192.0.2.1", t0); !errors.As(err, &refused) {
		t.Errorf("a malformed header: %v, want *TokenRefused", err)
	}
	if _, err := a.Change(ctx, "boss", store.RoleApprover, "", nil, t0, store.AuditEntry{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Bearer(ctx, secret, "192.0.2.1", t0); !errors.As(err, &refused) {
		t.Errorf("the demoted admin's token: %v, want *TokenRefused", err)
	}
	if _, err := a.RevokeToken(ctx, tok.ID, t0, store.AuditEntry{}); err != nil {
		t.Fatal(err)
	}
	if approver := (Caller{Role: store.RoleApprover}); !approver.May(store.ScopeRead) || approver.May(store.ScopeKeys) || !approver.May("") {
		t.Error("an approver's session covers read, not keys")
	}
}

// TestEndOtherSessions: every session of the person but the one kept
// ends, with the audit entry, in one write.
func TestEndOtherSessions(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	addTestUser(t, st, "ada", store.RoleAdmin)
	keep := addTestSession(t, st, "here", "ada")
	addTestSession(t, st, "phone", "ada")
	addTestSession(t, st, "laptop", "ada")
	a := New(st, Options{})
	n, err := a.EndOtherSessions(ctx, "ada", keep, store.AuditEntry{At: t0, Who: "ada", Action: "log out other sessions"})
	if err != nil || n != 2 {
		t.Fatalf("EndOtherSessions = %d, %v; want 2", n, err)
	}
	if c, _ := st.SessionCount("ada", nil); c != 1 {
		t.Errorf("sessions left: %d, want the one kept", c)
	}
	if _, _, err := st.SessionUser(keep); err != nil {
		t.Errorf("the kept session: %v", err)
	}
	if log, err := st.AuditLog(10); err != nil || len(log) != 1 || log[0].Action != "log out other sessions" {
		t.Errorf("audit log = %+v, %v; want the one entry", log, err)
	}
}
