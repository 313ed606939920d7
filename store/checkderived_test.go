package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store/engine"
)

// editJSON rewrites the stored record at key of bucket with edit, as a
// damaged file would hold it: no index or count moves with it.
func editJSON(t *testing.T, st *Store, bucket, key []byte, edit func(m map[string]any)) {
	t.Helper()
	err := st.raw(func(tx engine.Tx) error {
		var m map[string]any
		if err := json.Unmarshal(tx.Bucket(bucket).Get(key), &m); err != nil {
			return err
		}
		edit(m)
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return tx.Bucket(bucket).Put(key, raw)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// wantCheckSays fails unless Check names the damage with want.
func wantCheckSays(t *testing.T, st *Store, want string) {
	t.Helper()
	if err := st.Check(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Check = %v; want it to say %q", err, want)
	}
}

// TestCheckProvesJobFollowers: a job held back behind a running one and
// that running job name each other, and Check says so when a file's
// records do not: a followed_by naming another job, a wait for a job that
// does not exist, a finished job still followed, a running job still
// waiting.
func TestCheckProvesJobFollowers(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, st *Store, k, f string)
		want   string
	}{
		{"followed_by names another job", func(t *testing.T, st *Store, k, f string) {
			editJSON(t, st, bucketJobs, []byte(k), func(m map[string]any) { m["followed_by"] = "01OTHER" })
		}, `waits for job K, whose followed_by names "01OTHER", not it`},
		{"a wait for a job that does not exist", func(t *testing.T, st *Store, k, f string) {
			editJSON(t, st, bucketJobs, []byte(f), func(m map[string]any) { m["waits"].(map[string]any)["job"] = "01GONE" })
		}, "waits for job 01GONE, which does not exist"},
		{"a finished job still followed", func(t *testing.T, st *Store, k, f string) {
			editJSON(t, st, bucketJobs, []byte(k), func(m map[string]any) { m["state"] = string(JobCompleted) })
		}, "job K is completed but still names job F as the one waiting for it"},
		{"a running job still waiting", func(t *testing.T, st *Store, k, f string) {
			editJSON(t, st, bucketJobs, []byte(f), func(m map[string]any) { m["state"] = string(JobRunning) })
		}, "job F is running but still waits for job K"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Open(t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var running Job
			err = st.Update(ctx, func(tx *Tx) (err error) {
				running, _, err = tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "draft", Key: "web:a", MaxAttempts: 3}, "corr-a", t0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := st.Claim(ctx, t0, AnyJobs(1), time.Minute); err != nil || len(got) != 1 {
				t.Fatalf("Claim = %d, %v; want the one job", len(got), err)
			}
			var held Job
			err = st.Update(ctx, func(tx *Tx) error {
				k, err := tx.Job(running.ID)
				if err != nil {
					return err
				}
				j, _, err := tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "draft", Key: "web:b", MaxAttempts: 3}, "corr-b", t0)
				if err != nil {
					return err
				}
				oldJ, oldK := j, k
				followed := waitFor(&j, k)
				if err := tx.PutJob(&oldJ, &j); err != nil {
					return err
				}
				held = j
				return tx.PutJob(&oldK, &followed)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Check(); err != nil {
				t.Fatalf("Check of a held job and the job it waits for: %v", err)
			}
			tt.damage(t, st, running.ID, held.ID)
			wantCheckSays(t, st, strings.NewReplacer("K", running.ID, "F", held.ID).Replace(tt.want))
		})
	}
}

// TestCheckProvesDraftCountsByChannel: a status's draft count is the sum
// of the channels' counts of it, and Check says so when they differ.
func TestCheckProvesDraftCountsByChannel(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	figureDraft(t, st, "web", "c1", t0, "v1", 0.5)
	figureDraft(t, st, "mail", "c2", t0, "v1", 0.5)
	if err := st.Check(); err != nil {
		t.Fatalf("Check before: %v", err)
	}
	err = st.raw(func(tx engine.Tx) error {
		return tx.Bucket(bucketMeta).Put(draftCountKey(DraftPending), []byte{0, 0, 0, 0, 0, 0, 0, 3})
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCheckSays(t, st, "the pending_approval draft count says 3, the channels' counts of them sum to 2")
}
