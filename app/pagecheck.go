package app

import (
	"context"
	"time"
)

// The background page walk (checkPagesInBackground) waits for a quiet
// moment: a pageWalkWindow in which at most pageWalkQuiet rounds of
// writes committed. The walk costs CPU for its whole length, and its read
// transaction keeps the pages freed meanwhile from reuse, so a burst of
// webhooks at start-up (a backlog a provider redelivers) is left to finish
// first. The process's own writes (lease renewals, cron ticks, /readyz
// probes) are a few a window, a burst hundreds. However busy the store
// stays, the walk starts within pageWalkWindow×pageWalkWindows (10 min).
const (
	pageWalkWindow  = 30 * time.Second
	pageWalkWindows = 20
	pageWalkQuiet   = 10
)

// Why the page walk started (quietMoment).
const (
	startedQuiet    = "quiet"    // a window saw at most the quiet number of commits
	startedDeadline = "deadline" // no window was quiet, and the bound passed
)

// quietMoment waits until one window, from one tick to the next, saw at
// most quiet commits (commits counts them), or windows windows passed
// without one. It returns why it stopped waiting (startedQuiet,
// startedDeadline) and the commits of the last window, or ok false when
// ctx ended first. The ticks are the caller's clock: a ticker in the
// process, a channel the test feeds.
func quietMoment(ctx context.Context, tick <-chan time.Time, commits func() uint64, quiet uint64, windows int) (why string, last uint64, ok bool) {
	prev := commits()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return "", 0, false
		case <-tick:
		}
		now := commits()
		last, prev = now-prev, now
		switch {
		case last <= quiet:
			return startedQuiet, last, true
		case i >= windows:
			return startedDeadline, last, true
		}
	}
}
