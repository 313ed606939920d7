package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func addTestUser(t *testing.T, st *Store, name string, role Role) {
	t.Helper()
	if err := st.CreateUser(context.Background(), User{Name: name, Role: role, PasswordHash: []byte("x"), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
}

func sessionHash(s string) []byte { sum := sha256.Sum256([]byte(s)); return sum[:] }

func addTestSession(t *testing.T, st *Store, secret, user string, at time.Time) []byte {
	t.Helper()
	h := sessionHash(secret)
	if err := st.CreateSession(context.Background(), h, Session{User: user, CSRF: "c", CreatedAt: at, LastSeen: at}); err != nil {
		t.Fatal(err)
	}
	return h
}

func enabledAdmins(t *testing.T, st *Store) []string {
	t.Helper()
	users, err := st.Users()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range users {
		if enabledAdmin(u) {
			out = append(out, u.Name)
		}
	}
	return out
}

// TestLastAdminUnderConcurrency: with two admins, forty requests at once
// try to disable, demote and remove both of them. The check (another
// enabled admin exists) and the write share one transaction, so one admin
// always remains, and each change that succeeded left its audit entry.
func TestLastAdminUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(st *Store, name string) error
	}{
		{"disable", func(st *Store, name string) error {
			_, err := st.UpdateUser(context.Background(), name, func(_ *Tx, u *User) error { u.Disabled = true; return nil },
				AuditEntry{At: t0, Who: "x", Action: "disable user", Target: name})
			return err
		}},
		{"demote", func(st *Store, name string) error {
			_, err := st.UpdateUser(context.Background(), name, func(_ *Tx, u *User) error { u.Role = RoleApprover; return nil },
				AuditEntry{At: t0, Who: "x", Action: "change user", Target: name})
			return err
		}},
		{"remove", func(st *Store, name string) error {
			_, err := st.RemoveUser(context.Background(), name, t0, AuditEntry{At: t0, Who: "x", Action: "remove user", Target: name})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openTest(t)
			addTestUser(t, st, "ada", RoleAdmin)
			addTestUser(t, st, "bob", RoleAdmin)
			addTestUser(t, st, "cy", RoleApprover)
			const n = 40
			errs := make([]error, n)
			together(n, func(i int) { errs[i] = tc.change(st, []string{"ada", "bob"}[i%2]) })
			var ok, last int
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrLastAdmin):
					last++
				case errors.Is(err, ErrNotFound) && tc.name == "remove":
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
	addTestUser(t, st, "ada", RoleAdmin)
	addTestUser(t, st, "cy", RoleApprover)
	if _, err := st.UpdateUser(context.Background(), "ada", func(_ *Tx, u *User) error { u.Disabled = true; return nil }); !errors.Is(err, ErrLastAdmin) {
		t.Errorf("disable the only admin: %v, want ErrLastAdmin", err)
	}
	if _, err := st.RemoveUser(context.Background(), "ada", t0); !errors.Is(err, ErrLastAdmin) {
		t.Errorf("remove the only admin: %v, want ErrLastAdmin", err)
	}
	// An approver may go, and an admin may change what is not their role.
	if _, err := st.RemoveUser(context.Background(), "cy", t0); err != nil {
		t.Errorf("remove an approver: %v", err)
	}
	if _, err := st.UpdateUser(context.Background(), "ada", func(_ *Tx, u *User) error { u.Owner = "sales"; return nil }); err != nil {
		t.Errorf("change the only admin's owner: %v", err)
	}
	if _, err := st.UpdateUser(context.Background(), "nobody", func(_ *Tx, u *User) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("change a user who is not: %v, want ErrNotFound", err)
	}
}

// TestDisableEndsSessions: disabling deletes the person's sessions in its
// own transaction; a session found later for a disabled user is refused by
// SessionUser, which reads both in one transaction; others keep theirs.
func TestDisableEndsSessions(t *testing.T) {
	st := openTest(t)
	addTestUser(t, st, "ada", RoleAdmin)
	addTestUser(t, st, "cy", RoleApprover)
	s1 := addTestSession(t, st, "one", "cy", t0)
	s2 := addTestSession(t, st, "two", "cy", t0)
	other := addTestSession(t, st, "three", "ada", t0)
	if _, _, err := st.SessionUser(s1); err != nil {
		t.Fatalf("a live session: %v", err)
	}
	if _, err := st.UpdateUser(context.Background(), "cy", func(_ *Tx, u *User) error { u.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, h := range [][]byte{s1, s2} {
		if _, _, err := st.SessionUser(h); !errors.Is(err, ErrNotFound) {
			t.Errorf("a disabled user's session: %v, want it deleted (ErrNotFound)", err)
		}
	}
	if _, u, err := st.SessionUser(other); err != nil || u.Name != "ada" {
		t.Errorf("another user's session: %v, %v; want it kept", u.Name, err)
	}
	late := addTestSession(t, st, "late", "cy", t0)
	if _, _, err := st.SessionUser(late); !errors.Is(err, ErrDisabled) {
		t.Errorf("a session of a disabled user: %v, want ErrDisabled", err)
	}
	if _, err := st.ActiveUser("cy"); !errors.Is(err, ErrDisabled) {
		t.Errorf("ActiveUser(disabled) = %v, want ErrDisabled", err)
	}
	if _, err := st.UpdateUser(context.Background(), "cy", func(_ *Tx, u *User) error { u.Disabled = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ActiveUser("cy"); err != nil {
		t.Errorf("ActiveUser(enabled again) = %v", err)
	}
	if _, err := st.RemoveUser(context.Background(), "cy", t0, AuditEntry{At: t0, Who: "ada", Action: "remove user", Target: "cy"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SessionUser(late); !errors.Is(err, ErrNotFound) {
		t.Errorf("a removed user's session: %v, want ErrNotFound", err)
	}
	if _, err := st.ActiveUser("cy"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ActiveUser(removed) = %v, want ErrNotFound", err)
	}
	if log, _ := st.AuditLog(10); len(log) != 1 || log[0].Action != "remove user" {
		t.Errorf("audit after remove: %+v, want the removal kept", log)
	}
}

func TestEndOtherSessions(t *testing.T) {
	st := openTest(t)
	addTestUser(t, st, "ada", RoleAdmin)
	keep := addTestSession(t, st, "here", "ada", t0)
	addTestSession(t, st, "phone", "ada", t0)
	addTestSession(t, st, "laptop", "ada", t0)
	n, err := st.EndSessions(context.Background(), "ada", keep, AuditEntry{At: t0, Who: "ada", Action: "log out other sessions"})
	if err != nil || n != 2 {
		t.Fatalf("EndSessions = %d, %v; want 2", n, err)
	}
	if c, _ := st.SessionCount("ada", nil); c != 1 {
		t.Errorf("sessions left: %d, want the one kept", c)
	}
	if _, _, err := st.SessionUser(keep); err != nil {
		t.Errorf("the kept session: %v", err)
	}
}

func TestSweepSessions(t *testing.T) {
	st := openTest(t)
	addTestUser(t, st, "ada", RoleAdmin)
	addTestUser(t, st, "gone", RoleApprover)
	now := t0.Add(30 * 24 * time.Hour)
	live := addTestSession(t, st, "live", "ada", now.Add(-time.Hour))
	addTestSession(t, st, "idle", "ada", now.Add(-SessionIdle-time.Minute))
	old := sessionHash("old")
	_ = st.CreateSession(context.Background(), old, Session{User: "ada", CreatedAt: now.Add(-SessionMax - time.Minute), LastSeen: now})
	pend := sessionHash("pending")
	_ = st.CreateSession(context.Background(), pend, Session{User: "ada", Pending: true, CreatedAt: now.Add(-SessionPending - time.Second), LastSeen: now})
	orphan := addTestSession(t, st, "orphan", "gone", now)
	if err := st.update(context.Background(), func(tx *Tx) error { return tx.bucket(bucketUsers).Delete([]byte("gone")) }); err != nil {
		t.Fatal(err)
	}
	n, err := st.SweepSessions(context.Background(), now)
	if err != nil || n != 4 {
		t.Fatalf("SweepSessions = %d, %v; want 4 (idle, old, pending, orphan)", n, err)
	}
	if _, err := st.Session(live); err != nil {
		t.Errorf("the live session was swept: %v", err)
	}
	for _, h := range [][]byte{old, pend, orphan} {
		if _, err := st.Session(h); !errors.Is(err, ErrNotFound) {
			t.Errorf("an expired session is still there: %v", err)
		}
	}
}

// TestSetupLinkOnceUnderConcurrency: twenty browsers post the setup link at
// once; one creates its admin, the others are refused, and the link works
// no more.
func TestSetupLinkOnceUnderConcurrency(t *testing.T) {
	st := openTest(t)
	hash := sessionHash("the-link")
	made, err := st.CreateSetupLink(context.Background(), hash, t0.Add(time.Hour))
	if err != nil || !made {
		t.Fatalf("CreateSetupLink = %v, %v", made, err)
	}
	if !st.SetupLinkValid(hash, t0) || st.SetupLinkValid(sessionHash("another"), t0) || st.SetupLinkValid(hash, t0.Add(time.Hour)) {
		t.Errorf("SetupLinkValid: want true for the link before it expires only")
	}
	const n = 20
	var ok atomic.Int32
	errs := make([]error, n)
	together(n, func(i int) {
		name := fmt.Sprint("admin", i)
		errs[i] = st.UseSetupLink(context.Background(), hash, t0, User{Name: name, Role: RoleAdmin, CreatedAt: t0},
			AuditEntry{At: t0, Who: name, Action: "create user", Target: name})
		if errs[i] == nil {
			ok.Add(1)
		}
	})
	for _, err := range errs {
		if err != nil && !errors.Is(err, ErrSetupUsed) {
			t.Errorf("UseSetupLink: %v, want nil or ErrSetupUsed", err)
		}
	}
	users, _ := st.Users()
	log, _ := st.AuditLog(100)
	if ok.Load() != 1 || len(users) != 1 || len(log) != 1 {
		t.Fatalf("%d uses succeeded, %d users, %d audit entries; want 1 of each", ok.Load(), len(users), len(log))
	}
	if err := st.UseSetupLink(context.Background(), hash, t0, User{Name: "late", Role: RoleAdmin}); !errors.Is(err, ErrSetupUsed) {
		t.Errorf("the link used again: %v, want ErrSetupUsed", err)
	}
	// With a user, no new link is made.
	if made, err := st.CreateSetupLink(context.Background(), hash, t0.Add(time.Hour)); err != nil || made {
		t.Errorf("CreateSetupLink with a user = %v, %v; want false", made, err)
	}
}

func TestSetupLinkExpires(t *testing.T) {
	st := openTest(t)
	hash := sessionHash("the-link")
	if _, err := st.CreateSetupLink(context.Background(), hash, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.UseSetupLink(context.Background(), hash, t0.Add(time.Hour), User{Name: "admin", Role: RoleAdmin}); !errors.Is(err, ErrSetupUsed) {
		t.Errorf("an expired link: %v, want ErrSetupUsed", err)
	}
	if err := st.UseSetupLink(context.Background(), sessionHash("guess"), t0, User{Name: "admin", Role: RoleAdmin}); !errors.Is(err, ErrSetupUsed) {
		t.Errorf("a wrong link: %v, want ErrSetupUsed", err)
	}
	if users, _ := st.Users(); len(users) != 0 {
		t.Errorf("users %v, want none", users)
	}
}

// TestCreateFirstUserOnce: many first-start creates at once, under
// different names, leave exactly one user; a create after that is refused
// without an error.
func TestCreateFirstUserOnce(t *testing.T) {
	st := openTest(t)
	const n = 16
	var made atomic.Int32
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			<-start
			ok, err := st.CreateFirstUser(context.Background(), User{Name: fmt.Sprintf("admin%d", i), Role: RoleAdmin})
			if ok {
				made.Add(1)
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	users, err := st.Users()
	if err != nil {
		t.Fatal(err)
	}
	if made.Load() != 1 || len(users) != 1 {
		t.Fatalf("%d creates reported made and %d users stored, want 1 and 1", made.Load(), len(users))
	}
	if ok, err := st.CreateFirstUser(context.Background(), User{Name: "late", Role: RoleAdmin}); ok || err != nil {
		t.Fatalf("a create after the first: made %v, err %v; want false, nil", ok, err)
	}
}
