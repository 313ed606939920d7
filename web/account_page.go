package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// accountPage answers GET /account.
func (s *Server) accountPage(c *echo.Context) error {
	return s.renderAccount(c, http.StatusOK, views.AccountPage{})
}

// renderAccount shows the account page with what a is given (a notice, a
// secret or codes shown once) and the rest read now.
func (s *Server) renderAccount(c *echo.Context, status int, a views.AccountPage) error {
	p := who(c)
	u, err := s.st.User(p.Name)
	if err != nil {
		return err
	}
	if a.OtherSessions, err = s.st.SessionCount(p.Name, p.hash); err != nil {
		return err
	}
	a.Enrolled = u.TOTP != nil
	if u.TOTP != nil {
		a.Recovery = len(u.TOTP.Recovery)
	}
	a.MustEnrol = s.accounts.MustEnrol(u)
	a.Sealed = s.sealer != nil
	l, err := s.layout(c, "Your account", "account")
	if err != nil {
		return err
	}
	return render(c, status, views.AccountPageView(l, a))
}

// refuseAccount shows the account page again with a form's refusal; an
// error that is not the form's fault is the error page.
func (s *Server) refuseAccount(c *echo.Context, err error) error {
	status, msg := answerFor(err)
	if status >= http.StatusInternalServerError {
		return err
	}
	return s.renderAccount(c, status, views.AccountPage{Notice: &views.Notice{Tone: "error", Text: msg}})
}

// changeOwnPassword answers POST /account/password (form: current,
// password): the new password replaces the old, and every other session
// of the person ends, in one transaction.
func (s *Server) changeOwnPassword(c *echo.Context) error {
	p := who(c)
	err := s.accounts.ChangeOwnPassword(c.Request().Context(), p.Name, p.hash, c.FormValue("current"), c.FormValue("password"),
		s.auditEntry(c, "change password", p.Name, "own password; other sessions ended"))
	if err != nil {
		return s.refuseAccount(c, err)
	}
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Notice: &views.Notice{Tone: "ok", Text: "Your password is changed, and your other sessions are logged out."}})
}

// endOtherSessions answers POST /account/sessions/end: every session of
// the person but this one ends.
func (s *Server) endOtherSessions(c *echo.Context) error {
	p := who(c)
	n, err := s.accounts.EndOtherSessions(c.Request().Context(), p.Name, p.hash, s.auditEntry(c, "log out other sessions", p.Name, ""))
	if err != nil {
		return err
	}
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Notice: &views.Notice{Tone: "ok", Text: "Logged out " + strconv.Itoa(n) + " other sessions."}})
}

// startTOTP answers POST /account/totp/start: a new secret is kept as the
// person's pending one and shown, with its otpauth URI, this once.
func (s *Server) startTOTP(c *echo.Context) error {
	p := who(c)
	secret, uri, err := s.accounts.StartTOTP(c.Request().Context(), p.Name, s.auditEntry(c, "start second factor enrolment", p.Name, ""))
	if err != nil {
		return s.refuseAccount(c, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	q, err := views.NewQR(uri)
	if err != nil {
		return err
	}
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Enrol: &views.Enrolment{Secret: secret, URI: uri, QR: q}})
}

// confirmTOTP answers POST /account/totp/confirm (form: code): a right code
// for the pending secret turns the second factor on, and the recovery
// codes are shown once.
func (s *Server) confirmTOTP(c *echo.Context) error {
	p := who(c)
	codes, err := s.accounts.ConfirmTOTP(c.Request().Context(), p.Name, c.FormValue("code"), s.now().UTC(), s.auditEntry(c, "enrol second factor", p.Name, strconv.Itoa(password.RecoveryCount)+" recovery codes"))
	if err != nil {
		return s.refuseAccount(c, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Codes: codes, Notice: &views.Notice{Tone: "ok", Text: "The second factor is on: the next login asks for a code."}})
}

// removeOwnTOTP answers POST /account/totp/remove (form: current): the
// password turns the person's second factor off.
func (s *Server) removeOwnTOTP(c *echo.Context) error {
	p := who(c)
	err := s.accounts.RemoveOwnTOTP(c.Request().Context(), p.Name, c.FormValue("current"), s.auditEntry(c, "remove second factor", p.Name, "own"))
	if err != nil {
		return s.refuseAccount(c, err)
	}
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Notice: &views.Notice{Tone: "ok", Text: "The second factor is off."}})
}

// enrolled sends an admin without a second factor to /account when the
// configuration requires one (auth.require_totp_for_admins): pages go
// there, anything else (a form, the API with the session) is refused. Bearer tokens are not sessions and
// pass.
func (s *Server) enrolled(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		p := who(c)
		if !s.cfg.Auth.RequireTOTPForAdmins || p == nil || p.Session == nil || p.Role != store.RoleAdmin {
			return next(c)
		}
		u, err := s.st.User(p.Name)
		if err != nil {
			return err
		}
		if !s.accounts.MustEnrol(u) {
			return next(c)
		}
		if c.Request().Method == http.MethodGet && !strings.HasPrefix(c.Request().URL.Path, "/api/") {
			return c.Redirect(http.StatusSeeOther, "/account#totp")
		}
		return errorf(http.StatusForbidden, "admins must enrol a second factor first: open /account")
	}
}
