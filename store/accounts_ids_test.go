package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMigrateUserIDs is migration 8 on a file of schema 8 written by hand:
// each person gets an ID; a token gets its maker's, unless it is older
// than the person of its name (made by a namesake since removed), which
// is revoked; the file then passes Check.
func TestMigrateUserIDs(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old, later := t0, t0.Add(time.Hour)
	err = db.Update(func(tx *bolt.Tx) error {
		put := func(b []byte, k string, v any) {
			raw, _ := json.Marshal(v)
			if err := tx.Bucket(b).Put([]byte(k), raw); err != nil {
				t.Fatal(err)
			}
		}
		put(bucketUsers, "ann", User{V: 1, Name: "ann", Role: RoleAdmin, CreatedAt: old})
		put(bucketUsers, "admin2", User{V: 1, Name: "admin2", Role: RoleAdmin, CreatedAt: later}) // made again after a removal
		put(bucketTokens, "h-ann", Token{V: 1, ID: "T1", Name: "ci", User: "ann", Scope: ScopeAdmin, CreatedAt: old.Add(time.Minute)})
		put(bucketTokens, "h-old", Token{V: 1, ID: "T2", Name: "old", User: "admin2", Scope: ScopeAdmin, CreatedAt: old})
		put(bucketTokens, "h-gone", Token{V: 1, ID: "T3", Name: "gone", User: "nobody", Scope: ScopeRead, CreatedAt: old})
		for id, h := range map[string]string{"T1": "h-ann", "T2": "h-old", "T3": "h-gone"} {
			if err := tx.Bucket(bucketTokensByID).Put([]byte(id), []byte(h)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("8"))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	st = openTestAt(t, dir)
	ann, _ := st.User("ann")
	admin2, _ := st.User("admin2")
	if ann.ID == "" || admin2.ID == "" || ann.ID == admin2.ID {
		t.Fatalf("ids after the migration: ann %q, admin2 %q", ann.ID, admin2.ID)
	}
	toks, err := st.Tokens()
	if err != nil || len(toks) != 3 {
		t.Fatalf("tokens: %+v %v", toks, err)
	}
	for _, tok := range toks {
		switch tok.ID {
		case "T1":
			if tok.UserID != ann.ID || tok.RevokedAt != nil {
				t.Errorf("ann's token: owner %q revoked %v; want ann's id, live", tok.UserID, tok.RevokedAt)
			}
		case "T2", "T3":
			if tok.UserID != "" || tok.RevokedAt == nil {
				t.Errorf("token %s of a person since gone: owner %q revoked %v; want no owner, revoked", tok.ID, tok.UserID, tok.RevokedAt)
			}
		}
	}
}

// TestRestoreDropsSessions: a backup that holds a session (a crafted one
// would plant it) is restored, offline and while serving, with its users
// and without its sessions.
func TestRestoreDropsSessions(t *testing.T) {
	boltOnly(t)
	src := liveFolder(t, key(1))
	st, err := Open(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	addTestUser(t, st, "eve", RoleAdmin)
	hash := []byte("planted-session-hash")
	if err := st.CreateSession(ctx, hash, Session{User: "eve", Role: RoleAdmin, CSRF: "x", CreatedAt: t0, LastSeen: time.Now()}); err != nil {
		t.Fatal(err)
	}
	f, _, err := st.BackupToDir(t.TempDir(), t0, BackupOptions{Keep: 1})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(f.Path)

	// Offline: handoff restore.
	dir := liveFolder(t, key(2))
	if _, err := Restore(ctx, dir, f.Path); err != nil {
		t.Fatal(err)
	}
	got := openTestAt(t, dir)
	if _, err := got.User("eve"); err != nil {
		t.Errorf("the backup's user is not restored: %v", err)
	}
	if _, err := got.Session(hash); !errors.Is(err, ErrNotFound) {
		t.Errorf("the backup's session after an offline restore: %v, want ErrNotFound", err)
	}

	// While serving: Replace.
	live := openTest(t)
	if _, err := live.Replace(ctx, f.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Session(hash); !errors.Is(err, ErrNotFound) {
		t.Errorf("the backup's session after a live restore: %v, want ErrNotFound", err)
	}
	if _, err := live.User("eve"); err != nil {
		t.Errorf("the backup's user after a live restore: %v", err)
	}
	if after, _ := os.ReadFile(f.Path); string(after) != string(before) {
		t.Error("the restore changed the backup file itself")
	}
}
