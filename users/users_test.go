package users

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func openTest(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("Check at the end of the test: %v", err)
		}
		st.Close()
	})
	return st
}

func addTestUser(t *testing.T, st *store.Store, name string, role store.Role) {
	t.Helper()
	if err := st.CreateUser(context.Background(), store.User{Name: name, Role: role, PasswordHash: []byte("x"), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
}

func addTestSession(t *testing.T, st *store.Store, secret, user string) []byte {
	t.Helper()
	sum := sha256.Sum256([]byte(secret))
	if err := st.CreateSession(context.Background(), sum[:], store.Session{User: user, CSRF: "c", CreatedAt: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	return sum[:]
}

func enabledAdmins(t *testing.T, st *store.Store) []string {
	t.Helper()
	all, err := st.Users()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range all {
		if enabledAdmin(u) {
			out = append(out, u.Name)
		}
	}
	return out
}

func audit(action, target string) store.AuditEntry {
	return store.AuditEntry{At: t0, Who: "x", Action: action, Target: target}
}

// TestLastAdminUnderConcurrency: with two admins, forty requests at once
// try to disable, demote and remove both of them. The check (another
// enabled admin exists) and the write share one transaction, so one admin
// always remains, and each change that succeeded left its audit entry.
func TestLastAdminUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(a *Accounts, name string) error
	}{
		{"disable", func(a *Accounts, name string) error {
			return a.SetDisabled(context.Background(), name, true, audit("disable user", name))
		}},
		{"demote", func(a *Accounts, name string) error {
			_, err := a.Change(context.Background(), name, store.RoleApprover, "", nil, t0, audit("change user", name))
			return err
		}},
		{"remove", func(a *Accounts, name string) error {
			_, err := a.Remove(context.Background(), name, t0, audit("remove user", name))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openTest(t)
			a := New(st, Options{})
			addTestUser(t, st, "ada", store.RoleAdmin)
			addTestUser(t, st, "bob", store.RoleAdmin)
			addTestUser(t, st, "cy", store.RoleApprover)
			const n = 40
			errs := make([]error, n)
			testkit.Together(n, func(i int) { errs[i] = tc.change(a, []string{"ada", "bob"}[i%2]) })
			var ok, last int
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrLastAdmin):
					last++
				case errors.Is(err, store.ErrNotFound) && tc.name == "remove":
					// removed by an earlier request
				default:
					t.Errorf("change: %v", err)
				}
			}
			if got := enabledAdmins(t, st); len(got) != 1 {
				t.Fatalf("enabled admins after the race: %v, want exactly one", got)
			}
			if last == 0 {
				t.Errorf("no request was refused as the last admin; the race was not run")
			}
			log, err := st.AuditLog(1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(log) != ok {
				t.Errorf("%d changes succeeded, %d audit entries; want one each", ok, len(log))
			}
		})
	}
}

func TestLastAdminAlone(t *testing.T) {
	st := openTest(t)
	a := New(st, Options{})
	addTestUser(t, st, "ada", store.RoleAdmin)
	addTestUser(t, st, "cy", store.RoleApprover)
	ctx := context.Background()
	if err := a.SetDisabled(ctx, "ada", true, store.AuditEntry{}); !errors.Is(err, ErrLastAdmin) {
		t.Errorf("disable the only admin: %v, want ErrLastAdmin", err)
	}
	if _, err := a.Change(ctx, "ada", store.RoleApprover, "", nil, t0, store.AuditEntry{}); !errors.Is(err, ErrLastAdmin) {
		t.Errorf("demote the only admin: %v, want ErrLastAdmin", err)
	}
	if _, err := a.Remove(ctx, "ada", t0, store.AuditEntry{}); !errors.Is(err, ErrLastAdmin) {
		t.Errorf("remove the only admin: %v, want ErrLastAdmin", err)
	}
	var c *Conflict
	if !errors.As(ErrLastAdmin, &c) {
		t.Errorf("ErrLastAdmin is %T, want a *Conflict (a 409)", ErrLastAdmin)
	}
	// An approver may go, and an admin may change what is not their role.
	if _, err := a.Remove(ctx, "cy", t0, store.AuditEntry{}); err != nil {
		t.Errorf("remove an approver: %v", err)
	}
	if _, err := a.Change(ctx, "ada", store.RoleAdmin, "sales", nil, t0, store.AuditEntry{}); err != nil {
		t.Errorf("change the only admin's owner: %v", err)
	}
	if err := a.SetDisabled(ctx, "nobody", true, store.AuditEntry{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("disable a person who is not: %v, want store.ErrNotFound", err)
	}
}

// TestDisableEndsSessions: disabling deletes the person's sessions in its
// own transaction; others keep theirs; removing deletes the rest and
// keeps the audit trail.
func TestDisableEndsSessions(t *testing.T) {
	st := openTest(t)
	a := New(st, Options{})
	ctx := context.Background()
	addTestUser(t, st, "ada", store.RoleAdmin)
	addTestUser(t, st, "cy", store.RoleApprover)
	s1 := addTestSession(t, st, "one", "cy")
	s2 := addTestSession(t, st, "two", "cy")
	other := addTestSession(t, st, "three", "ada")
	if err := a.SetDisabled(ctx, "cy", true, store.AuditEntry{}); err != nil {
		t.Fatal(err)
	}
	for _, h := range [][]byte{s1, s2} {
		if _, _, err := st.SessionUser(h); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a disabled user's session: %v, want it deleted (ErrNotFound)", err)
		}
	}
	if _, u, err := st.SessionUser(other); err != nil || u.Name != "ada" {
		t.Errorf("another user's session: %v, %v; want it kept", u.Name, err)
	}
	if err := a.SetDisabled(ctx, "cy", false, store.AuditEntry{}); err != nil {
		t.Fatal(err)
	}
	late := addTestSession(t, st, "late", "cy")
	if _, err := a.Remove(ctx, "cy", t0, audit("remove user", "cy")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SessionUser(late); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a removed user's session: %v, want ErrNotFound", err)
	}
	if _, err := st.User("cy"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("User(removed) = %v, want ErrNotFound", err)
	}
	if log, _ := st.AuditLog(10); len(log) != 1 || log[0].Action != "remove user" {
		t.Errorf("audit after remove: %+v, want the removal kept", log)
	}
}

// TestDemotionAuditNamesTokens: the audit entry of a demotion names the
// tokens it revoked, written in the same transaction (the dashboard's
// entry used to be built before the change ran, so it never named any).
func TestDemotionAuditNamesTokens(t *testing.T) {
	st := openTest(t)
	a := New(st, Options{})
	ctx := context.Background()
	addTestUser(t, st, "ada", store.RoleAdmin)
	addTestUser(t, st, "bob", store.RoleAdmin)
	bob, err := st.User("bob")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"deploy", "ci"} {
		sum := sha256.Sum256([]byte(name))
		if err := st.CreateToken(ctx, sum[:], store.Token{ID: "t" + string(rune('0'+i)), Name: name, UserID: bob.ID, User: "bob", Scope: store.ScopeRead, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	revoked, err := a.Change(ctx, "bob", store.RoleApprover, "", nil, t0, audit("change user", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	if got := TokenNames(revoked); got != "ci, deploy" {
		t.Errorf("revoked %q, want ci, deploy", got)
	}
	log, _ := st.AuditLog(10)
	if len(log) != 1 || log[0].Detail != "; tokens revoked: ci, deploy" {
		t.Errorf("audit of the demotion: %+v, want its detail to name ci, deploy", log)
	}
}

// TestRemoveForgetsPushSubscriptions: removing a person deletes the
// browsers they turned notifications on in (personal data the product no
// longer needs, and an endpoint a later person of the same name must never
// be pushed to); another person's, even one whose name begins with theirs,
// are kept.
func TestRemoveForgetsPushSubscriptions(t *testing.T) {
	st := openTest(t)
	a := New(st, Options{})
	ctx := context.Background()
	addTestUser(t, st, "ada", store.RoleAdmin)
	addTestUser(t, st, "cy", store.RoleApprover)
	addTestUser(t, st, "cya", store.RoleApprover)
	for _, s := range []store.WebPushSubscription{
		{User: "cy", Endpoint: "https://push.example/1", P256DH: "k", Auth: "a", CreatedAt: t0},
		{User: "cy", Endpoint: "https://push.example/2", P256DH: "k", Auth: "a", CreatedAt: t0},
		{User: "cya", Endpoint: "https://push.example/3", P256DH: "k", Auth: "a", CreatedAt: t0},
	} {
		if err := st.Update(ctx, func(tx *store.Tx) error { return tx.PutWebPushSubscription(s) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Remove(ctx, "cy", t0, store.AuditEntry{}); err != nil {
		t.Fatal(err)
	}
	if subs, err := st.WebPushSubscriptions("cy"); err != nil || len(subs) != 0 {
		t.Errorf("a removed person's subscriptions: %d, %v; want none", len(subs), err)
	}
	if subs, _ := st.WebPushSubscriptions("cya"); len(subs) != 1 || subs[0].Endpoint != "https://push.example/3" {
		t.Errorf("another person's subscriptions after the removal: %+v, want theirs kept", subs)
	}
}
