package web

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/users"
)

// trySecret counts one try at a secret other than a login's password
// under the login limits (users.Guard: per name and address, per address,
// the name's back-off), before the secret is compared, so parallel guesses
// cannot slip past. name is what the try is for: a person's name for a
// check of their password, or a phrase with a space, which no person's
// name holds, for another secret ("hub.verify_token of wa"). what names
// it in the 429 (with Retry-After) when the limits refuse. Otherwise call
// right once the secret matched: it takes the try back, as a login's
// success does.
func (s *Server) trySecret(c *echo.Context, name, what string) (right func(), err error) {
	now := s.now()
	addr := users.AddrKey(c.RealIP())
	if retry, ok := s.accounts.Logins().Reserve(name, addr, now); !ok {
		return nil, tooMany(c, retry, "too many failed tries at "+what)
	}
	return func() { s.accounts.Logins().Release(name, addr, now) }, nil
}

// bodyBudget bounds the webhook bodies held in memory at once, in bytes
// (limits.bodies_in_flight): a request reserves the bytes it is about to
// read before it reads them, and gives them back once it is answered. A
// request that finds no room waits, first come first served (so a large
// body is never starved by a stream of small ones), for at most
// limits.body_wait; then it is answered 503 before its body is read, and
// nothing is recorded, so nothing acknowledged is lost. Its body meanwhile
// stays in the kernel's socket buffers, not in the heap.
//
// A 1 MiB body costs about five times its size before it is committed
// (the read buffer, its parsed fields, the encoded record, bbolt's pages),
// so without the bound 200 concurrent 1 MiB webhooks peaked at 1.6 GiB RSS
// (see bench flood).
type bodyBudget struct {
	size int64
	// sem holds the budget's bytes: golang.org/x/sync's weighted
	// semaphore, first come first served, a wait ended by its context.
	sem *semaphore.Weighted
	// used and waiting are the bytes reserved and the requests waiting
	// now, for the metrics.
	used, waiting atomic.Int64
	// timer starts the bounded wait; a test swaps it (under mu) for a
	// channel of its own, so no test waits on the clock.
	mu    sync.Mutex
	timer func(d time.Duration) (<-chan time.Time, func() bool)
}

// newBodyBudget returns a budget of size bytes; nil (no bound) for 0.
func newBodyBudget(size int64) *bodyBudget {
	if size <= 0 {
		return nil
	}
	return &bodyBudget{size: size, sem: semaphore.NewWeighted(size), timer: func(d time.Duration) (<-chan time.Time, func() bool) {
		t := time.NewTimer(d)
		return t.C, t.Stop
	}}
}

// errNoRoom is a reservation that found no room within its wait.
var errNoRoom = fmt.Errorf("no room for the body within the wait")

// reserve takes n bytes of the budget (all of it at most: a body larger
// than the whole budget is read alone), waiting up to wait for room, and
// returns the function that gives them back. It fails with errNoRoom when
// the wait runs out first, or with ctx's error when the client goes. A
// waiter that gives up lets those behind it in (the semaphore's own rule).
func (b *bodyBudget) reserve(ctx context.Context, n int64, wait time.Duration) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	n = max(1, min(n, b.size))
	if b.sem.TryAcquire(n) {
		return b.held(n), nil
	}
	if wait <= 0 {
		return nil, errNoRoom
	}
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	b.mu.Lock()
	timer := b.timer
	b.mu.Unlock()
	expired, stop := timer(wait)
	defer stop()
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-expired:
			cancel()
		case <-waitCtx.Done():
		}
	}()
	if err := b.sem.Acquire(waitCtx, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errNoRoom
	}
	return b.held(n), nil
}

// held counts n bytes as reserved and returns the function that gives
// them back, once however often it is called.
func (b *bodyBudget) held(n int64) func() {
	b.used.Add(n)
	var once sync.Once
	return func() {
		once.Do(func() {
			b.used.Add(-n)
			b.sem.Release(n)
		})
	}
}

// state is the bytes reserved and the requests waiting, for the metrics.
func (b *bodyBudget) state() (used int64, waiting int) {
	if b == nil {
		return 0, 0
	}
	return b.used.Load(), int(b.waiting.Load())
}

// watchBodies exports b's state: the bytes of webhook bodies held and
// the webhooks waiting for room. Registered once per registry.
func (m *Metrics) watchBodies(b *bodyBudget) {
	if m == nil {
		return
	}
	for _, g := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "handoff_webhook_body_bytes", Help: "Bytes of webhook bodies being read and handled now (at most limits.bodies_in_flight).",
		}, func() float64 { used, _ := b.state(); return float64(used) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "handoff_webhooks_waiting", Help: "Webhooks waiting for room for their body (limits.bodies_in_flight), at most limits.body_wait each.",
		}, func() float64 { _, waiting := b.state(); return float64(waiting) }),
	} {
		_ = m.reg.Register(g) // a second server on the same metrics keeps the first's
	}
}

// bodyReserve is what a webhook reserves before its body is read: its
// Content-Length, or the channel's whole limit when it sends none
// (chunked); the read never goes past the limit either way.
func bodyReserve(contentLength, limit int64) int64 {
	if contentLength < 0 || contentLength > limit {
		return limit
	}
	return contentLength
}

// busy is the 503 of a webhook that found no room for its body within
// limits.body_wait: nothing was read or recorded, so the sender's retry
// (Retry-After: the wait, at least a second) loses nothing.
func (s *Server) busy(c *echo.Context) error {
	l := s.cfg.Limits
	retry := min(max(l.BodyWait, time.Second), 30*time.Second)
	c.Response().Header().Set("Retry-After", fmt.Sprint(int((retry+time.Second-1)/time.Second)))
	return errorf(http.StatusServiceUnavailable,
		"handoff is already reading as many webhook bodies as limits.bodies_in_flight allows (%s) and none finished within limits.body_wait (%s); nothing was recorded, retry in %s",
		config.FormatSize(l.BodiesInFlight), config.FormatDuration(l.BodyWait), config.FormatDuration(retry))
}
