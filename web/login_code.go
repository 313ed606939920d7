package web

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// startCode answers the login form for a right password with a second
// factor: the pending session's cookie, and the code form.
func (s *Server) startCode(c *echo.Context, code *users.CodeNeeded, next string) error {
	c.SetCookie(s.sessionCookieFor(code.Secret, int(store.SessionPending.Seconds())))
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

// pendingSession is the key of the request's pending session, if it has
// one (users.PendingSession).
func (s *Server) pendingSession(c *echo.Context) ([]byte, bool) {
	ck, err := c.Cookie(s.cookie)
	if err != nil {
		return nil, false
	}
	return s.accounts.PendingSession(ck.Value, s.now())
}

// loginCodeSubmit answers POST /login/code (form: code, next): the code
// of the second factor makes the pending session a whole one
// (users.LoginCode). A wrong code shows the code form again; too many, a
// locked account or a pending session gone end the cookie and show the
// login form.
func (s *Server) loginCodeSubmit(c *echo.Context) error {
	next := safeNext(c.FormValue("next"))
	hash, ok := s.pendingSession(c)
	if !ok {
		return render(c, http.StatusUnauthorized, views.Login(views.LoginPage{Next: next, Error: users.ErrCodeExpired.Error()}))
	}
	err := s.accounts.LoginCode(c.Request().Context(), hash, c.FormValue("code"), c.RealIP(), s.now().UTC())
	switch {
	case errors.Is(err, users.ErrCodeTries), errors.Is(err, users.ErrCodeLocked), errors.Is(err, users.ErrCodeExpired):
		c.SetCookie(s.sessionCookieFor("", -1))
		status, msg := answerFor(err)
		return render(c, status, views.Login(views.LoginPage{Next: next, Error: msg}))
	case err != nil:
		if status, msg := answerFor(err); status < http.StatusInternalServerError {
			return render(c, status, views.LoginCode(views.LoginCodePage{Next: next, Error: msg}))
		}
		return err
	}
	// The cookie had the pending session's short life; it now gets a whole one.
	ck, _ := c.Cookie(s.cookie)
	c.SetCookie(s.sessionCookieFor(ck.Value, int(users.SessionMax.Seconds())))
	return c.Redirect(http.StatusSeeOther, next)
}
