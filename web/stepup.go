package web

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// Step-up (users.StepUp): what cannot be undone asks a session for its
// person's password again, and their second factor's code when they have
// one; it covers such actions for users.StepUpFor.

// The form fields a step-up reads, on the action's own form or on
// /account/confirm.
const (
	stepUpPassword = "current"
	stepUpCode     = "current_code"
)

var errStepUpNeeded = errors.New("this needs your password again (and your authenticator code, if you use one): enter it in the form, or confirm at /account/confirm; it then covers such actions for 5 minutes")

// stepUp runs next only for a session that stepped up within users.StepUpFor,
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
// users.StepUpFor (or the request has no session).
func (s *Server) freshStepUp(c *echo.Context) bool {
	p := who(c)
	return p == nil || p.Session == nil || users.SteppedUp(p.Session, s.now())
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

// confirmStepUp checks pw and code for the request's session
// (users.StepUp) and records the step-up on it.
func (s *Server) confirmStepUp(c *echo.Context, pw, code string) error {
	p := who(c)
	now := s.now()
	err := s.accounts.StepUp(c.Request().Context(), p.Name, p.hash, pw, code, c.RealIP(), now)
	if err != nil {
		return missing(limited(c, err), "your session has ended; log in again")
	}
	p.Session.SteppedUpAt = now.UTC()
	return nil
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
	return render(c, status, views.StepUpPage(l, views.StepUp{Next: next, Code: u.TOTP != nil, Error: msg, Minutes: int(users.StepUpFor / time.Minute)}))
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
