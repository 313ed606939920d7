package jobs

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: 10 * time.Second}
	// The full delay d before jitter: Base, doubling per attempt, capped at Max.
	full := []time.Duration{
		100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond,
		10 * time.Second, 10 * time.Second, 10 * time.Second,
	}
	for i, d := range full {
		attempt := i + 1
		t.Run(fmt.Sprint("attempt ", attempt), func(t *testing.T) {
			if got, want := b.Delay(attempt, 0), d/2; got != want {
				t.Errorf("Delay(%d, 0) = %s, want %s (half of %s)", attempt, got, want, d)
			}
			hi := b.Delay(attempt, 0.999)
			if hi < d-d/500 || hi >= d {
				t.Errorf("Delay(%d, 0.999) = %s, want just under %s", attempt, hi, d)
			}
			if attempt > 1 && b.Delay(attempt, 0) < b.Delay(attempt-1, 0) {
				t.Errorf("Delay(%d, 0) = %s is less than Delay(%d, 0) = %s", attempt, b.Delay(attempt, 0), attempt-1, b.Delay(attempt-1, 0))
			}
		})
	}
}

func TestBackoffJitterStaysInRange(t *testing.T) {
	tests := []Backoff{
		{Base: time.Millisecond, Max: 5 * time.Millisecond},
		{Base: time.Second, Max: time.Hour},
		{Base: 3 * time.Second, Max: time.Second}, // Max below Base: Max wins
		{Base: time.Minute, Max: 24 * time.Hour},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, b := range tests {
		t.Run(fmt.Sprintf("%s..%s", b.Base, b.Max), func(t *testing.T) {
			for attempt := 1; attempt <= 200; attempt++ {
				// Whatever the full delay d is (at most Max), jitter keeps
				// the wait in [d/2, d): from the no-jitter wait lo = d/2 up to
				// 2*lo, and always below Max.
				lo := b.Delay(attempt, 0)
				if lo <= 0 || lo > b.Max/2 {
					t.Fatalf("Delay(%d, 0) = %s, want positive and at most half of Max %s", attempt, lo, b.Max)
				}
				for range 50 {
					j := r.Float64()
					if got := b.Delay(attempt, j); got < lo || got > 2*lo || got >= b.Max {
						t.Fatalf("Delay(%d, %v) = %s, want in [%s, %s] and below Max %s", attempt, j, got, lo, 2*lo, b.Max)
					}
				}
			}
		})
	}
}
