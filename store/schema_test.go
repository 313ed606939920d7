package store

import (
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestMigrationCountsDrafts: a database written before the draft counts
// (schema 1) gets them at open, from the status index, and Check agrees.
func TestMigrationCountsDrafts(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"web:m-1", "web:m-2", "web:m-3"} {
		rec := record(t, st, key, t0)
		if _, _, err := st.SaveDraft(context.Background(), Draft{EventKey: rec.Event.Key, Text: "hi", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	// Turn the file back into a schema 1 file: no counts, version 1.
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		for _, s := range []DraftStatus{DraftPending, DraftApproved, DraftRejected} {
			if err := meta.Delete(draftCountKey(s)); err != nil {
				return err
			}
		}
		return meta.Put(keySchema, []byte("1"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	// An old backup verifies (restore checks it first), though it has no counts yet.
	old, err := OpenFile(filepath.Join(dir, FileName), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(); err != nil {
		t.Errorf("Check of a schema 1 file: %v", err)
	}
	old.Close()

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := st.Counts(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DraftsWaiting != 3 {
		t.Errorf("after the migration DraftsWaiting = %d, want 3", c.DraftsWaiting)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check after the migration: %v", err)
	}
}

// TestCheckCatchesWrongCount: a count that disagrees with the index is named.
func TestCheckCatchesWrongCount(t *testing.T) {
	st := openTest(t)
	rec := record(t, st, "web:c-1", t0)
	if _, _, err := st.SaveDraft(context.Background(), Draft{EventKey: rec.Event.Key, Text: "hi", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	bump := func(delta int) {
		if err := st.db.Update(func(tx *bolt.Tx) error { return addCount(&Tx{tx: tx}, draftCountKey(DraftPending), delta) }); err != nil {
			t.Fatal(err)
		}
	}
	bump(1)
	if err := st.Check(); err == nil {
		t.Errorf("Check with a pending count of 2 for 1 pending draft = nil, want an error")
	}
	bump(-1) // repaired, so the cleanup's Check passes
}
