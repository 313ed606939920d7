package testkit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store"
)

// Clock is a settable clock, for a runner's or a cron's Now, that counts
// how often it is read.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

// NewClock is a Clock standing at now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now is the clock's time; each call counts as a read.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

// Reads is how often Now was called.
func (c *Clock) Reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set puts the clock at now.
func (c *Clock) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// KindFunc is a job kind (jobs.Kind) made of a function, recording every
// call; Fn is told which call it is (1, 2, …).
type KindFunc struct {
	Fn    func(ctx context.Context, call int, job store.Job) error
	mu    sync.Mutex
	calls []store.Job
}

// Run records the call and runs Fn.
func (k *KindFunc) Run(ctx context.Context, job store.Job) error {
	k.mu.Lock()
	k.calls = append(k.calls, job)
	n := len(k.calls)
	k.mu.Unlock()
	return k.Fn(ctx, n, job)
}

// Calls is every job Run was called with, in order.
func (k *KindFunc) Calls() []store.Job {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]store.Job(nil), k.calls...)
}

// Enqueue adds a new job of kind with key, due at now (correlation id
// "corr-"+key), and fails the test unless it was created.
func Enqueue(t testing.TB, st *store.Store, kind, key string, maxAttempts int, now time.Time) store.Job {
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

// WaitJob waits until job id is in a final state and returns it; it fails
// the test if that state is not want.
func WaitJob(t testing.TB, st *store.Store, id string, want store.JobState) store.Job {
	t.Helper()
	var j store.Job
	Eventually(t, 10*time.Second, func() bool {
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
