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

// TestDisableEndsSessions: a session found for a disabled user is
// refused by SessionUser, which reads both in one transaction; ending the
// sessions with the disabling is package users' rule (its tests).
func TestSessionOfDisabledUser(t *testing.T) {
	st := openTest(t)
	addTestUser(t, st, "cy", RoleApprover)
	setDisabled(t, st, "cy", true)
	late := addTestSession(t, st, "late", "cy", t0)
	if _, _, err := st.SessionUser(late); !errors.Is(err, ErrDisabled) {
		t.Errorf("a session of a disabled user: %v, want ErrDisabled", err)
	}
	if _, err := st.ActiveUser("cy"); !errors.Is(err, ErrDisabled) {
		t.Errorf("ActiveUser(disabled) = %v, want ErrDisabled", err)
	}
	setDisabled(t, st, "cy", false)
	if _, err := st.ActiveUser("cy"); err != nil {
		t.Errorf("ActiveUser(enabled again) = %v", err)
	}
	if err := st.View(func(tx *Tx) error { _, err := tx.User("nobody"); return err }); !errors.Is(err, ErrNotFound) {
		t.Errorf("read a user who is not: %v, want ErrNotFound", err)
	}
}

// setDisabled disables or enables the user name, as package users does:
// read and put in one write transaction.
func setDisabled(t *testing.T, st *Store, name string, disabled bool) {
	t.Helper()
	err := st.Update(context.Background(), func(tx *Tx) error {
		u, err := tx.User(name)
		if err != nil {
			return err
		}
		u.Disabled = disabled
		return tx.PutUser(u)
	})
	if err != nil {
		t.Fatal(err)
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
