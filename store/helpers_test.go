package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/storetest"
)

// t0 is the fixed clock every store test starts from; times are passed
// explicitly, never read from the wall clock.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// openTest opens a store on a new database of the engine the suite runs
// on (storetest.Chosen: a real bbolt file in a fresh temporary folder by
// default). Its cleanup checks the database's consistency, then closes it.
func openTest(t testing.TB) *Store {
	t.Helper()
	var st *Store
	var err error
	if e := storetest.Chosen(t); e.Open != nil {
		st, err = openOn(e.Open(t), e.Name, false)
		if err != nil {
			t.Fatalf("open a store on %s: %v", e.Name, err)
		}
	} else {
		dir := t.TempDir()
		if st, err = Open(dir, Options{}); err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("Check at the end of the test: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// newEvent returns an event for key with fresh ids, received at at.
func newEvent(key string, at time.Time) Event {
	return Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key,
		CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
		Contact: "ada@example.com", Name: "Ada", Text: "hello from " + key, ReceivedAt: at,
	}
}

// draftJobFor is the job RecordEvent enqueues with an event.
func draftJobFor(key string, maxAttempts int) NewJob {
	return NewJob{ID: ulid.Make().String(), Kind: "draft", Key: key, MaxAttempts: maxAttempts}
}

// record stores one event and its job, failing the test on error.
func record(t testing.TB, st *Store, key string, at time.Time) Recorded {
	t.Helper()
	rec, err := st.RecordEvent(context.Background(), newEvent(key, at), draftJobFor(key, 3))
	if err != nil {
		t.Fatalf("RecordEvent(%s): %v", key, err)
	}
	return rec
}

// enqueueAt adds a job of kind "k" with a fresh key, due at runAt.
func enqueueAt(t testing.TB, st *Store, runAt time.Time, maxAttempts int) Job {
	t.Helper()
	nj := NewJob{ID: ulid.Make().String(), Kind: "k", Key: ulid.Make().String(), MaxAttempts: maxAttempts, RunAt: runAt}
	var j Job
	var created bool
	err := st.Update(context.Background(), func(tx *Tx) (err error) { j, created, err = tx.Enqueue(nj, "corr-"+nj.Key, t0); return err })
	if err != nil || !created {
		t.Fatalf("Enqueue(%s) = created %v, err %v; want a new job", nj.Key, created, err)
	}
	return j
}

// claimOne claims exactly one job at now, failing the test otherwise.
func claimOne(t testing.TB, st *Store, now time.Time, lease time.Duration) Job {
	t.Helper()
	got, err := st.Claim(context.Background(), now, AnyJobs(1), lease)
	if err != nil {
		t.Fatalf("Claim(%s): %v", now, err)
	}
	if len(got) != 1 {
		t.Fatalf("Claim(%s) claimed %d jobs, want 1", now, len(got))
	}
	return got[0]
}

// mustJob reads a job back.
func mustJob(t testing.TB, st *Store, id string) Job {
	t.Helper()
	j, err := st.Job(id)
	if err != nil {
		t.Fatalf("Job(%s): %v", id, err)
	}
	return j
}

// together runs n goroutines that all start at the same moment (a closed
// channel releases them) and waits for every one of them.
func together(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func key(i int) string { return fmt.Sprintf("web:msg-%03d", i) }

// raw runs fn straight in an engine write transaction, past the committer
// and the typed operations: how a test damages an index on purpose.
func (s *Store) raw(fn func(tx engine.Tx) error) error {
	_, err := s.eng.Update(fn)
	return err
}

// bolt is the bbolt handle under s, for the bbolt engine's own tests
// (each marked with boltOnly).
func (s *Store) bolt() *bolt.DB { return s.file.Bolt() }

// boltOnly marks a test of the bbolt engine's own file (its pages,
// freelist, mmap, damage, its backups and restore by file): skipped when
// the suite runs on another engine.
func boltOnly(t testing.TB) {
	t.Helper()
	storetest.BoltOnly(t)
}
