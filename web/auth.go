package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// The session cookie: its name, and its name with an https base_url.
const (
	sessionCookie = "handoff_session"
	hostCookie    = "__Host-" + sessionCookie
)

// principal is who a request acts as: the caller (users.Caller: its
// name, role, owner, clients (clients.go) and a token's scope), and for a
// session, the session and its key.
type principal struct {
	users.Caller
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

// bearer authenticates an Authorization: Bearer header (users.Bearer:
// the HANDOFF_API_TOKEN, or a token an admin created, under the limit of
// refused tokens per address). ok is false when the header is absent.
func (s *Server) bearer(c *echo.Context) (p *principal, ok bool, err error) {
	h := c.Request().Header.Get("Authorization")
	if h == "" {
		return nil, false, nil
	}
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		secret = "" // not "Bearer <token>": refused as malformed
	}
	caller, err := s.accounts.Bearer(c.Request().Context(), secret, c.RealIP(), s.now())
	if err != nil {
		return nil, true, limited(c, err)
	}
	return &principal{Caller: caller}, true, nil
}

// tooMany is a 429 with Retry-After (whole seconds, rounded up).
func tooMany(c *echo.Context, retry time.Duration, why string) error {
	return limited(c, &users.TooMany{Why: why, Retry: retry})
}

// session authenticates the session cookie (users.Session); nil when
// there is none, it expired, it still waits for its second factor, or
// its user was disabled or removed.
func (s *Server) session(c *echo.Context) *principal {
	ck, err := c.Cookie(s.cookie)
	if err != nil {
		return nil
	}
	sess, u, hash, err := s.accounts.Session(c.Request().Context(), ck.Value, s.now())
	if err != nil {
		return nil
	}
	return &principal{Caller: users.Caller{Name: u.Name, Role: u.Role, Owner: u.Owner, Clients: u.Clients}, Session: &sess, hash: hash}
}

// requireAPI admits a bearer token or a session (whose unsafe requests must
// carry the CSRF token) whose scope covers need (users.Caller.May); ""
// admits any.
func (s *Server) requireAPI(need store.Scope) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
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
			if !p.May(need) {
				if len(p.Clients) > 0 {
					// A caller limited to clients hears of no route beyond
					// theirs, as clientScope answers them (clients.go).
					return notYours(c)
				}
				if p.Scope == "" {
					return errorf(http.StatusForbidden, "only an admin may do this")
				}
				return errorf(http.StatusForbidden, "a token with the %s scope may not do this; this route needs the %s scope (or admin)", p.Scope, need)
			}
			s.setPrincipal(c, p)
			return next(c)
		}
	}
}

// requirePage admits a logged-in person, sending anyone else to /login;
// an unsafe request must carry the session's CSRF token.
func (s *Server) requirePage(next echo.HandlerFunc) echo.HandlerFunc {
	return s.requireSession(func(c *echo.Context) error {
		if err := checkCSRF(c, who(c)); err != nil {
			return err
		}
		return next(c)
	})
}

// requireSession is requirePage without the CSRF check, for the one route
// that checks the token itself (the restore upload: its token is a part of
// a multipart body that must not be parsed whole before it is checked).
func (s *Server) requireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		p := s.session(c)
		if p == nil {
			if c.Request().Method != http.MethodGet {
				return errorf(http.StatusUnauthorized, "your session has ended; log in again")
			}
			return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
		}
		s.setPrincipal(c, p)
		return next(c)
	}
}

// requireAdmin refuses approvers: 403, or 404 for a person limited to
// clients, to whom the admin's routes do not exist (clients.go).
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if p := who(c); p == nil || p.Role != store.RoleAdmin {
			if p != nil && len(p.Clients) > 0 {
				return notYours(c)
			}
			return errorf(http.StatusForbidden, "only an admin may do this")
		}
		return next(c)
	}
}

// checkCSRF requires the session's token on every unsafe request: as the
// X-CSRF-Token header (htmx sends it) or the csrf field of the form body.
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
		// Dashboard forms may carry it as a field of the body, never of the
		// query string (a URL is logged, kept in history and sent on as a
		// Referer); the JSON API only as the header, so its body is never
		// parsed as a form before its own limit.
		got = c.Request().PostFormValue("csrf")
	}
	if got == "" || !csrfMatches(got, p.Session.CSRF) {
		return errorf(http.StatusForbidden, "the form's security token is missing or stale; reload the page and try again")
	}
	return nil
}

// csrfOf is the CSRF token that a page or fragment renders for the
// request's session, masked afresh for each use (maskCSRF); "" without a
// session.
func csrfOf(c *echo.Context) string {
	if p := who(c); p != nil && p.Session != nil {
		return maskCSRF(p.Session.CSRF)
	}
	return ""
}

// maskCSRF hides the session's token behind a one-time pad:
// base64url(pad || pad XOR token), with a fresh random pad per call, as
// gorilla/csrf does. Pages are gzipped and some reflect what the request
// asked (the search box holds the query): a secret that read the same in
// every response could be guessed byte by byte from compressed lengths
// (BREACH). Masked, no two responses share the bytes of the token.
func maskCSRF(token string) string {
	out := make([]byte, 2*len(token))
	pad, masked := out[:len(token)], out[len(token):]
	_, _ = rand.Read(pad) // crypto/rand.Read never fails (Go 1.24+)
	for i := range masked {
		masked[i] = pad[i] ^ token[i]
	}
	return base64.RawURLEncoding.EncodeToString(out)
}

// csrfMatches reports whether got carries the session's token: masked as
// maskCSRF renders it, or bare, as pages rendered before masking did (a
// tab left open across an upgrade; the bare token is in no response now).
// Both compare in constant time.
func csrfMatches(got, token string) bool {
	if token == "" {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(got)
	if err != nil || len(raw) != 2*len(token) {
		return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
	}
	pad, masked := raw[:len(token)], raw[len(token):]
	for i := range masked {
		masked[i] ^= pad[i]
	}
	return subtle.ConstantTimeCompare(masked, []byte(token)) == 1
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

// login checks a name and password from the request's address and
// starts a session (users.Login). It returns the session secret for the
// cookie; a person with a second factor gets a *users.CodeNeeded instead,
// that carries the pending session's secret: the code form
// (loginCodeSubmit) makes it whole.
func (s *Server) login(c *echo.Context, name, pw string) (string, error) {
	secret, err := s.accounts.Login(c.Request().Context(), name, pw, c.RealIP(), s.now())
	return secret, limited(c, err)
}

// sessionCookieFor builds the session cookie: HttpOnly, SameSite=Lax, on
// Path=/ without a Domain; with an https base URL also Secure and named
// __Host-handoff_session.
func (s *Server) sessionCookieFor(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: s.cookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: s.https(),
	}
}

// https reports whether the configured base URL is https.
func (s *Server) https() bool { return strings.HasPrefix(s.cfg.BaseURL, "https://") }
