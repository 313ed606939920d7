package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// Session lifetimes: an idle session ends after sessionIdle, any session
// after sessionMax.
const (
	sessionCookie = "handoff_session"
	sessionIdle   = 12 * time.Hour
	sessionMax    = 7 * 24 * time.Hour
	touchEvery    = time.Minute // LastSeen is written at most this often per session
)

// principal is who a request acts as.
type principal struct {
	Name    string
	Role    store.Role
	Owner   string // the routing owner of a person ("mine")
	Session *store.Session
	hash    []byte // the session's key
}

const principalKey = "handoff.principal"

// who returns the request's principal; nil when nobody is logged in.
func who(c *echo.Context) *principal {
	p, _ := c.Get(principalKey).(*principal)
	return p
}

func (s *Server) setPrincipal(c *echo.Context, p *principal) {
	c.Set(principalKey, p)
	c.Set(actorKey, p.Name)
}

// newSecret returns 32 random bytes, URL-safe.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashSecret(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// bearer authenticates an Authorization: Bearer header: the HANDOFF_API_TOKEN
// (admin) or a token an admin created. ok is false when the header is absent.
func (s *Server) bearer(c *echo.Context) (p *principal, ok bool, err error) {
	h := c.Request().Header.Get("Authorization")
	if h == "" {
		return nil, false, nil
	}
	const prefix = "Bearer "
	if !strings.HasPrefix(h, prefix) || len(h) == len(prefix) {
		return nil, true, errorf(http.StatusUnauthorized, "the Authorization header must be \"Bearer <token>\"")
	}
	hash := hashSecret(h[len(prefix):])
	if s.tokenHash != nil && subtle.ConstantTimeCompare(hash, s.tokenHash) == 1 {
		return &principal{Name: "api-token", Role: store.RoleAdmin}, true, nil
	}
	t, err := s.st.TokenByHash(hash)
	if err != nil || t.RevokedAt != nil {
		return nil, true, errorf(http.StatusUnauthorized, "the token is not valid (unknown or revoked)")
	}
	return &principal{Name: "token:" + t.Name + " (" + t.User + ")", Role: t.Role}, true, nil
}

// session authenticates the session cookie; nil when there is none or it expired.
func (s *Server) session(c *echo.Context) *principal {
	ck, err := c.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	hash := hashSecret(ck.Value)
	sess, err := s.st.Session(hash)
	if err != nil {
		return nil
	}
	now := s.now()
	if now.Sub(sess.LastSeen) > sessionIdle || now.Sub(sess.CreatedAt) > sessionMax {
		_ = s.st.DeleteSession(c.Request().Context(), hash)
		return nil
	}
	if now.Sub(sess.LastSeen) > touchEvery {
		_ = s.st.TouchSession(c.Request().Context(), hash, now)
	}
	u, err := s.st.User(sess.User)
	if err != nil {
		return nil // the user was removed
	}
	return &principal{Name: u.Name, Role: u.Role, Owner: u.Owner, Session: &sess, hash: hash}
}

// requireAPI admits a bearer token or a session (whose unsafe requests must
// carry the CSRF token).
func (s *Server) requireAPI(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		p, present, err := s.bearer(c)
		if err != nil {
			return err
		}
		if !present {
			p = s.session(c)
			if p == nil {
				return errorf(http.StatusUnauthorized, "this route needs an Authorization: Bearer <token> header or a dashboard session")
			}
			if err := checkCSRF(c, p); err != nil {
				return err
			}
		}
		s.setPrincipal(c, p)
		return next(c)
	}
}

// requirePage admits a logged-in person, sending anyone else to /login.
func (s *Server) requirePage(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		p := s.session(c)
		if p == nil {
			if c.Request().Method != http.MethodGet {
				return errorf(http.StatusUnauthorized, "your session has ended; log in again")
			}
			return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
		}
		if err := checkCSRF(c, p); err != nil {
			return err
		}
		s.setPrincipal(c, p)
		return next(c)
	}
}

// requireAdmin refuses approvers (403).
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if p := who(c); p == nil || p.Role != store.RoleAdmin {
			return errorf(http.StatusForbidden, "only an admin may do this")
		}
		return next(c)
	}
}

// checkCSRF requires the session's token on every unsafe request: as the
// X-CSRF-Token header (htmx sends it) or the csrf form field.
func checkCSRF(c *echo.Context, p *principal) error {
	switch c.Request().Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if p.Session == nil {
		return nil
	}
	got := c.Request().Header.Get("X-CSRF-Token")
	if got == "" && !strings.HasPrefix(c.Request().URL.Path, "/api/") {
		// Dashboard forms may carry it as a field; the JSON API only as the
		// header, so its body is never parsed as a form before its own limit.
		got = c.FormValue("csrf")
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(p.Session.CSRF)) != 1 {
		return errorf(http.StatusForbidden, "the form's security token is missing or stale; reload the page and try again")
	}
	return nil
}

// maxFormBody bounds a dashboard form or login body.
const maxFormBody = 64 << 10

// limitForm caps the body of dashboard and login requests and refuses
// multipart bodies (nothing here uploads files), before any form is parsed.
func limitForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			return errorf(http.StatusUnsupportedMediaType, "the dashboard takes plain forms, not multipart uploads")
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBody)
		return next(c)
	}
}

// crossOrigin refuses unsafe cross-origin browser requests before anything
// else runs (Go's own Sec-Fetch-Site / Origin check).
func crossOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	cop := http.NewCrossOriginProtection()
	return func(c *echo.Context) error {
		if err := cop.Check(c.Request()); err != nil {
			return &apiError{status: http.StatusForbidden, msg: "this request came from another site, so it was refused; use the dashboard's own pages", err: err}
		}
		return next(c)
	}
}

// limiter counts failed logins per key in a sliding window.
type limiter struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	fails  map[string][]time.Time
}

func newLimiter(max int, window time.Duration) *limiter {
	return &limiter{max: max, window: window, fails: map[string][]time.Time{}}
}

// reserve counts an attempt for key at now, unless key has used up its
// attempts: checking and counting under one lock, before the password is
// compared, so parallel guesses cannot all slip past the limit.
func (l *limiter) reserve(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs := l.prune(key, now)
	if len(fs) >= l.max {
		return false
	}
	l.fails[key] = append(fs, now)
	return true
}

// release takes back the attempt reserve counted last for key (a login
// that succeeded is not a failure).
func (l *limiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fs := l.fails[key]; len(fs) > 0 {
		l.fails[key] = fs[:len(fs)-1]
	}
}

func (l *limiter) reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, key)
}

func (l *limiter) prune(key string, now time.Time) []time.Time {
	fs := l.fails[key]
	i := 0
	for i < len(fs) && now.Sub(fs[i]) > l.window {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(l.fails, key)
	} else {
		l.fails[key] = fs
	}
	return fs
}

// errLoginFailed never says which part was wrong.
var errLoginFailed = errors.New("the name or password is wrong")

// login checks a name and password and starts a session. It returns the
// session secret for the cookie.
func (s *Server) login(c *echo.Context, name, pw string) (string, error) {
	now := s.now()
	ip := c.RealIP()
	// Every attempt is counted before the comparison, so parallel guesses
	// cannot all pass; a success clears the name's count and takes back its
	// own attempt from the address's.
	if !s.loginsByIP.reserve(ip, now) || !s.loginsByUser.reserve(name, now) {
		return "", errorf(http.StatusTooManyRequests, "too many failed logins; wait 15 minutes and try again")
	}
	// A name that is not a user is checked against no hash, which costs
	// as much as a real one, so timing does not tell which names exist.
	u, err := s.st.User(name)
	var hash []byte
	if err == nil {
		hash = u.PasswordHash
	}
	if !password.Check(hash, pw) || err != nil {
		who := name
		if err != nil {
			// Not a user: maybe a password typed into the name field. Keep
			// only a fingerprint of it, never the text.
			who = fmt.Sprintf("unknown name (sha256 %x…)", hashSecret(name)[:4])
		}
		_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now, Who: who, From: ip, Action: "login failed"})
		return "", &apiError{status: http.StatusUnauthorized, msg: errLoginFailed.Error()}
	}
	s.loginsByUser.reset(name)
	s.loginsByIP.release(ip)
	secret := newSecret()
	sess := store.Session{User: u.Name, Role: u.Role, CSRF: newSecret(), From: ip, CreatedAt: now, LastSeen: now}
	if err := s.st.CreateSession(c.Request().Context(), hashSecret(secret), sess); err != nil {
		return "", err
	}
	_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now, Who: u.Name, From: ip, Action: "login"})
	return secret, nil
}

// sessionCookieFor builds the session cookie: HttpOnly, SameSite=Lax,
// Secure when the configured base URL is https.
func (s *Server) sessionCookieFor(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(s.cfg.BaseURL, "https://"),
	}
}
