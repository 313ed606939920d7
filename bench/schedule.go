package main

import "time"

// arrivals is an open-loop schedule: request i is due at i/rate after the
// start, whatever became of the requests before it. A target that answers
// slowly does not slow the arrivals down, as it would with a fixed number of
// connections that each wait for their answer (the default mode); its
// backlog shows as latency measured from the due time instead.
type arrivals struct {
	rate int // requests per second, 1..maxRate
	n    int // requests in all
}

const (
	maxRate     = 100_000
	maxDuration = time.Hour
)

// due is when request i is due, after the start.
func (a arrivals) due(i int) time.Duration {
	return time.Duration(int64(i) * int64(time.Second) / int64(a.rate))
}

// dueBy is how many requests are due at elapsed: the i with due(i) <= elapsed,
// at most n. Integer arithmetic, so it agrees with due exactly (no float
// rounding lets a request be sent twice or never).
func (a arrivals) dueBy(elapsed time.Duration) int {
	if elapsed < 0 {
		return 0
	}
	// due(i) <= e  ⇔  floor(i·1e9/rate) <= e  ⇔  i·1e9 < (e+1)·rate
	// ⇔  i < ceil((e+1)·rate / 1e9).
	num := (int64(elapsed) + 1) * int64(a.rate)
	k := (num + int64(time.Second) - 1) / int64(time.Second)
	return int(min(k, int64(a.n)))
}

// growth is how fast a queue grew over the second half of a run, in jobs a
// second, from samples (seconds since the start, depth) in time order. It
// compares the mean depth of the last quarter with that of the second
// quarter, so one noisy sample moves it little. ok is false with fewer than
// four samples.
func growth(at []float64, depth []float64) (perSec float64, ok bool) {
	n := len(at)
	if n < 4 || len(depth) != n {
		return 0, false
	}
	mean := func(lo, hi int) (t, d float64) {
		for i := lo; i < hi; i++ {
			t += at[i]
			d += depth[i]
		}
		k := float64(hi - lo)
		return t / k, d / k
	}
	t1, d1 := mean(n/4, n/2)
	t2, d2 := mean(n*3/4, n)
	if t2 <= t1 {
		return 0, false
	}
	return (d2 - d1) / (t2 - t1), true
}
