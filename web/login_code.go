package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// codeNeeded is a right password of a person with a second factor: the
// session it started is pending until the code form makes it whole.
type codeNeeded struct{ secret string }

func (e *codeNeeded) Error() string { return "the second factor is needed" }

// Wrong codes: a pending session takes maxCodeTries, and a person's
// codes stop being taken for codeLockout after maxCodeFailures wrong ones
// in a row, over any number of logins, so knowing the password does not
// buy unlimited guesses at six digits.
const (
	maxCodeTries    = 5
	maxCodeFailures = 10
	codeLockout     = 15 * time.Minute
)

var (
	errCodeWrong   = errors.New("that code is wrong; enter the current code from your authenticator, or a recovery code")
	errCodeTries   = errors.New("too many wrong codes; log in again")
	errCodeLocked  = errors.New("too many wrong codes for this account; wait 15 minutes and try again")
	errCodeExpired = errors.New("the login took too long or was already used; log in again")
)

// startCode answers the login form for a right password with a second
// factor: the pending session's cookie, and the code form.
func (s *Server) startCode(c *echo.Context, code *codeNeeded, next string) error {
	c.SetCookie(s.sessionCookieFor(code.secret, int(store.SessionPending.Seconds())))
	return c.Redirect(http.StatusSeeOther, "/login/code?next="+url.QueryEscape(next))
}

// loginCodeForm answers GET /login/code.
func (s *Server) loginCodeForm(c *echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if _, ok := s.pendingSession(c); !ok {
		return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(next))
	}
	return render(c, http.StatusOK, views.LoginCode(views.LoginCodePage{Next: next}))
}

// pendingSession is the hash of the request's pending session, if it has one.
func (s *Server) pendingSession(c *echo.Context) ([]byte, bool) {
	ck, err := c.Cookie(s.cookie)
	if err != nil || ck.Value == "" {
		return nil, false
	}
	hash := hashSecret(ck.Value)
	sess, _, err := s.st.SessionUser(hash)
	if err != nil || !sess.Pending || sess.Expired(s.now()) {
		return nil, false
	}
	return hash, true
}

// loginCodeSubmit answers POST /login/code (form: code, next): the current
// TOTP code, not used before, or an unused recovery code, makes the
// pending session a whole one, and the code is spent in the same
// transaction. Wrong codes are counted there too.
func (s *Server) loginCodeSubmit(c *echo.Context) error {
	next := safeNext(c.FormValue("next"))
	code := strings.TrimSpace(c.FormValue("code"))
	hash, ok := s.pendingSession(c)
	if !ok {
		return render(c, http.StatusUnauthorized, views.Login(views.LoginPage{Next: next, Error: errCodeExpired.Error()}))
	}
	now := s.now().UTC()
	ip := c.RealIP()
	var (
		failure error
		user    string
		how     string
	)
	err := s.st.UpdateSession(c.Request().Context(), hash, func(sess *store.Session, u *store.User) (bool, error) {
		failure, user, how = nil, u.Name, ""
		if !sess.Pending || sess.Expired(now) || u.TOTP == nil {
			failure = errCodeExpired
			return false, nil
		}
		ok, what, err := s.spendCode(u, code, now)
		switch {
		case errors.Is(err, errCodeLocked):
			failure = errCodeLocked
			return false, nil
		case !ok:
			sess.Attempts++
			failure = errCodeWrong
			if err != nil {
				// The secret cannot be read here: say so, and that a
				// recovery code still works.
				failure = errors.New(err.Error() + "; a recovery code still logs you in")
			}
			if sess.Attempts >= maxCodeTries {
				failure = errCodeTries
				return false, nil
			}
			return true, nil
		}
		how = what
		sess.Pending, sess.CreatedAt, sess.LastSeen, sess.Attempts = false, now, now, 0
		return true, nil
	})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrDisabled) {
		failure, err = errCodeExpired, nil
	}
	if err != nil {
		return err
	}
	if failure != nil {
		_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now, Who: user, From: ip, Action: "login failed", Detail: "second factor: " + failure.Error()})
		if failure != errCodeTries && failure != errCodeLocked && failure != errCodeExpired {
			return render(c, http.StatusUnauthorized, views.LoginCode(views.LoginCodePage{Next: next, Error: failure.Error()}))
		}
		c.SetCookie(s.sessionCookieFor("", -1))
		status := http.StatusUnauthorized
		if failure == errCodeLocked {
			status = http.StatusTooManyRequests
		}
		return render(c, status, views.Login(views.LoginPage{Next: next, Error: failure.Error()}))
	}
	_ = s.st.Audit(c.Request().Context(), store.AuditEntry{At: now, Who: user, From: ip, Action: "login", Detail: "with " + how})
	// The cookie had the pending session's short life; it now gets a whole one.
	ck, _ := c.Cookie(s.cookie)
	c.SetCookie(s.sessionCookieFor(ck.Value, int(sessionMax.Seconds())))
	return c.Redirect(http.StatusSeeOther, next)
}
