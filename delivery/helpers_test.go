package delivery_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// openStore opens a store on a real bbolt file; its cleanup checks the
// file's consistency and closes it. Register it before anything that uses it,
// so that its cleanup runs last.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
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

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions are fast retries on the wall clock with no jitter.
func testOptions() jobs.Options {
	return jobs.Options{
		Workers: 2,
		Backoff: jobs.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond},
		Logger:  discardLogger(),
		Jitter:  func() float64 { return 0 },
	}
}

// startRunner starts a runner and stops it at the end of the test (before
// the store's cleanup, which was registered earlier).
func startRunner(t *testing.T, st *store.Store, kinds map[string]jobs.Kind, opt jobs.Options) *jobs.Runner {
	t.Helper()
	r := jobs.NewRunner(st, kinds, opt)
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return r
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out after 10s waiting for %s", what)
		}
	}
}

// waitState waits until job id is in a final state and returns it; it fails
// if the final state is not want.
func waitFinal(t *testing.T, st *store.Store, id string, want store.JobState) store.Job {
	t.Helper()
	var j store.Job
	waitFor(t, "job "+id+" to finish", func() bool {
		var err error
		j, err = st.Job(id)
		if err != nil {
			t.Fatalf("Job(%s): %v", id, err)
		}
		return j.State.Final()
	})
	if j.State != want {
		t.Fatalf("job %s ended %s (last error %q), want %s", id, j.State, j.LastError, want)
	}
	return j
}

// fakeClock is a settable clock that counts how often it is read.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

func (c *fakeClock) Reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
