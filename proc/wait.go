package proc

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// interval is the shortest pause between two calls of a condition.
const interval = 25 * time.Millisecond

// Eventually calls cond until it reports done and then returns nil. It
// returns cond's error as soon as there is one, ctx's error when ctx ends,
// and an error saying so when within passes first; cond is called a last
// time at the deadline. Between calls it pauses 25ms, or four times as long
// as the last call took when that is longer, so that a costly check
// (hundreds of requests) keeps a server busy a fifth of the time at most.
// It is the one way the harnesses wait: never a sleep.
func Eventually(ctx context.Context, within time.Duration, cond func() (bool, error)) error {
	return Poll(ctx, within, func(took time.Duration) time.Duration { return max(interval, 4*took) }, cond)
}

// ErrNotWithin is what Poll and Eventually return, wrapped, when their
// bound passes before the condition holds.
var ErrNotWithin = errors.New("not within")

// Poll is Eventually with the pause between two calls chosen by pause,
// given how long the last call took: a start-up measured in milliseconds
// wants a finer pause than Eventually's 25ms floor.
func Poll(ctx context.Context, within time.Duration, pause func(took time.Duration) time.Duration, cond func() (bool, error)) error {
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
			return fmt.Errorf("%w %v", ErrNotWithin, within)
		}
		t := time.NewTimer(min(pause(now.Sub(began)), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
