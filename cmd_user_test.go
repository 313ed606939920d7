package main

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/handoff/handoff/store"
)

// withStore opens a closed data folder, runs fn, and closes it again.
func withStore(t *testing.T, dir string, fn func(st *store.Store)) {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fn(st)
}

// TestUserLifecycleCLI runs passwd, disable, enable, list and remove on a
// stopped server's folder: each ends the sessions it should, keeps the last
// admin, and leaves its audit entry.
func TestUserLifecycleCLI(t *testing.T) {
	dir := t.TempDir()
	runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "root", "--role", "admin").wantOK(t)
	runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "dana").wantOK(t)
	sess := sha256.Sum256([]byte("dana-cookie"))
	withStore(t, dir, func(st *store.Store) {
		now := time.Now()
		if err := st.CreateSession(context.Background(), sess[:], store.Session{User: "dana", CreatedAt: now, LastSeen: now}); err != nil {
			t.Fatal(err)
		}
	})

	// passwd from stdin; her session ends.
	c := runCLI(t, "a new passphrase here\n", nil, "user", "passwd", "--data", dir, "dana")
	c.wantOK(t)
	if c.stdout.String() != "changed the password of dana\n" {
		t.Errorf("stdout %q", c.stdout.String())
	}
	u, err := userOf(t, dir, "dana")
	if err != nil || bcrypt.CompareHashAndPassword(u.PasswordHash, []byte("a new passphrase here")) != nil {
		t.Errorf("dana's new password does not match: %v", err)
	}
	withStore(t, dir, func(st *store.Store) {
		if _, err := st.Session(sess[:]); err == nil {
			t.Errorf("dana's session survived the new password")
		}
	})
	// passwd generated, printed once.
	c = runCLI(t, "", nil, "user", "passwd", "--data", dir, "root")
	c.wantOK(t)
	m := regexp.MustCompile(`^changed the password of root to: (\S+)\n\(shown once; it is stored hashed\)\n$`).FindStringSubmatch(c.stdout.String())
	if m == nil {
		t.Fatalf("stdout %q; want the generated password once", c.stdout.String())
	}
	if u, _ := userOf(t, dir, "root"); bcrypt.CompareHashAndPassword(u.PasswordHash, []byte(m[1])) != nil {
		t.Errorf("root's printed password does not match the hash")
	}

	runCLI(t, "", nil, "user", "disable", "--data", dir, "root").wantErr(t, "last enabled admin")
	runCLI(t, "", nil, "user", "remove", "--data", dir, "root").wantErr(t, "last enabled admin")
	runCLI(t, "", nil, "user", "disable", "--data", dir, "nobody").wantErr(t, `there is no user named "nobody"`)
	runCLI(t, "short\n", nil, "user", "passwd", "--data", dir, "dana").wantErr(t, "at least 12 characters")
	runCLI(t, "", nil, "user", "passwd", "--data", dir).wantErr(t, "exactly one NAME")

	runCLI(t, "", nil, "user", "disable", "--data", dir, "dana").wantOK(t)
	c = runCLI(t, "", nil, "user", "list", "--data", dir)
	c.wantOK(t)
	out := c.stdout.String()
	if !regexp.MustCompile(`(?m)^dana +approver +- +disabled +no `).MatchString(out) || !regexp.MustCompile(`(?m)^root +admin +- +enabled +no `).MatchString(out) {
		t.Errorf("user list:\n%s", out)
	}
	if strings.Contains(out, "$2a$") {
		t.Errorf("user list prints a password hash:\n%s", out)
	}
	runCLI(t, "", nil, "user", "enable", "--data", dir, "dana").wantOK(t)
	if u, _ := userOf(t, dir, "dana"); u.Disabled {
		t.Errorf("dana is still disabled after enable")
	}
	runCLI(t, "", nil, "user", "remove", "--data", dir, "dana").wantOK(t)
	if _, err := userOf(t, dir, "dana"); err == nil {
		t.Errorf("dana is still a user after remove")
	}
	withStore(t, dir, func(st *store.Store) {
		log, err := st.AuditLog(100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range log {
			got = append([]string{e.Who + ": " + e.Action + " " + e.Target}, got...)
		}
		want := []string{
			"handoff user add: create user root", "handoff user add: create user dana",
			"handoff user passwd: reset password dana", "handoff user passwd: reset password root",
			"handoff user disable: disable user dana", "handoff user enable: enable user dana",
			"handoff user remove: remove user dana",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

var (
	setupLinkRe = regexp.MustCompile(`^(http://127\.0\.0\.1:\d+)/setup/([A-Za-z0-9_-]{43})\n$`)
	setupFileRe = regexp.MustCompile(`no users yet: the setup link is in (\S+) \(readable by this user only\); open it within an hour`)
)

// setupLinkOf reads the setup link a start wrote, as a child whose stdout is
// a pipe (not a terminal) does: stdout names the file in the data folder,
// mode 0600, and only the file holds the link. nil when stdout names none.
func setupLinkOf(t *testing.T, dir, stdout string) []string {
	t.Helper()
	m := setupFileRe.FindStringSubmatch(stdout)
	if m == nil {
		return nil
	}
	if want := filepath.Join(dir, "setup-link"); m[1] != want {
		t.Errorf("the setup link's file is %s, want %s", m[1], want)
	}
	fi, err := os.Stat(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the setup link's file has mode %v, want 0600", fi.Mode().Perm())
	}
	raw, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	link := setupLinkRe.FindStringSubmatch(string(raw))
	if link == nil {
		t.Fatalf("the setup link's file holds %q, want one link", raw)
	}
	if strings.Contains(stdout, link[2]) {
		t.Errorf("stdout, which docker and journald keep, carries the link's secret: %q", stdout)
	}
	return link
}

// TestFirstStartSetupLink: a first start prints a setup link, never a
// password, and stores only its hash; a restart with still no users makes a
// new one and the old one stops working; HANDOFF_ADMIN_PASSWORD still
// creates "admin", under the password rules.
func TestFirstStartSetupLink(t *testing.T) {
	dir := t.TempDir()
	first := runChild(t, nil, "serve", "--data", dir, "--addr", "127.0.0.1:0")
	m := setupLinkOf(t, dir, first.stdout)
	if !first.started || m == nil {
		t.Fatalf("first start: started %v, stdout %q; want a setup link", first.started, first.stdout)
	}
	if strings.Contains(first.stderr, m[2]) || strings.Contains(first.stdout, "password ") {
		t.Errorf("the link is in the log, or a password is printed:\n%s%s", first.stdout, first.stderr)
	}
	second := runChild(t, nil, "serve", "--data", dir, "--addr", "127.0.0.1:0")
	m2 := setupLinkOf(t, dir, second.stdout)
	if m2 == nil || m2[2] == m[2] {
		t.Fatalf("restart with no users: stdout %q; want a new link", second.stdout)
	}
	withStore(t, dir, func(st *store.Store) {
		old, cur := sha256.Sum256([]byte(m[2])), sha256.Sum256([]byte(m2[2]))
		if st.SetupLinkValid(old[:], time.Now()) || !st.SetupLinkValid(cur[:], time.Now()) {
			t.Errorf("after a restart the old link should be dead and the new one live")
		}
		if st.SetupLinkValid(cur[:], time.Now().Add(time.Hour+time.Minute)) {
			t.Errorf("the link outlives its hour")
		}
		users, _ := st.Users()
		if len(users) != 0 {
			t.Errorf("users %v before the link was used, want none", users)
		}
	})

	weak := runChild(t, map[string]string{"HANDOFF_ADMIN_PASSWORD": "password1234"}, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0")
	if weak.started || !strings.Contains(weak.stdout+weak.stderr, "HANDOFF_ADMIN_PASSWORD: the password is a common one") {
		t.Errorf("a common HANDOFF_ADMIN_PASSWORD: started %v, output %q; want a refusal", weak.started, weak.stdout+weak.stderr)
	}
	chosen := t.TempDir()
	r := runChild(t, map[string]string{"HANDOFF_ADMIN_PASSWORD": "the admin passphrase"}, "serve", "--data", chosen, "--addr", "127.0.0.1:0")
	if !r.started || strings.Contains(r.stdout, "setup") || strings.Contains(r.stdout+r.stderr, "the admin passphrase") {
		t.Fatalf("HANDOFF_ADMIN_PASSWORD: started %v, stdout %q; want no link and the password never printed", r.started, r.stdout)
	}
	if u, err := userOf(t, chosen, "admin"); err != nil || u.Role != store.RoleAdmin || bcrypt.CompareHashAndPassword(u.PasswordHash, []byte("the admin passphrase")) != nil {
		t.Errorf("admin from HANDOFF_ADMIN_PASSWORD: %v", err)
	}
}

// TestUserPasswordRuleCLI: "user add" and "user passwd" refuse an admin's
// password built on the product's or the person's name or a keyboard
// walk, and with --config the clients' names too.
func TestUserPasswordRuleCLI(t *testing.T) {
	dir := t.TempDir()
	cfg := t.TempDir() + "/handoff.yaml"
	if err := os.WriteFile(cfg, []byte("clients:\n  - id: acme\n    name: Acme Ltd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"handoff12345", "qwertyuiopas", "rosalind2026!"} {
		c := runCLI(t, pw+"\n", nil, "user", "add", "--data", dir, "rosalind", "--role", "admin")
		if c.err == nil || !strings.Contains(c.err.Error(), "easy to guess") && !strings.Contains(c.err.Error(), "common") {
			t.Errorf("user add with %q: %v, want it refused", pw, c.err)
		}
	}
	c := runCLI(t, "acmeltd2026!\n", nil, "user", "add", "--data", dir, "rosalind", "--role", "admin", "--config", cfg)
	if c.err == nil || !strings.Contains(c.err.Error(), "easy to guess") {
		t.Errorf("user add with a client's name and --config: %v, want it refused", c.err)
	}
	runCLI(t, "violet tractor harbour\n", nil, "user", "add", "--data", dir, "rosalind", "--role", "admin").wantOK(t)
	c = runCLI(t, "handoff12345\n", nil, "user", "passwd", "--data", dir, "rosalind")
	if c.err == nil {
		t.Error("user passwd took handoff12345 for an admin")
	}
}
