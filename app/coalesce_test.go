package app

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
)

// A burst of signals calls fn once at once and holds the rest for the
// interval; once the interval has passed, the signals held are one call;
// after the context ends nothing is called and the goroutine is gone.
func TestCoalesce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var calls atomic.Int32
	gate := make(chan struct{})
	// An interval that never ends within the test, for the burst...
	signal := coalesce(ctx, &wg, time.Hour, func() { calls.Add(1) })
	for range 1000 {
		signal()
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return calls.Load() >= 1 }, "the first signal's call")
	if n := calls.Load(); n != 1 {
		t.Errorf("a burst of 1000 signals in one interval called fn %d times before its end; want 1", n)
	}
	cancel()
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("fn called %d times in all; want 1: the held signals are dropped with the context", n)
	}

	// ...and a short one: the signals held during it come as one more call.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var wg2 sync.WaitGroup
	var calls2 atomic.Int32
	signal2 := coalesce(ctx2, &wg2, time.Millisecond, func() {
		if calls2.Add(1) == 1 {
			<-gate // signals arrive while the first call runs
		}
	})
	signal2()
	testkit.Eventually(t, 10*time.Second, func() bool { return calls2.Load() == 1 }, "the first call")
	for range 100 {
		signal2()
	}
	close(gate)
	testkit.Eventually(t, 10*time.Second, func() bool { return calls2.Load() == 2 }, "one more call for the 100 signals held")
	cancel2()
	wg2.Wait()
	if n := calls2.Load(); n != 2 {
		t.Errorf("fn called %d times; want 2", n)
	}
}
