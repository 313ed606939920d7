package workers

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/oklog/ulid/v2"
)

// openStore opens a store on a real bbolt file, checked and closed at cleanup.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	return testkit.OpenStore(t, "")
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

// enqueue adds a job of kind due at now.
func enqueue(t *testing.T, st *store.Store, kind, key string, maxAttempts int, now time.Time) store.Job {
	t.Helper()
	var j store.Job
	var created bool
	err := st.Update(context.Background(), func(tx *store.Tx) (err error) {
		j, created, err = tx.Enqueue(store.NewJob{ID: ulid.Make().String(), Kind: kind, Key: key, MaxAttempts: maxAttempts}, "corr-"+key, now)
		return err
	})
	if err != nil || !created {
		t.Fatalf("Enqueue(%s %s): created %v err %v", kind, key, created, err)
	}
	return j
}

// waitState waits until job id is in a final state and returns it; it fails
// if the final state is not want.
func waitFinal(t *testing.T, st *store.Store, id string, want store.JobState) store.Job {
	t.Helper()
	var j store.Job
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		j, err = st.Job(id)
		if err != nil {
			t.Fatalf("Job(%s): %v", id, err)
		}
		return j.State.Final()
	}, "job "+id+" to finish")
	if j.State != want {
		t.Fatalf("job %s ended %s (last error %q), want %s", id, j.State, j.LastError, want)
	}
	return j
}

// kindFunc adapts a function to Kind and records every call.
type kindFunc struct {
	mu    sync.Mutex
	calls []store.Job
	fn    func(ctx context.Context, call int, job store.Job) error
}

func (k *kindFunc) Run(ctx context.Context, job store.Job) error {
	k.mu.Lock()
	k.calls = append(k.calls, job)
	n := len(k.calls)
	k.mu.Unlock()
	return k.fn(ctx, n, job)
}

func (k *kindFunc) Calls() []store.Job {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]store.Job(nil), k.calls...)
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
