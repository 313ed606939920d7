// Package testkit is what the tests of every package outside store share:
// a store on a real bbolt file that is checked at cleanup, a barrier that
// makes goroutines really race, a wait on a condition with a deadline
// (Eventually), a fake model server (Model) and a fake provider (Provider).
// The store's own tests cannot import it (it imports store) and keep their
// opener in store/helpers_test.go.
package testkit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store"
)

// OpenStore opens a store in dir (a fresh temporary folder when empty).
// Its cleanup runs the store's consistency Check, then closes it; register
// it before anything that uses the store, so that its cleanup runs last.
func OpenStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("store.Open(%s): %v", dir, err)
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

// Together runs fn(0) … fn(n-1) in n goroutines released at the same
// moment by a closed channel, and waits for every one of them.
func Together(n int, fn func(i int)) {
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

// Eventually calls cond until it holds, and fails the test naming msg
// (what was waited for) when it still does not after within; cond is
// called a last time at the deadline, and may fail the test itself. Between
// two calls it pauses a millisecond, or four times as long as the last call
// took when that is longer, so that a costly check (a request to another
// process) leaves that process alone most of the time. It is the one wait
// of the tests, built on the process harness's proc.Poll: a condition with
// a deadline, never a sleep that hopes the work is done.
func Eventually(t testing.TB, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	pause := func(took time.Duration) time.Duration { return max(time.Millisecond, 4*took) }
	if err := proc.Poll(context.Background(), within, pause, func() (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", msg, err)
	}
}
