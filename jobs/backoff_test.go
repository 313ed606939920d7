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
			if want := d/2 + time.Duration(0.999*float64(d-d/2)); hi != want {
				t.Errorf("Delay(%d, 0.999) = %s, want %s", attempt, hi, want)
			}
			if hi < d/2 || hi >= d {
				t.Errorf("Delay(%d, 0.999) = %s, want in [%s, %s)", attempt, hi, d/2, d)
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
				d := b.Base
				for i := 1; i < attempt && d < b.Max; i++ {
					d *= 2
				}
				d = min(d, b.Max)
				for range 50 {
					j := r.Float64()
					if got := b.Delay(attempt, j); got < d/2 || got >= d {
						t.Fatalf("Delay(%d, %v) = %s, want in [%s, %s)", attempt, j, got, d/2, d)
					}
				}
			}
		})
	}
}
