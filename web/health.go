package web

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
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
	at   time.Time // when the last check ran (monotonic clock)
	err  error
}

// check returns the last result if it is recent, or runs a new check.
func (r *readyCache) check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < readyFor {
		return r.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	r.err = r.ping(ctx)
	r.at = time.Now()
	return r.err
}

// healthz answers while the process is up.
func (s *Server) healthz(c *echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when a write commits: it goes through the same
// committer as every webhook, at most once per readyFor.
func (s *Server) readyz(c *echo.Context) error {
	if err := s.ready.check(c.Request().Context()); err != nil {
		return &apiError{status: http.StatusServiceUnavailable, msg: "the store cannot commit", err: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
