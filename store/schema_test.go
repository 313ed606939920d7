package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
)

// TestMigrationCountsDrafts: a database written before the draft counts
// (schema 1) gets them at open, from the status index, and Check agrees.
func TestMigrationCountsDrafts(t *testing.T) {
	boltOnly(t)
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
		if err := undoSchema4(tx); err != nil {
			return err
		}
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
		if err := st.raw(func(tx engine.Tx) error { return addCount(&Tx{tx: tx}, draftCountKey(DraftPending), delta) }); err != nil {
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
	boltOnly(t)
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
					if err := undoSchema4(tx); err != nil {
						return err
					}
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

// undoSchema4 turns the jobs of a file this binary wrote back into the
// layout of schema 3: idx_jobs_ready keyed by time alone, no job counts.
func undoSchema4(tx *bolt.Tx) error {
	ready := tx.Bucket(bucketJobsReady)
	var keys [][]byte
	_ = ready.ForEach(func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil })
	for _, k := range keys {
		i := bytes.IndexByte(k, 0)
		if err := ready.Delete(k); err != nil {
			return err
		}
		if err := ready.Put(bytes.Clone(k[i+1:]), nil); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	var counts [][]byte
	_ = meta.ForEach(func(k, _ []byte) error {
		if bytes.HasPrefix(k, jobCountPrefix) {
			counts = append(counts, bytes.Clone(k))
		}
		return nil
	})
	for _, k := range counts {
		if err := meta.Delete(k); err != nil {
			return err
		}
	}
	return meta.Put(keySchema, []byte("3"))
}

// TestMigrationKeysReadyByKind: a schema 3 file, its ready index keyed by
// time alone and no job counts, checks as it is read-only; at open it gets
// the ready index by kind and the counts of its jobs in every state, which
// Check proves and the per-kind claim reads.
func TestMigrationKeysReadyByKind(t *testing.T) {
	boltOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Four drafts: one left available, one running, one retryable, one
	// completed; and two deliver jobs, one discarded.
	for i := range 4 {
		record(t, st, fmt.Sprintf("web:mig-%d", i), t0.Add(time.Duration(i)*time.Second))
	}
	for i := range 2 {
		if err := st.Update(ctx, func(tx *Tx) (err error) {
			_, _, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "deliver", Key: fmt.Sprintf("out-%d", i), MaxAttempts: 1}, "corr", t0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(time.Minute)
	drafts, err := st.Claim(ctx, now, ClaimLimits{Kinds: map[string]int{KindDraft: 3}}, time.Minute)
	if err != nil || len(drafts) != 3 {
		t.Fatalf("claimed %d drafts, %v; want 3", len(drafts), err)
	}
	if _, err := st.FinishJob(ctx, drafts[0].ID, drafts[0].ExecutionID, now, Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishJob(ctx, drafts[1].ID, drafts[1].ExecutionID, now, Result{Outcome: OutcomeRetry, Err: "x", RetryAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	deliver, err := st.Claim(ctx, now, ClaimLimits{Kinds: map[string]int{"deliver": 1}}, time.Minute)
	if err != nil || len(deliver) != 1 {
		t.Fatalf("claimed %d deliver jobs, %v; want 1", len(deliver), err)
	}
	if _, err := st.FinishJob(ctx, deliver[0].ID, deliver[0].ExecutionID, now, Result{Outcome: OutcomeRetry, Err: "x"}); err != nil {
		t.Fatal(err)
	}
	want, err := st.JobCounts()
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(undoSchema4)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	old, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(); err != nil {
		t.Errorf("Check of a schema 3 file: %v", err)
	}
	old.Close()

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Check(); err != nil {
		t.Errorf("Check after the migration: %v", err)
	}
	got, err := st.JobCounts()
	if err != nil {
		t.Fatal(err)
	}
	sortCounts := func(c []JobCount) {
		slices.SortFunc(c, func(a, b JobCount) int { return strings.Compare(a.Kind+string(a.State), b.Kind+string(b.State)) })
	}
	sortCounts(got)
	sortCounts(want)
	wantList := []JobCount{{KindDraft, JobAvailable, 1}, {KindDraft, JobRetryable, 1}, {KindDraft, JobRunning, 1}, {"deliver", JobAvailable, 1}, {"deliver", JobDiscarded, 1}}
	sortCounts(wantList)
	if !slices.Equal(got, wantList) || !slices.Equal(want, wantList) {
		t.Errorf("job counts after the migration %v (before it %v), want %v", got, want, wantList)
	}
	var completed int
	_ = st.View(func(tx *Tx) error { completed = count(tx, jobCountKey(KindDraft, JobCompleted)); return nil })
	if completed != 1 {
		t.Errorf("completed draft count %d after the migration, want 1", completed)
	}
	// The ready index is by kind again: a deliver-only claim takes the
	// deliver job though the draft due earlier is first in time.
	j, err := st.Claim(ctx, now, ClaimLimits{Kinds: map[string]int{"deliver": 5}}, time.Minute)
	if err != nil || len(j) != 1 || j[0].Kind != "deliver" {
		t.Fatalf("deliver claim after the migration = %v, %v; want the one deliver job", j, err)
	}
	if _, err := st.FinishJob(ctx, j[0].ID, j[0].ExecutionID, now, Result{Outcome: OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check after claiming on the migrated file: %v", err)
	}
}
