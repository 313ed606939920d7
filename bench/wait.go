package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errTimedOut is what poll returns, wrapped, when its bound passes first.
var errTimedOut = errors.New("timed out")

// every is a pause of d between two calls of a condition, however long
// the call took.
func every(d time.Duration) func(took time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

// poll is the bench modes' one wait: it calls cond until it reports done
// and returns nil; cond's error as soon as there is one; ctx's error when
// ctx ends; and errTimedOut, naming what, when within passes first (cond
// is called a last time at the bound). Between calls it pauses for
// pause(took), took being how long the last call took, so that a costly
// check (a scrape of every job) can keep its server busy a small share of
// the time. proc.Eventually is the same wait at a fixed 25ms floor, too
// coarse for a start-up measured in milliseconds.
func poll(ctx context.Context, what string, within time.Duration, pause func(took time.Duration) time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		began := time.Now()
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		now := time.Now()
		left := deadline.Sub(now)
		if left <= 0 {
			return fmt.Errorf("%w after %s waiting for %s", errTimedOut, within, what)
		}
		t := time.NewTimer(min(pause(now.Sub(began)), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
