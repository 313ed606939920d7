package store

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/handoff/handoff/store/engine"
)

// rec is a record type of the tests' own, so the machinery is tested apart
// from any real table's rules.
type rec struct {
	ID     string `json:"id"`
	Status string `json:"status"` // "done" leaves idx_recs_by_status
	Name   string `json:"name"`   // unique: at most one record per name
	Group  string `json:"group"`  // shared: the entry names the last record inserted
}

var (
	bucketRecs        = []byte("test_recs")
	bucketRecsBySt    = []byte("idx_recs_by_status")
	bucketRecsByName  = []byte("idx_recs_by_name")
	bucketRecsByGroup = []byte("idx_recs_by_group")
	recBuckets        = [][]byte{bucketRecs, bucketRecsBySt, bucketRecsByName, bucketRecsByGroup}
)

var recs = &table[rec]{
	name: "rec", bucket: bucketRecs,
	key:   func(r *rec) []byte { return []byte(r.ID) },
	label: func(r *rec) string { return r.ID + " (" + r.Status + ")" },
	indexes: []index[rec]{
		{
			bucket: bucketRecsBySt, ref: refAfter(0, 0),
			key: func(r *rec) []byte {
				if r.Status == "done" {
					return nil
				}
				return []byte(r.Status + "\x00" + r.ID)
			},
		},
		{
			bucket: bucketRecsByName, ref: refValue,
			key:   func(r *rec) []byte { return []byte(r.Name) },
			value: func(r *rec) []byte { return []byte(r.ID) },
		},
		{
			bucket: bucketRecsByGroup, ref: refValue, shared: true,
			key:   func(r *rec) []byte { return []byte(r.Group) },
			value: func(r *rec) []byte { return []byte(r.ID) },
		},
	},
}

// openRecs opens a store with the test table's buckets.
func openRecs(t *testing.T) *Store {
	t.Helper()
	st := openTest(t)
	if err := st.raw(func(tx engine.Tx) error {
		for _, b := range recBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// contents reads every bucket of the test table as key -> value.
func contents(t *testing.T, st *Store) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	if err := st.View(func(tx *Tx) error {
		for _, b := range recBuckets[1:] {
			m := map[string]string{}
			if err := tx.bucket(b).ForEach(func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
				return err
			}
			out[string(b)] = m
		}
		ids := map[string]string{}
		err := tx.bucket(bucketRecs).ForEach(func(k, _ []byte) error { ids[string(k)] = ""; return nil })
		out[string(bucketRecs)] = ids
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// recOps are steps on the test table, each in its own write transaction.
type recOp func(tx *Tx) error

func insertRec(r rec) recOp { return func(tx *Tx) error { return recs.put(tx, nil, &r) } }

// putRec reads the record id as stored, changes it and puts it back.
func putRec(id string, change func(*rec)) recOp {
	return func(tx *Tx) error {
		old, err := recs.get(tx, []byte(id))
		if err != nil {
			return err
		}
		v := old
		change(&v)
		return recs.put(tx, &old, &v)
	}
}

func deleteRec(id string) recOp {
	return func(tx *Tx) error {
		v, err := recs.get(tx, []byte(id))
		if err != nil {
			return err
		}
		return recs.delete(tx, &v)
	}
}

func TestTableWritesDeriveTheIndexes(t *testing.T) {
	type want struct{ recs, byStatus, byName, byGroup map[string]string }
	tests := []struct {
		name string
		ops  []recOp
		want want
	}{
		{
			name: "insert writes an entry in every index whose condition holds",
			ops:  []recOp{insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"})},
			want: want{map[string]string{"a": ""}, map[string]string{"open\x00a": ""}, map[string]string{"n1": "a"}, map[string]string{"g": "a"}},
		},
		{
			name: "insert leaves out an index whose condition fails",
			ops:  []recOp{insertRec(rec{ID: "a", Status: "done", Name: "n1", Group: "g"})},
			want: want{map[string]string{"a": ""}, map[string]string{}, map[string]string{"n1": "a"}, map[string]string{"g": "a"}},
		},
		{
			name: "put moves the entry whose key changed and keeps the others",
			ops: []recOp{
				insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"}),
				putRec("a", func(r *rec) { r.Status = "pending" }),
			},
			want: want{map[string]string{"a": ""}, map[string]string{"pending\x00a": ""}, map[string]string{"n1": "a"}, map[string]string{"g": "a"}},
		},
		{
			name: "put out of the condition removes the entry",
			ops: []recOp{
				insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"}),
				putRec("a", func(r *rec) { r.Status = "done" }),
			},
			want: want{map[string]string{"a": ""}, map[string]string{}, map[string]string{"n1": "a"}, map[string]string{"g": "a"}},
		},
		{
			name: "put into the condition adds the entry",
			ops: []recOp{
				insertRec(rec{ID: "a", Status: "done", Name: "n1", Group: "g"}),
				putRec("a", func(r *rec) { r.Status = "open" }),
			},
			want: want{map[string]string{"a": ""}, map[string]string{"open\x00a": ""}, map[string]string{"n1": "a"}, map[string]string{"g": "a"}},
		},
		{
			name: "put moves a value entry",
			ops: []recOp{
				insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"}),
				putRec("a", func(r *rec) { r.Name = "n2" }),
			},
			want: want{map[string]string{"a": ""}, map[string]string{"open\x00a": ""}, map[string]string{"n2": "a"}, map[string]string{"g": "a"}},
		},
		{
			name: "a shared entry names the last record inserted, and a put of an older one leaves it",
			ops: []recOp{
				insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"}),
				insertRec(rec{ID: "b", Status: "open", Name: "n2", Group: "g"}),
				putRec("a", func(r *rec) { r.Status = "done" }),
			},
			want: want{map[string]string{"a": "", "b": ""}, map[string]string{"open\x00b": ""}, map[string]string{"n1": "a", "n2": "b"}, map[string]string{"g": "b"}},
		},
		{
			name: "delete removes every entry of the record",
			ops: []recOp{
				insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"}),
				insertRec(rec{ID: "b", Status: "open", Name: "n2", Group: "h"}),
				deleteRec("a"),
			},
			want: want{map[string]string{"b": ""}, map[string]string{"open\x00b": ""}, map[string]string{"n2": "b"}, map[string]string{"h": "b"}},
		},
		{
			name: "delete leaves a value entry that names another record",
			ops: []recOp{
				insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"}),
				insertRec(rec{ID: "b", Status: "open", Name: "n2", Group: "g"}),
				deleteRec("a"),
			},
			want: want{map[string]string{"b": ""}, map[string]string{"open\x00b": ""}, map[string]string{"n2": "b"}, map[string]string{"g": "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openRecs(t)
			for i, op := range tt.ops {
				if err := st.Update(t.Context(), op); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			got := contents(t, st)
			for _, c := range []struct {
				bucket []byte
				want   map[string]string
			}{{bucketRecs, tt.want.recs}, {bucketRecsBySt, tt.want.byStatus}, {bucketRecsByName, tt.want.byName}, {bucketRecsByGroup, tt.want.byGroup}} {
				if g := got[string(c.bucket)]; !maps.Equal(g, c.want) {
					t.Errorf("%s = %q, want %q", c.bucket, g, c.want)
				}
			}
			if err := st.View(func(tx *Tx) error { return errors.Join(recs.problems(tx)...) }); err != nil {
				t.Errorf("check after the writes: %v", err)
			}
		})
	}
}

func TestTableInsertRefusesAStoredKey(t *testing.T) {
	st := openRecs(t)
	if err := st.Update(t.Context(), insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"})); err != nil {
		t.Fatal(err)
	}
	err := st.Update(t.Context(), insertRec(rec{ID: "a", Status: "pending", Name: "n2", Group: "h"}))
	if err == nil || !strings.Contains(err.Error(), "rec a (pending)") {
		t.Fatalf("second insert of a = %v, want a refusal naming rec a", err)
	}
	if got := contents(t, st)[string(bucketRecsBySt)]; !maps.Equal(got, map[string]string{"open\x00a": ""}) {
		t.Errorf("idx_recs_by_status after the refusal = %q, want only the first record's entry", got)
	}
}

// TestTableCheckFindsDamage damages the file through raw bbolt writes,
// which no table operation would make, and expects check to name each
// problem; the clean case proves check passes what the writes make.
func TestTableCheckFindsDamage(t *testing.T) {
	seed := []recOp{
		insertRec(rec{ID: "a", Status: "open", Name: "n1", Group: "g"}),
		insertRec(rec{ID: "b", Status: "done", Name: "n2", Group: "g"}),
	}
	tests := []struct {
		name   string
		damage func(tx engine.Tx) error
		want   []string // every one must appear; none: check passes
	}{
		{name: "clean"},
		{
			name:   "a record's entry is missing",
			damage: func(tx engine.Tx) error { return tx.Bucket(bucketRecsBySt).Delete([]byte("open\x00a")) },
			want:   []string{"rec a (open) is not in idx_recs_by_status"},
		},
		{
			name:   "an entry names a record that does not exist",
			damage: func(tx engine.Tx) error { return tx.Bucket(bucketRecsBySt).Put([]byte("open\x00zz"), nil) },
			want:   []string{"idx_recs_by_status holds 2 entries, but the rec records own 1", `idx_recs_by_status entry "open\x00zz" names rec zz, which does not exist`},
		},
		{
			name:   "an entry names a record whose entry is another",
			damage: func(tx engine.Tx) error { return tx.Bucket(bucketRecsBySt).Put([]byte("pending\x00a"), nil) },
			want:   []string{`idx_recs_by_status entry "pending\x00a" names rec a, whose entry is "open\x00a"`},
		},
		{
			name:   "an entry for a record outside the index's condition",
			damage: func(tx engine.Tx) error { return tx.Bucket(bucketRecsBySt).Put([]byte("done\x00b"), nil) },
			want:   []string{`idx_recs_by_status entry "done\x00b" names rec b, which does not belong in it`},
		},
		{
			name:   "a unique entry names another record",
			damage: func(tx engine.Tx) error { return tx.Bucket(bucketRecsByName).Put([]byte("n1"), []byte("b")) },
			want:   []string{"rec a (open): its entry in idx_recs_by_name names rec b", `idx_recs_by_name entry "n1" names rec b, whose entry is "n2"`},
		},
		{
			name:   "a shared entry names a record that does not exist",
			damage: func(tx engine.Tx) error { return tx.Bucket(bucketRecsByGroup).Put([]byte("g"), []byte("zz")) },
			want:   []string{"idx_recs_by_group holds 1 entries, but the rec records own 0", `idx_recs_by_group entry "g" names rec zz, which does not exist`},
		},
		{
			name:   "a record cannot be read",
			damage: func(tx engine.Tx) error { return tx.Bucket(bucketRecs).Put([]byte("c"), []byte("{not json")) },
			want:   []string{"check: rec c cannot be read: invalid character"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openRecs(t)
			for _, op := range seed {
				if err := st.Update(t.Context(), op); err != nil {
					t.Fatal(err)
				}
			}
			if tt.damage != nil {
				if err := st.raw(tt.damage); err != nil {
					t.Fatalf("damage: %v", err)
				}
			}
			var problems []error
			if err := st.View(func(tx *Tx) error { problems = recs.problems(tx); return nil }); err != nil {
				t.Fatal(err)
			}
			got := errors.Join(problems...)
			if len(tt.want) == 0 && got != nil {
				t.Fatalf("check = %v, want nothing", got)
			}
			if len(tt.want) > 0 && got == nil {
				t.Fatalf("check = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("check = %q\nwant it to say %q", got, w)
				}
			}
		})
	}
}

// TestCheckNamesADanglingJobEntry proves the real tables' derived checks
// can fail: a raw write leaves an idx_jobs_dead entry with no job.
func TestCheckNamesADanglingJobEntry(t *testing.T) {
	st := openTest(t)
	record(t, st, "web:a", t0)
	if err := st.raw(func(tx engine.Tx) error { return tx.Bucket(bucketJobsDead).Put([]byte("01NOSUCHJOB"), nil) }); err != nil {
		t.Fatal(err)
	}
	err := st.Check()
	if err == nil || !strings.Contains(err.Error(), `idx_jobs_dead entry "01NOSUCHJOB" names job 01NOSUCHJOB, which does not exist`) {
		t.Errorf("Check = %v, want it to name the dangling idx_jobs_dead entry", err)
	}
	if err := st.raw(func(tx engine.Tx) error { return tx.Bucket(bucketJobsDead).Delete([]byte("01NOSUCHJOB")) }); err != nil {
		t.Fatal(err)
	}
}

// TestUpdateComposesAtomically runs, all at once, transactions that each
// compose two store operations (enqueue a job, insert an outbox row); the
// second fails for every odd caller. Each caller's pair is stored whole or
// not at all, whatever its neighbours in the same group commit did.
func TestUpdateComposesAtomically(t *testing.T) {
	st := openTest(t)
	taken := Outbox{V: recordVersion, ID: "taken", Kind: OutboxAlert, Status: OutboxPending, CreatedAt: t0, Attempts: []OutboxAttempt{}}
	if err := st.Update(t.Context(), func(tx *Tx) error { return tx.PutOutbox(nil, &taken) }); err != nil {
		t.Fatal(err)
	}
	const n = 32
	jobIDs := make([]string, n)
	for i := range n {
		jobIDs[i] = draftJobFor(key(i), 1).ID
	}
	errs := make([]error, n)
	together(n, func(i int) {
		errs[i] = st.Update(context.Background(), func(tx *Tx) error {
			if _, _, err := tx.Enqueue(NewJob{ID: jobIDs[i], Kind: "k", Key: key(i)}, "corr-"+key(i), t0); err != nil {
				return err
			}
			row := Outbox{V: recordVersion, ID: "row-" + key(i), Kind: OutboxAlert, Status: OutboxPending, CreatedAt: t0, Attempts: []OutboxAttempt{}}
			if i%2 == 1 {
				row.ID = taken.ID // refused: a row is stored under that id
			}
			return tx.PutOutbox(nil, &row)
		})
	})
	for i := range n {
		_, jobErr := st.Job(jobIDs[i])
		_, rowErr := st.OutboxRow("row-" + key(i))
		if i%2 == 1 {
			if errs[i] == nil {
				t.Errorf("caller %d: Update = nil, want the refused insert's error", i)
			}
			if !errors.Is(jobErr, ErrNotFound) {
				t.Errorf("caller %d failed, but its job: %v; want ErrNotFound (neither)", i, jobErr)
			}
			continue
		}
		if errs[i] != nil || jobErr != nil || rowErr != nil {
			t.Errorf("caller %d: Update = %v, job %v, row %v; want both stored", i, errs[i], jobErr, rowErr)
		}
	}
}

// TestUpdateCheckThenWrite races callers that each read whether a job is
// live and, only when none is, enqueue it and record their claim in the
// same transaction: exactly one wins, and only its claim is stored.
func TestUpdateCheckThenWrite(t *testing.T) {
	st := openTest(t)
	const n = 16
	won := make([]bool, n)
	jobIDs := make([]string, n)
	for i := range n {
		jobIDs[i] = draftJobFor("shared", 1).ID
	}
	together(n, func(i int) {
		err := st.Update(context.Background(), func(tx *Tx) error {
			won[i] = false // fn may run twice: outputs start afresh
			if _, err := tx.LiveJob("claim", "shared"); err == nil {
				return nil // an answer, not an error
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			if _, _, err := tx.Enqueue(NewJob{ID: jobIDs[i], Kind: "claim", Key: "shared"}, "corr-shared", t0); err != nil {
				return err
			}
			row := Outbox{V: recordVersion, ID: "claim-" + key(i), Kind: OutboxAlert, Status: OutboxPending, CreatedAt: t0, Attempts: []OutboxAttempt{}}
			if err := tx.PutOutbox(nil, &row); err != nil {
				return err
			}
			won[i] = true
			return nil
		})
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	})
	winners := 0
	for i := range n {
		_, rowErr := st.OutboxRow("claim-" + key(i))
		if won[i] {
			winners++
			if j, err := st.Job(jobIDs[i]); err != nil || j.Key != "shared" {
				t.Errorf("winner %d: job %+v, %v; want its job stored", i, j, err)
			}
			if rowErr != nil {
				t.Errorf("winner %d: claim row: %v", i, rowErr)
			}
		} else if !errors.Is(rowErr, ErrNotFound) {
			t.Errorf("loser %d: claim row: %v, want ErrNotFound", i, rowErr)
		}
	}
	if winners != 1 {
		t.Errorf("%d callers won, want exactly 1", winners)
	}
}

func TestViewAndReadOnly(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, st, "web:a", t0)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Update(t.Context(), func(*Tx) error { return nil }); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Update on a read-only store = %v, want ErrReadOnly", err)
	}
	err = ro.View(func(tx *Tx) error {
		ev, err := tx.EventByKey("web:a")
		if err != nil || ev.ID != rec.Event.ID {
			t.Errorf("EventByKey in View = %s, %v; want event %s", ev.ID, err, rec.Event.ID)
		}
		old := ev
		ev.Duplicates++
		return tx.putEvent(&old, &ev)
	})
	if err == nil {
		t.Errorf("a write in View = nil, want an error")
	}
}
