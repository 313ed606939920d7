package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/handoff/handoff/store"

	"github.com/handoff/handoff/testkit"
)

// TestSnoozeCostsNoAttempt: a kind that snoozes twice and then fails runs
// all its attempts after the snoozes: a job of two attempts is tried
// twice for real, each snooze recorded on it without a number of its own.
func TestSnoozeCostsNoAttempt(t *testing.T) {
	st := openStore(t)
	kind := &testkit.KindFunc{Fn: func(_ context.Context, call int, _ store.Job) error {
		if call <= 2 {
			return &Snooze{Err: errors.New("held to the rate"), After: 5 * time.Millisecond}
		}
		return errors.New("refused for now")
	}}
	j := testkit.Enqueue(t, st, "test", "web:1", 2, time.Now())
	startRunner(t, st, map[string]Kind{"test": kind}, testOptions())
	got := testkit.WaitJob(t, st, j.ID, store.JobDiscarded)
	if n := len(kind.Calls()); n != 4 {
		t.Fatalf("the kind ran %d times, want 4 (two snoozes, then both attempts)", n)
	}
	var numbers []int
	for _, a := range got.Attempts {
		numbers = append(numbers, a.Number)
	}
	if got.Attempt != 2 || len(numbers) != 4 || numbers[0] != 1 || numbers[1] != 1 || numbers[2] != 1 || numbers[3] != 2 {
		t.Fatalf("attempt %d, records numbered %v; want attempt 2 with records 1, 1, 1, 2", got.Attempt, numbers)
	}
	for i, c := range kind.Calls() {
		if want := []int{1, 1, 1, 2}[i]; c.Attempt != want {
			t.Errorf("call %d ran as attempt %d, want %d", i+1, c.Attempt, want)
		}
	}
}
