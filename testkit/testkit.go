// Package testkit is what the tests of every package outside store share:
// a store on a real bbolt file that is checked at cleanup, a barrier that
// makes goroutines really race, and a wait on a condition with a deadline.
// The store's own tests cannot import it (it imports store) and keep their
// opener in store/helpers_test.go.
package testkit

import (
	"sync"
	"testing"
	"time"

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

// WaitFor checks cond every millisecond until it holds, and fails the test
// when it still does not after 10 seconds.
func WaitFor(t testing.TB, what string, cond func() bool) {
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
