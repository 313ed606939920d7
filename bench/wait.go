package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/proc"
)

// errTimedOut is what poll returns, wrapped, when its bound passes first.
var errTimedOut = errors.New("timed out")

// every is a pause of d between two calls of a condition, however long
// the call took.
func every(d time.Duration) func(took time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

// poll is the bench modes' one wait: proc.Poll, its errors naming what
// it waited for (errTimedOut when within passes first). Between calls it
// pauses for pause(took), took being how long the last call took, so that
// a costly check (a scrape of every job) keeps its server busy a small
// share of the time, and a start-up measured in milliseconds is seen
// within one.
func poll(ctx context.Context, what string, within time.Duration, pause func(took time.Duration) time.Duration, cond func() (bool, error)) error {
	err := proc.Poll(ctx, within, pause, cond)
	switch {
	case errors.Is(err, proc.ErrNotWithin):
		return fmt.Errorf("%w after %s waiting for %s", errTimedOut, within, what)
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return err
}
