package app

import (
	"context"
	"testing"
	"time"
)

// scripted is a commit counter that answers its values in turn, one a
// call: quietMoment calls it once before the first tick and once a tick.
func scripted(values ...uint64) func() uint64 {
	i := 0
	return func() uint64 {
		v := values[min(i, len(values)-1)]
		i++
		return v
	}
}

type quietResult struct {
	why  string
	last uint64
	ok   bool
}

// runQuiet runs quietMoment over a tick channel the test feeds.
func runQuiet(ctx context.Context, commits func() uint64, quiet uint64, windows int) (chan<- time.Time, <-chan quietResult) {
	tick := make(chan time.Time) // unbuffered: each send is one window ended
	res := make(chan quietResult, 1)
	go func() {
		why, last, ok := quietMoment(ctx, tick, commits, quiet, windows)
		res <- quietResult{why, last, ok}
	}()
	return tick, res
}

// TestPageWalkWaitsWhileCommitsArrive: while every window sees a burst of
// commits the walk does not start; the first window after they stop
// starts it, saying why.
func TestPageWalkWaitsWhileCommitsArrive(t *testing.T) {
	// 100 commits in each of three windows, then 4 in the fourth.
	tick, res := runQuiet(t.Context(), scripted(0, 100, 200, 300, 304), 10, 20)
	for i := 1; i <= 3; i++ {
		select {
		case tick <- time.Time{}:
		case r := <-res:
			t.Fatalf("the walk started at window %d, while commits kept arriving: %+v", i, r)
		}
	}
	tick <- time.Time{}
	if r := <-res; !r.ok || r.why != startedQuiet || r.last != 4 {
		t.Errorf("after the commits stopped: %+v; want started, %q, 4 commits in the last window", r, startedQuiet)
	}
}

// TestPageWalkStartsByTheBound: a store that never quiets down still gets
// its walk, after the bound's number of windows and not before.
func TestPageWalkStartsByTheBound(t *testing.T) {
	busy := func() func() uint64 {
		n := uint64(0)
		return func() uint64 { n += 1000; return n }
	}()
	tick, res := runQuiet(t.Context(), busy, 10, 5)
	for i := 1; i < 5; i++ {
		select {
		case tick <- time.Time{}:
		case r := <-res:
			t.Fatalf("the walk started at window %d of 5 on a busy store: %+v", i, r)
		}
	}
	tick <- time.Time{}
	if r := <-res; !r.ok || r.why != startedDeadline || r.last != 1000 {
		t.Errorf("at the bound: %+v; want started, %q, 1000 commits in the last window", r, startedDeadline)
	}
}

// TestPageWalkWaitEndsWithStop: a stop during the wait ends it without a walk.
func TestPageWalkWaitEndsWithStop(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	_, res := runQuiet(ctx, scripted(0), 10, 20)
	cancel()
	if r := <-res; r.ok {
		t.Errorf("a stopped wait answered %+v; want not ok", r)
	}
}
