package web

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// Step-up: what cannot be undone (a restore, an erase, an export handed
// out, a token made, a second factor enrolled or removed, a password
// changed) asks a session for its person's password again, and their
// second factor's code when they have one, so a stolen session cookie is
// not enough for it. A step-up is kept on the server-side session
// (store.Session.SteppedUpAt) and covers such actions for stepUpFor.
// A login is not one: the cookie of a session just started could be the
// stolen one as well.
const stepUpFor = 5 * time.Minute

// The form fields a step-up reads, on the action's own form or on
// /account/confirm.
const (
	stepUpPassword = "current"
	stepUpCode     = "current_code"
)

var (
	errStepUpNeeded = errors.New("this needs your password again (and your authenticator code, if you use one): enter it in the form, or confirm at /account/confirm; it then covers such actions for 5 minutes")
	errStepUpCode   = errors.New("this account has a second factor: enter the current code from your authenticator (or a recovery code) with the password")
)

// stepUp runs next only for a session that stepped up within stepUpFor,
// or whose request carries the password (and code) and they are right: a
// GET without one goes to /account/confirm and comes back; anything else
// is refused with errStepUpNeeded. Bearer tokens pass: they are not on
// these routes, and a token is itself a secret made for its use.
func (s *Server) stepUp(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if c.Request().Method == http.MethodGet && !s.freshStepUp(c) {
			return c.Redirect(http.StatusSeeOther, "/account/confirm?next="+url.QueryEscape(c.Request().URL.RequestURI()))
		}
		if err := s.requireStepUp(c); err != nil {
			return err
		}
		return next(c)
	}
}

// freshStepUp reports whether the request's session stepped up within
// stepUpFor (or the request has no session).
func (s *Server) freshStepUp(c *echo.Context) bool {
	p := who(c)
	if p == nil || p.Session == nil {
		return true
	}
	at := p.Session.SteppedUpAt
	return !at.IsZero() && s.now().Sub(at) < stepUpFor
}

// requireStepUp is nil for a fresh step-up, else checks the password and
// code the request's form carries (stepUpPassword, stepUpCode) and records
// the step-up on the session.
func (s *Server) requireStepUp(c *echo.Context) error {
	if s.freshStepUp(c) {
		return nil
	}
	pw := c.FormValue(stepUpPassword)
	if pw == "" {
		return refused(errStepUpNeeded, http.StatusForbidden)
	}
	return s.confirmStepUp(c, pw, c.FormValue(stepUpCode))
}

// confirmStepUp checks pw and, for a person with a second factor, code
// (an authenticator code newer than the last one taken, or an unused
// recovery code), and records the step-up on the session. Guesses count
// against the login's limits (the same name and address), so a stolen
// session cannot try passwords here any faster than at /login, and wrong
// codes count towards the account's code lockout.
func (s *Server) confirmStepUp(c *echo.Context, pw, code string) error {
	p := who(c)
	now, ip := s.now(), c.RealIP()
	ctx := c.Request().Context()
	if retry, ok := s.logins.reserve(p.Name, addrKey(ip), now); !ok {
		return tooMany(c, retry, "too many wrong passwords")
	}
	u, err := s.st.User(p.Name)
	if err != nil {
		return err
	}
	if !password.Check(u.PasswordHash, pw) {
		_ = s.st.Audit(ctx, store.AuditEntry{At: now.UTC(), Who: p.Name, From: ip, Action: "step-up failed", Detail: "wrong password"})
		return users.ErrWrongPassword
	}
	s.logins.release(p.Name, addrKey(ip), now)
	checked := u.PasswordHash
	var failure error
	how := "password"
	err = s.st.UpdateSession(ctx, p.hash, func(sess *store.Session, u *store.User) (bool, error) {
		failure, how = nil, "password"
		if !bytes.Equal(u.PasswordHash, checked) {
			return true, refused(errors.New("the password changed meanwhile; reload the page and try again"), http.StatusConflict)
		}
		if t := u.TOTP; t != nil {
			switch ok, what, err := s.spendCode(u, strings.TrimSpace(code), now.UTC()); {
			case err != nil:
				failure = err
				return true, nil
			case !ok:
				failure = errStepUpCode
				return true, nil
			default:
				how += " and " + what
			}
		}
		sess.SteppedUpAt = now.UTC()
		return true, nil
	})
	if err != nil {
		return missing(err, "your session has ended; log in again")
	}
	if failure != nil {
		_ = s.st.Audit(ctx, store.AuditEntry{At: now.UTC(), Who: p.Name, From: ip, Action: "step-up failed", Detail: failure.Error()})
		status := http.StatusForbidden
		if failure == errCodeLocked {
			status = http.StatusTooManyRequests
		}
		return refused(failure, status)
	}
	_ = s.st.Audit(ctx, store.AuditEntry{At: now.UTC(), Who: p.Name, From: ip, Action: "step-up", Detail: "with " + how})
	p.Session.SteppedUpAt = now.UTC()
	return nil
}

// spendCode checks code against u's second factor inside the caller's
// write: an authenticator code newer than the last one taken, or an unused
// recovery code, which it spends; a wrong one counts towards the lockout.
// what names the kind of code taken. It also seals a secret stored plain,
// when the server has a key (the "next write" of sealing). A secret this
// server cannot open (sealed, and no key or another key) leaves the
// recovery codes working, and err says why the code was not checked.
func (s *Server) spendCode(u *store.User, code string, now time.Time) (ok bool, what string, err error) {
	t := u.TOTP
	if t.Failures >= maxCodeFailures && now.Sub(t.FailedAt) < codeLockout {
		return false, "", errCodeLocked
	}
	secret, openErr := s.sealer.Open(t.Secret, u.Name)
	if openErr == nil {
		t.Secret = s.sealer.Seal(secret, u.Name)
		if step, ok := password.CheckTOTP(secret, code, now, t.LastStep); ok {
			t.LastStep, t.Failures = step, 0
			return true, "authenticator code", nil
		}
	}
	if rest, ok := password.UseRecovery(t.Recovery, code); ok {
		t.Recovery, t.Failures = rest, 0
		return true, "recovery code (" + strconv.Itoa(len(rest)) + " left)", nil
	}
	t.Failures, t.FailedAt = t.Failures+1, now
	return false, "", openErr
}

// stepUpForm answers GET /account/confirm?next=: the password (and code)
// form of a step-up, for an action reached by a link (an export).
func (s *Server) stepUpForm(c *echo.Context) error {
	return s.renderStepUp(c, http.StatusOK, safeNext(c.QueryParam("next")), "")
}

func (s *Server) renderStepUp(c *echo.Context, status int, next, msg string) error {
	u, err := s.st.User(who(c).Name)
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Confirm it is you", "account")
	if err != nil {
		return err
	}
	return render(c, status, views.StepUpPage(l, views.StepUp{Next: next, Code: u.TOTP != nil, Error: msg, Minutes: int(stepUpFor / time.Minute)}))
}

// stepUpSubmit answers POST /account/confirm (form: current, current_code,
// next): a right password (and code) steps the session up, and the
// browser goes on to next.
func (s *Server) stepUpSubmit(c *echo.Context) error {
	next := safeNext(c.FormValue("next"))
	if err := s.confirmStepUp(c, c.FormValue(stepUpPassword), c.FormValue(stepUpCode)); err != nil {
		status, msg := answerFor(err)
		if status >= http.StatusInternalServerError {
			return err
		}
		return s.renderStepUp(c, status, next, msg)
	}
	return c.Redirect(http.StatusSeeOther, next)
}
