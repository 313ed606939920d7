package web

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/handoff/handoff/config"
)

// The login limits (see README, "Logging in"): a stranger who knows a name
// can slow that name's logins down but cannot refuse its right password
// to an address that has not failed for it.
const (
	loginWindow   = 15 * time.Minute
	loginPerPair  = 5               // failures of one name from one address
	loginPerAddr  = 20              // failures from one address, all names
	loginNameFree = 5               // failures of a name, all addresses, before its back-off
	loginDelay    = time.Second     // the first back-off, doubling with each failure
	loginDelayMax = 5 * time.Minute // the longest back-off
)

// The bearer limits: refused tokens per address.
const (
	bearerWindow  = 10 * time.Minute
	bearerPerAddr = 20
	// auditPerWindow caps the audit entries about refused tokens in one
	// bearerWindow, and about failed logins in one loginWindow, over all
	// addresses, so a flood cannot fill the disk.
	auditPerWindow = 200
)

// maxLimitKeys bounds each limiter's memory: past it, a sweep drops every
// key whose failures all left the window.
const maxLimitKeys = 50_000

// addrKey is the key an address is limited by: an IPv4 address, or the
// /64 of an IPv6 one (one subscriber's usual share), so that stepping
// through a block of addresses does not buy fresh attempts.
func addrKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// window is a list of failure times, oldest first, in one window.
type window []time.Time

// prune drops the failures older than d before now.
func (w window) prune(now time.Time, d time.Duration) window {
	i := 0
	for i < len(w) && now.Sub(w[i]) >= d {
		i++
	}
	return w[i:]
}

// without removes one failure at t (the newest such), for an attempt that
// turned out not to fail.
func (w window) without(t time.Time) window {
	for i := len(w) - 1; i >= 0; i-- {
		if w[i].Equal(t) {
			return append(w[:i:i], w[i+1:]...)
		}
	}
	return w
}

// failures is a set of windows by key; callers hold the lock of the
// limiter that owns it.
type failures map[string]window

func (f failures) get(key string, now time.Time, d time.Duration) window {
	w := f[key].prune(now, d)
	if len(w) == 0 {
		delete(f, key)
	} else {
		f[key] = w
	}
	return w
}

func (f failures) add(key string, t time.Time) { f[key] = append(f[key], t) }

func (f failures) remove(key string, t time.Time) {
	if w := f[key].without(t); len(w) == 0 {
		delete(f, key)
	} else {
		f[key] = w
	}
}

// sweep drops every key with no failure left in the window, once f is large.
func (f failures) sweep(now time.Time, d time.Duration) {
	if len(f) < maxLimitKeys {
		return
	}
	for k := range f {
		f.get(k, now, d)
	}
}

// loginGuard limits logins by (name, address) pair, by address, and with a
// back-off per name. Every check and count happens under one lock and
// before the password is compared, so parallel guesses cannot slip past.
type loginGuard struct {
	mu    sync.Mutex
	pairs failures // name + "\x00" + address
	addrs failures
	names failures
	// marks is when each pair's last audit entry was written and how many
	// failures came since; audit caps the entries over all pairs
	// (auditFailure).
	marks map[string]auditMark
	audit auditBudget
}

// auditMark is one pair's last audit entry about failed logins.
type auditMark struct {
	at   time.Time
	more int // failures since at, counted, not written
}

func newLoginGuard() *loginGuard {
	return &loginGuard{pairs: failures{}, addrs: failures{}, names: failures{}, marks: map[string]auditMark{},
		audit: auditBudget{max: auditPerWindow, window: loginWindow}}
}

// auditFailure says whether a failed login of name from addr at now gets
// an audit entry: the first failure of the pair in a loginWindow does, the
// others are counted into the next entry (more), and over all pairs at
// most auditPerWindow entries are written per window (last: this is the
// final one). Each failure is still limited by reserve; this bounds the
// audit bucket against guesses from many addresses.
func (g *loginGuard) auditFailure(name, addr string, now time.Time) (write bool, more int, last bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := pairKey(name, addr)
	m, seen := g.marks[k]
	if seen && now.Sub(m.at) < loginWindow && !now.Before(m.at) {
		m.more++
		g.marks[k] = m
		return false, 0, false
	}
	ok, last := g.audit.take(now)
	if !ok {
		if seen { // not written, so counted into the pair's next entry
			m.more++
			g.marks[k] = m
		}
		return false, 0, false
	}
	if len(g.marks) >= maxLimitKeys {
		for mk, mm := range g.marks {
			if now.Sub(mm.at) >= loginWindow {
				delete(g.marks, mk)
			}
		}
	}
	g.marks[k] = auditMark{at: now}
	return true, m.more, last
}

func pairKey(name, addr string) string { return name + "\x00" + addr }

// nameDelay is how long after a name's newest failure an address that has
// failed for it must wait, given n failures of the name in the window.
func nameDelay(n int) time.Duration {
	if n < loginNameFree {
		return 0
	}
	d := loginDelay
	for i := loginNameFree; i < n && d < loginDelayMax; i++ {
		d *= 2
	}
	return min(d, loginDelayMax)
}

// reserve counts an attempt of name from addr at now as a failure unless
// one of the limits refuses it; retry is how long until it would not.
//
// The name's back-off applies only to addresses that already failed for
// the name: the first attempt from any other address is always compared,
// so whoever fails for "admin" from elsewhere never refuses the admin's
// right password. A stranger spread over many addresses gets one guess
// per address during the back-off, and the per-address limit bounds those.
func (g *loginGuard) reserve(name, addr string, now time.Time) (retry time.Duration, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pairs.sweep(now, loginWindow)
	g.addrs.sweep(now, loginWindow)
	g.names.sweep(now, loginWindow)
	pair := g.pairs.get(pairKey(name, addr), now, loginWindow)
	byAddr := g.addrs.get(addr, now, loginWindow)
	byName := g.names.get(name, now, loginWindow)
	switch {
	case len(pair) >= loginPerPair:
		return pair[0].Add(loginWindow).Sub(now), false
	case len(byAddr) >= loginPerAddr:
		return byAddr[0].Add(loginWindow).Sub(now), false
	case len(pair) > 0 && len(byName) >= loginNameFree:
		if next := byName[len(byName)-1].Add(nameDelay(len(byName))); now.Before(next) {
			return next.Sub(now), false
		}
	}
	g.pairs.add(pairKey(name, addr), now)
	g.addrs.add(addr, now)
	g.names.add(name, now)
	return 0, true
}

// release takes back the attempt reserve counted at t: a login that
// succeeded is not a failure. The name's other failures stay: a stranger's
// guesses keep slowing the stranger after the real person logs in.
func (g *loginGuard) release(name, addr string, t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pairs.remove(pairKey(name, addr), t)
	g.addrs.remove(addr, t)
	g.names.remove(name, t)
}

// unlockName clears a name's back-off and its limits from every address.
func (g *loginGuard) unlockName(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, found := g.names[name]
	delete(g.names, name)
	for k := range g.pairs {
		if strings.HasPrefix(k, name+"\x00") {
			delete(g.pairs, k)
			found = true
		}
	}
	return found
}

// unlockAddr clears an address's limit and its pairs.
func (g *loginGuard) unlockAddr(addr string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, found := g.addrs[addr]
	delete(g.addrs, addr)
	for k := range g.pairs {
		if strings.HasSuffix(k, "\x00"+addr) {
			delete(g.pairs, k)
			found = true
		}
	}
	return found
}

// Lockout is a name or an address whose logins are being refused or
// slowed, for the admins' unlock panel.
type Lockout struct {
	Name     string // set for a name
	Addr     string // set for an address (or, with Name, one pair)
	Failures int
	Until    time.Time // when the oldest failure leaves the window, or the back-off ends
}

// lockouts lists every name in back-off, pair at its limit and address at
// its limit, names first.
func (g *loginGuard) lockouts(now time.Time) []Lockout {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Lockout
	for name := range g.names {
		w := g.names.get(name, now, loginWindow)
		if len(w) >= loginNameFree {
			out = append(out, Lockout{Name: name, Failures: len(w), Until: w[len(w)-1].Add(nameDelay(len(w)))})
		}
	}
	for k := range g.pairs {
		w := g.pairs.get(k, now, loginWindow)
		if len(w) >= loginPerPair {
			name, addr, _ := strings.Cut(k, "\x00")
			out = append(out, Lockout{Name: name, Addr: addr, Failures: len(w), Until: w[0].Add(loginWindow)})
		}
	}
	for addr := range g.addrs {
		w := g.addrs.get(addr, now, loginWindow)
		if len(w) >= loginPerAddr {
			out = append(out, Lockout{Addr: addr, Failures: len(w), Until: w[0].Add(loginWindow)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Name == "") != (b.Name == "") {
			return a.Name != ""
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Addr < b.Addr
	})
	return out
}

// limiter counts failures per key in a sliding window.
type limiter struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	fails  failures
}

func newLimiter(max int, window time.Duration) *limiter {
	return &limiter{max: max, window: window, fails: failures{}}
}

// reserve counts an attempt for key at now, unless key has used up its
// attempts (then retry says for how long): checking and counting under one
// lock, before the secret is compared. n is the key's count with this one.
func (l *limiter) reserve(key string, now time.Time) (n int, retry time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails.sweep(now, l.window)
	w := l.fails.get(key, now, l.window)
	if len(w) >= l.max {
		return len(w), w[0].Add(l.window).Sub(now), false
	}
	l.fails.add(key, now)
	return len(w) + 1, 0, true
}

// release takes back the attempt reserve counted at t.
func (l *limiter) release(key string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails.remove(key, t)
}

// auditBudget caps how many entries of one kind are written per window,
// over all addresses.
type auditBudget struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	start  time.Time
	used   int
}

// take reports whether one more entry may be written at now; last is true
// for the final one of the window (which says the rest are left out).
func (b *auditBudget) take(now time.Time) (ok, last bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.start) >= b.window || now.Before(b.start) {
		b.start, b.used = now, 0
	}
	if b.used >= b.max {
		return false, false
	}
	b.used++
	return true, b.used == b.max
}

// trySecret counts one try at a secret other than a login's password
// under the login limits (loginGuard: per name and address, per address,
// the name's back-off), before the secret is compared, so parallel guesses
// cannot slip past. name is what the try is for: a person's name for a
// check of their password, or a phrase with a space, which no person's
// name holds, for another secret ("hub.verify_token of wa"). what names
// it in the 429 (with Retry-After) when the limits refuse. Otherwise call
// right once the secret matched: it takes the try back, as a login's
// success does.
func (s *Server) trySecret(c *echo.Context, name, what string) (right func(), err error) {
	now := s.now()
	addr := addrKey(c.RealIP())
	if retry, ok := s.logins.reserve(name, addr, now); !ok {
		return nil, tooMany(c, retry, "too many failed tries at "+what)
	}
	return func() { s.logins.release(name, addr, now) }, nil
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
