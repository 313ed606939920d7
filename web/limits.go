package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"

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
	mu      sync.Mutex
	size    int64         // the budget
	used    int64         // bytes reserved now
	waiters []*bodyWaiter // oldest first
	// timer starts the bounded wait; a test swaps it for a channel of
	// its own, so no test waits on the clock.
	timer func(d time.Duration) (<-chan time.Time, func() bool)
}

// bodyWaiter is one request waiting for room; ready is closed once its
// bytes are reserved for it.
type bodyWaiter struct {
	n     int64
	ready chan struct{}
}

// newBodyBudget returns a budget of size bytes; nil (no bound) for 0.
func newBodyBudget(size int64) *bodyBudget {
	if size <= 0 {
		return nil
	}
	return &bodyBudget{size: size, timer: func(d time.Duration) (<-chan time.Time, func() bool) {
		t := time.NewTimer(d)
		return t.C, t.Stop
	}}
}

// errNoRoom is a reservation that found no room within its wait.
var errNoRoom = fmt.Errorf("no room for the body within the wait")

// reserve takes n bytes of the budget (all of it at most: a body larger
// than the whole budget is read alone), waiting up to wait for room, and
// returns the function that gives them back. It fails with errNoRoom when
// the wait runs out first, or with ctx's error when the client goes.
func (b *bodyBudget) reserve(ctx context.Context, n int64, wait time.Duration) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	n = max(1, min(n, b.size))
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	if wait <= 0 {
		b.mu.Unlock()
		return nil, errNoRoom
	}
	w := &bodyWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	timer := b.timer
	b.mu.Unlock()

	expired, stop := timer(wait)
	defer stop()
	select {
	case <-w.ready:
		return b.releaser(n), nil
	case <-expired:
		err = errNoRoom
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while the wait ended: the bytes are this request's.
		return b.releaser(n), nil
	default:
	}
	i := slices.Index(b.waiters, w)
	b.waiters = slices.Delete(b.waiters, i, i+1)
	if i == 0 {
		// The first in line gave up: those behind it may fit now.
		b.grant()
	}
	return nil, err
}

// releaser gives n bytes back, once however often it is called.
func (b *bodyBudget) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= n
			b.grant()
		})
	}
}

// grant reserves room for the waiters at the front of the line, in
// order, as long as they fit; callers hold b.mu.
func (b *bodyBudget) grant() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters = slices.Delete(b.waiters, 0, 1)
		close(w.ready)
	}
}

// state is the bytes reserved and the requests waiting, for the metrics.
func (b *bodyBudget) state() (used int64, waiting int) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, len(b.waiters)
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
		config.FormatSize(l.BodiesInFlight), fmtWait(l.BodyWait), fmtWait(retry))
}

// fmtWait writes a wait as people do: 10s, 1.5s, 0s.
func fmtWait(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
