package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPoll: poll ends with nil once the condition holds, with the
// condition's own error, with ctx's, and with errTimedOut naming what it
// waited for when the bound passes first.
func TestPoll(t *testing.T) {
	calls := 0
	if err := poll(context.Background(), "the third call", time.Minute, every(time.Millisecond), func() (bool, error) {
		calls++
		return calls == 3, nil
	}); err != nil || calls != 3 {
		t.Errorf("poll = %v after %d calls; want nil after 3", err, calls)
	}
	boom := errors.New("boom")
	if err := poll(context.Background(), "x", time.Minute, every(time.Millisecond), func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("poll with a failing condition = %v; want %v", err, boom)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := poll(ctx, "x", time.Minute, every(time.Hour), func() (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("poll after its ctx ended = %v; want context.Canceled", err)
	}
	err := poll(context.Background(), "the impossible", time.Millisecond, every(time.Millisecond), func() (bool, error) { return false, nil })
	if !errors.Is(err, errTimedOut) || !strings.Contains(err.Error(), "the impossible") {
		t.Errorf("poll that never holds = %v; want errTimedOut naming what it waited for", err)
	}
}
