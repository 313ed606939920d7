package jobs

import (
	"math/rand/v2"
	"time"
)

// Backoff spaces the attempts of a failing job: Base before the second
// attempt, doubling each time, never more than Max.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// Delay is the wait after the given attempt (1-based) failed. jitter in
// [0,1) spreads the wait over [d/2, d) so that jobs that failed together do
// not all come back together ("equal jitter").
func (b Backoff) Delay(attempt int, jitter float64) time.Duration {
	d := b.Base
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	half := d / 2
	return half + time.Duration(jitter*float64(d-half))
}

// randomJitter is the production jitter source.
func randomJitter() float64 { return rand.Float64() }
