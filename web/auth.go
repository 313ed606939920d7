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
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// Session lifetimes: an idle session ends after sessionIdle, any session
// after sessionMax.
const (
	sessionCookie = "handoff_session"
	hostCookie    = "__Host-" + sessionCookie // its name with an https base_url
	sessionIdle   = store.SessionIdle
	sessionMax    = store.SessionMax
	touchEvery    = time.Minute // LastSeen is written at most this often per session
)

// principal is who a request acts as.
type principal struct {
	Name  string
	Role  store.Role
	Owner string // the routing owner of a person ("mine")
	// Clients limits a person to these clients' channels (clients.go);
	// empty: every client.
	Clients []string
	// Scope is what a token may do; empty for a session, whose role
	// decides (scope).
	Scope   store.Scope
	Session *store.Session
	hash    []byte // the session's key
}

// scope is what p may do: a token's scope, or a person's role as one.
func (p *principal) scope() store.Scope {
	switch {
	case p.Scope != "":
		return p.Scope
	case p.Role == store.RoleAdmin:
		return store.ScopeAdmin
	}
	return store.ScopeApprove
}

// may reports whether p's scope covers need; "" needs only a principal.
func (p *principal) may(need store.Scope) bool {
	switch have := p.scope(); {
	case need == "", have == store.ScopeAdmin, have == need:
		return true
	case have == store.ScopeApprove:
		return need == store.ScopeRead
	}
	return false
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
//
// Every presented token counts against its address before it is looked
// up (a success takes its count back), so past bearerPerAddr refusals in
// bearerWindow an address gets 429 without its tokens being checked; the
// refusals are audited, twice per address per window at most.
func (s *Server) bearer(c *echo.Context) (p *principal, ok bool, err error) {
	h := c.Request().Header.Get("Authorization")
	if h == "" {
		return nil, false, nil
	}
	now, ip := s.now(), c.RealIP()
	key := addrKey(ip)
	n, retry, allowed := s.bearerFails.reserve(key, now)
	if !allowed {
		return nil, true, tooMany(c, retry, "too many refused tokens from this address")
	}
	p, who, err := s.checkBearer(h)
	var refused *apiError
	if err == nil || !errors.As(err, &refused) {
		s.bearerFails.release(key, now) // a success, or the store failing: not a refusal
		return p, true, err
	}
	switch n {
	case 1:
		s.auditBearer(c, now, ip, who, "token refused", fmt.Sprintf("%s; further refusals from this address in the next %s are counted, not each written here", refused.msg, bearerWindow))
	case bearerPerAddr:
		s.auditBearer(c, now, ip, who, "tokens limited", fmt.Sprintf("%d refused tokens from this address within %s: it gets 429 until the oldest is %s old", n, bearerWindow, bearerWindow))
	}
	return nil, true, err
}

// checkBearer looks a bearer header up. who names the caller for the
// audit log when it is refused: the token, or a fingerprint of it.
func (s *Server) checkBearer(h string) (p *principal, who string, err error) {
	const prefix = "Bearer "
	if !strings.HasPrefix(h, prefix) || len(h) == len(prefix) {
		return nil, "malformed Authorization header", errorf(http.StatusUnauthorized, "the Authorization header must be \"Bearer <token>\"")
	}
	hash := hashSecret(h[len(prefix):])
	if s.tokenHash != nil && subtle.ConstantTimeCompare(hash, s.tokenHash) == 1 {
		return &principal{Name: "api-token", Role: store.RoleAdmin, Scope: store.ScopeAdmin}, "", nil
	}
	unknown := fmt.Sprintf("unknown token (sha256 %x…)", hash[:4])
	t, err := s.st.TokenByHash(hash)
	if err != nil {
		return nil, unknown, errorf(http.StatusUnauthorized, "the token is not valid (unknown or revoked)")
	}
	name := "token:" + t.Name + " (" + t.User + ")"
	if t.RevokedAt != nil {
		return nil, name, errorf(http.StatusUnauthorized, "the token is not valid (unknown or revoked)")
	}
	// A token acts for the admin who made it, and only while they are an
	// enabled admin: disabling, demoting or removing them stops it at once.
	u, err := s.st.ActiveUser(t.User)
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrDisabled) {
		return nil, name, err
	}
	// The owner is the person of the ID, not of the name: a person given
	// a removed admin's name gets none of their tokens.
	if err != nil || u.ID == "" || u.ID != t.UserID || u.Role != store.RoleAdmin {
		return nil, name, errorf(http.StatusUnauthorized, "the token's owner %s is no longer an active admin, so it is not valid; an admin can create a new one", t.User)
	}
	role := store.RoleApprover
	if t.Scope == store.ScopeAdmin {
		role = store.RoleAdmin
	}
	return &principal{Name: name, Role: role, Scope: t.Scope, Clients: t.Clients}, "", nil
}

// auditBearer writes one entry about refused tokens, within the budget of
// bearerAudit; the last entry of a window says that the rest are left out.
func (s *Server) auditBearer(c *echo.Context, now time.Time, ip, who, action, detail string) {
	ok, last := s.bearerAudit.take(now)
	if !ok {
		return
	}
	if last {
		detail += fmt.Sprintf("; this is the %dth such entry in %s, so no more are written until it ends", auditPerWindow, bearerWindow)
	}
	_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now.UTC(), Who: who, From: ip, Action: action, Detail: detail})
}

// tooMany is a 429 with Retry-After (whole seconds, rounded up).
func tooMany(c *echo.Context, retry time.Duration, why string) error {
	secs := int((retry + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	c.Response().Header().Set("Retry-After", fmt.Sprint(secs))
	return errorf(http.StatusTooManyRequests, "%s; try again in %s", why, (time.Duration(secs) * time.Second).String())
}

// session authenticates the session cookie; nil when there is none, it
// expired, it still waits for its second factor, or its user was disabled
// or removed (read in the same transaction as the session, so not a
// request after the change gets through).
func (s *Server) session(c *echo.Context) *principal {
	ck, err := c.Cookie(s.cookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	hash := hashSecret(ck.Value)
	sess, u, err := s.st.SessionUser(hash)
	if err != nil || sess.Pending {
		return nil
	}
	now := s.now()
	if sess.Expired(now) {
		_ = s.st.DeleteSession(c.Request().Context(), hash)
		return nil
	}
	if now.Sub(sess.LastSeen) > touchEvery {
		_ = s.st.TouchSession(c.Request().Context(), hash, now)
	}
	return &principal{Name: u.Name, Role: u.Role, Owner: u.Owner, Clients: u.Clients, Session: &sess, hash: hash}
}

// requireAPI admits a bearer token or a session (whose unsafe requests must
// carry the CSRF token) whose scope covers need (see principal.may); ""
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
			if !p.may(need) {
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

// errLoginFailed never says which part was wrong.
var errLoginFailed = errors.New("the name or password is wrong")

// login checks a name and password and starts a session. It returns the
// session secret for the cookie. A person with a second factor gets a
// pending session instead, and a *codeNeeded error that carries its
// secret: the code form (loginCodeSubmit) makes it whole.
func (s *Server) login(c *echo.Context, name, pw string) (string, error) {
	now := s.now()
	ip := c.RealIP()
	// Every attempt is counted before the comparison, so parallel guesses
	// cannot all pass; a success takes its own count back (loginGuard).
	if retry, ok := s.logins.reserve(name, addrKey(ip), now); !ok {
		return "", tooMany(c, retry, "too many failed logins")
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
		s.auditLoginFailed(c, now, name, ip, who)
		return "", &apiError{status: http.StatusUnauthorized, msg: errLoginFailed.Error()}
	}
	s.logins.release(name, addrKey(ip), now)
	if u.Disabled {
		// Said only to someone who knows the password.
		_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now, Who: u.Name, From: ip, Action: "login refused", Detail: "the account is disabled"})
		return "", errorf(http.StatusForbidden, "this account is disabled; ask an admin to enable it")
	}
	return s.startSession(c, u, ip, now, "")
}

// startSession starts a session for u, whose password was just proven
// (login, or the setup link that created u), and audits the login with
// detail. It returns the session secret for the cookie (sessionCookieFor);
// a person with a second factor gets a pending session instead, and a
// *codeNeeded error that carries its secret.
func (s *Server) startSession(c *echo.Context, u store.User, ip string, now time.Time, detail string) (string, error) {
	secret := newSecret()
	sess := store.Session{User: u.Name, Role: u.Role, CSRF: newSecret(), From: ip, CreatedAt: now, LastSeen: now, Pending: u.TOTP != nil}
	if err := s.st.CreateSession(c.Request().Context(), hashSecret(secret), sess); err != nil {
		return "", err
	}
	if sess.Pending {
		return "", &codeNeeded{secret: secret}
	}
	_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now, Who: u.Name, From: ip, Action: "login", Detail: detail})
	return secret, nil
}

// auditLoginFailed writes the audit entry about a failed login, when it
// gets one (loginGuard.auditFailure): one per name and address per
// loginWindow, saying how many failures came since the pair's last entry.
func (s *Server) auditLoginFailed(c *echo.Context, now time.Time, name, ip, who string) {
	write, more, last := s.logins.auditFailure(name, addrKey(ip), now)
	if !write {
		return
	}
	detail := fmt.Sprintf("further failures of this name from this address in the next %s are counted in its next entry, not each written", loginWindow)
	if more > 0 {
		detail = fmt.Sprintf("%d more failed since the last entry about this name and address; ", more) + detail
	}
	if last {
		detail += fmt.Sprintf("; this is the %dth entry about failed logins in %s, so no more are written until it ends", auditPerWindow, loginWindow)
	}
	_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now, Who: who, From: ip, Action: "login failed", Detail: detail})
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
