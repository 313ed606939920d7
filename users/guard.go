package users

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"
)

// TooMany refuses an attempt that the limits on guesses (Guard, the
// bearer limit) do not let be checked now: Why says which, and Retry how
// long until they would.
type TooMany struct {
	Why   string
	Retry time.Duration
}

// RetrySeconds is Retry in whole seconds, rounded up, at least one: what
// a Retry-After header says.
func (e *TooMany) RetrySeconds() int {
	return max(1, int((e.Retry+time.Second-1)/time.Second))
}

func (e *TooMany) Error() string {
	return fmt.Sprintf("%s; try again in %s", e.Why, (time.Duration(e.RetrySeconds()) * time.Second).String())
}

// The login limits (see README, "Logging in"): a stranger who knows a name
// can slow that name's logins down but cannot refuse its right password
// to an address that has not failed for it.
const (
	LoginWindow   = 15 * time.Minute
	LoginPerPair  = 5               // failures of one name from one address
	LoginPerAddr  = 20              // failures from one address, all names
	LoginNameFree = 5               // failures of a name, all addresses, before its back-off
	LoginDelay    = time.Second     // the first back-off, doubling with each failure
	LoginDelayMax = 5 * time.Minute // the longest back-off
)

// The bearer limits: refused tokens per address.
const (
	BearerWindow  = 10 * time.Minute
	BearerPerAddr = 20
	// AuditPerWindow caps the audit entries about refused tokens in one
	// BearerWindow, and about failed logins in one LoginWindow, over all
	// addresses, so a flood cannot fill the disk.
	AuditPerWindow = 200
)

// maxLimitKeys bounds each limiter's memory: past it, a sweep drops every
// key whose failures all left the window.
const maxLimitKeys = 50_000

// AddrKey is the key an address is limited by: an IPv4 address, or the
// /64 of an IPv6 one (one subscriber's usual share), so that stepping
// through a block of addresses does not buy fresh attempts.
func AddrKey(ip string) string {
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

// Guard limits logins by (name, address) pair, by address, and with a
// back-off per name. Every check and count happens under one lock and
// before the password is compared, so parallel guesses cannot slip past.
type Guard struct {
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

func NewGuard() *Guard {
	return &Guard{pairs: failures{}, addrs: failures{}, names: failures{}, marks: map[string]auditMark{},
		audit: auditBudget{max: AuditPerWindow, window: LoginWindow}}
}

// auditFailure says whether a failed login of name from addr at now gets
// an audit entry: the first failure of the pair in a LoginWindow does, the
// others are counted into the next entry (more), and over all pairs at
// most AuditPerWindow entries are written per window (last: this is the
// final one). Each failure is still limited by reserve; this bounds the
// audit bucket against guesses from many addresses.
func (g *Guard) auditFailure(name, addr string, now time.Time) (write bool, more int, last bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := pairKey(name, addr)
	m, seen := g.marks[k]
	if seen && now.Sub(m.at) < LoginWindow && !now.Before(m.at) {
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
			if now.Sub(mm.at) >= LoginWindow {
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
	if n < LoginNameFree {
		return 0
	}
	d := LoginDelay
	for i := LoginNameFree; i < n && d < LoginDelayMax; i++ {
		d *= 2
	}
	return min(d, LoginDelayMax)
}

// reserve counts an attempt of name from addr at now as a failure unless
// one of the limits refuses it; retry is how long until it would not.
//
// The name's back-off applies only to addresses that already failed for
// the name: the first attempt from any other address is always compared,
// so whoever fails for "admin" from elsewhere never refuses the admin's
// right password. A stranger spread over many addresses gets one guess
// per address during the back-off, and the per-address limit bounds those.
func (g *Guard) Reserve(name, addr string, now time.Time) (retry time.Duration, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pairs.sweep(now, LoginWindow)
	g.addrs.sweep(now, LoginWindow)
	g.names.sweep(now, LoginWindow)
	pair := g.pairs.get(pairKey(name, addr), now, LoginWindow)
	byAddr := g.addrs.get(addr, now, LoginWindow)
	byName := g.names.get(name, now, LoginWindow)
	switch {
	case len(pair) >= LoginPerPair:
		return pair[0].Add(LoginWindow).Sub(now), false
	case len(byAddr) >= LoginPerAddr:
		return byAddr[0].Add(LoginWindow).Sub(now), false
	case len(pair) > 0 && len(byName) >= LoginNameFree:
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
func (g *Guard) Release(name, addr string, t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pairs.remove(pairKey(name, addr), t)
	g.addrs.remove(addr, t)
	g.names.remove(name, t)
}

// unlockName clears a name's back-off and its limits from every address.
func (g *Guard) UnlockName(name string) bool {
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
func (g *Guard) UnlockAddr(addr string) bool {
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
func (g *Guard) Lockouts(now time.Time) []Lockout {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Lockout
	for name := range g.names {
		w := g.names.get(name, now, LoginWindow)
		if len(w) >= LoginNameFree {
			out = append(out, Lockout{Name: name, Failures: len(w), Until: w[len(w)-1].Add(nameDelay(len(w)))})
		}
	}
	for k := range g.pairs {
		w := g.pairs.get(k, now, LoginWindow)
		if len(w) >= LoginPerPair {
			name, addr, _ := strings.Cut(k, "\x00")
			out = append(out, Lockout{Name: name, Addr: addr, Failures: len(w), Until: w[0].Add(LoginWindow)})
		}
	}
	for addr := range g.addrs {
		w := g.addrs.get(addr, now, LoginWindow)
		if len(w) >= LoginPerAddr {
			out = append(out, Lockout{Addr: addr, Failures: len(w), Until: w[0].Add(LoginWindow)})
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
