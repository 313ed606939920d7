package store

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
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

// TestMigrationCreatesBulk: a schema 2 file, from before bulk replays were
// kept, checks as it is, and gets the bulk bucket at open; a fresh file has
// it from the start. Either way a run can be stored and read back.
func TestMigrationCreatesBulk(t *testing.T) {
	tests := []struct {
		name string
		old  bool
	}{{"fresh", false}, {"schema 2", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			path := filepath.Join(dir, FileName)
			if tt.old {
				db, err := bolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatal(err)
				}
				err = db.Update(func(tx *bolt.Tx) error {
					if err := tx.DeleteBucket(bucketBulk); err != nil {
						return err
					}
					return tx.Bucket(bucketMeta).Put(keySchema, []byte("2"))
				})
				db.Close()
				if err != nil {
					t.Fatal(err)
				}
				old, err := OpenFile(path, Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := old.Check(); err != nil {
					t.Errorf("Check of a schema 2 file: %v", err)
				}
				if err := old.View(func(tx *Tx) error { _, err := tx.BulkRun("x"); return err }); !errors.Is(err, ErrNotFound) {
					t.Errorf("a run read from a schema 2 file: %v, want ErrNotFound", err)
				}
				old.Close()
			}

			st, err = Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var version string
			_ = st.View(func(tx *Tx) error {
				version = string(tx.bucket(bucketMeta).Get(keySchema))
				if tx.bucket(bucketBulk) == nil {
					t.Errorf("no bucket %s after open", bucketBulk)
				}
				return nil
			})
			if want := strconv.Itoa(SchemaVersion); version != want {
				t.Errorf("schema %q after open, want %s", version, want)
			}
			run := BulkRun{ID: "01RUN", Items: []string{"a", "b"}, Total: 2, State: BulkRunning, StartedAt: t0}
			if err := st.Update(context.Background(), func(tx *Tx) error { return tx.PutBulkRun(nil, &run) }); err != nil {
				t.Fatal(err)
			}
			var got BulkRun
			if err := st.View(func(tx *Tx) error { got, err = tx.BulkRun(run.ID); return err }); err != nil {
				t.Fatal(err)
			}
			if got.V != 1 || got.Total != 2 || len(got.Items) != 2 || got.State != BulkRunning {
				t.Errorf("run read back %+v, want %+v", got, run)
			}
			if err := st.Check(); err != nil {
				t.Errorf("Check after the migration: %v", err)
			}
		})
	}
}
