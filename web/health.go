package web

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
)

// readyFor is how long a /readyz answer is reused. The check is a real
// commit (two fdatasyncs); anyone can call /readyz, and without the reuse
// a flood of calls would be a flood of disk writes. A probe every few
// seconds still sees a store that stopped committing within readyFor.
const readyFor = 5 * time.Second

// readyCache holds the last readiness check; one check runs at a time and
// the callers waiting for it share its answer.
type readyCache struct {
	mu   sync.Mutex
	ping func(context.Context) error
	// full is the store's memory of a write that failed for lack of disk
	// space (store.NoSpace): a webhook's failure makes the last answer
	// stale at once, and a write large enough that commits makes a cached
	// no-space answer stale, so /readyz follows the webhooks, not the clock.
	full func() error
	at   time.Time // when the last check ran (monotonic clock)
	err  error
}

// check returns the last result if it is recent, or runs a new check.
func (r *readyCache) check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < readyFor && !r.stale() {
		return r.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	r.err = r.ping(ctx)
	r.at = time.Now()
	return r.err
}

// stale says whether the store's memory of a full disk changed since the
// last check; callers hold r.mu.
func (r *readyCache) stale() bool {
	if r.full == nil {
		return false
	}
	var cached *store.NoSpaceError
	wasFull := errors.As(r.err, &cached)
	now := r.full()
	return (r.err == nil && now != nil) || (wasFull && now == nil)
}

// healthz answers while the process is up.
func (s *Server) healthz(c *echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when a write commits: it goes through the same
// committer as every webhook, at most once per readyFor. After a write
// failed for lack of disk space it answers 503 with that sentence (where
// to free space) until a write as large commits (store.Ping's probe).
func (s *Server) readyz(c *echo.Context) error {
	if err := s.ready.check(c.Request().Context()); err != nil {
		var full *store.NoSpaceError
		if errors.As(err, &full) {
			return &apiError{status: http.StatusServiceUnavailable, msg: "not ready: " + full.Error(), err: err}
		}
		return &apiError{status: http.StatusServiceUnavailable, msg: "the store cannot commit", err: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
