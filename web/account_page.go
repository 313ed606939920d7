package web

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// totpIssuer names handoff in authenticator apps.
const totpIssuer = "handoff"

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
	a.MustEnrol = s.mustEnrol(u)
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

// errWrongPassword refuses an account change whose current password is wrong.
var errWrongPassword = errors.New("the current password is wrong")

// checkOwnPassword compares the current password a form gives; it
// returns the hash it matched, for the write to check it is still the one.
func (s *Server) checkOwnPassword(c *echo.Context) ([]byte, error) {
	u, err := s.st.User(who(c).Name)
	if err != nil {
		return nil, err
	}
	if !password.Check(u.PasswordHash, c.FormValue("current")) {
		return nil, refused(errWrongPassword, http.StatusForbidden)
	}
	return u.PasswordHash, nil
}

// samePassword refuses a write when the password changed since it was checked.
func samePassword(u *store.User, checked []byte) error {
	if !bytes.Equal(u.PasswordHash, checked) {
		return refused(errors.New("the password changed meanwhile; reload the page and try again"), http.StatusConflict)
	}
	return nil
}

// changeOwnPassword answers POST /account/password (form: current,
// password): the new password replaces the old, and every other session
// of the person ends, in one transaction.
func (s *Server) changeOwnPassword(c *echo.Context) error {
	p := who(c)
	checked, err := s.checkOwnPassword(c)
	if err != nil {
		return s.refuseAccount(c, err)
	}
	hash, err := s.passwordRule(p.Role == store.RoleAdmin, p.Name, p.Owner).Hash(c.FormValue("password"))
	if err != nil {
		return s.refuseAccount(c, refused(err, http.StatusBadRequest))
	}
	_, err = s.st.UpdateUser(c.Request().Context(), p.Name, func(tx *store.Tx, u *store.User) error {
		if err := samePassword(u, checked); err != nil {
			return err
		}
		u.PasswordHash = hash
		_, err := tx.EndSessions(p.Name, p.hash)
		return err
	}, s.auditEntry(c, "change password", p.Name, "own password; other sessions ended"))
	if err != nil {
		return s.refuseAccount(c, err)
	}
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Notice: &views.Notice{Tone: "ok", Text: "Your password is changed, and your other sessions are logged out."}})
}

// endOtherSessions answers POST /account/sessions/end: every session of
// the person but this one ends.
func (s *Server) endOtherSessions(c *echo.Context) error {
	p := who(c)
	n, err := s.st.EndSessions(c.Request().Context(), p.Name, p.hash, s.auditEntry(c, "log out other sessions", p.Name, ""))
	if err != nil {
		return err
	}
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Notice: &views.Notice{Tone: "ok", Text: "Logged out " + strconv.Itoa(n) + " other sessions."}})
}

// startTOTP answers POST /account/totp/start: a new secret is kept as the
// person's pending one and shown, with its otpauth URI, this once.
func (s *Server) startTOTP(c *echo.Context) error {
	p := who(c)
	secret, uri, err := password.NewTOTP(totpIssuer, p.Name)
	if err != nil {
		return err
	}
	_, err = s.st.UpdateUser(c.Request().Context(), p.Name, func(_ *store.Tx, u *store.User) error {
		if u.TOTP != nil {
			return refused(errors.New("a second factor is already on; turn it off first to enrol another"), http.StatusConflict)
		}
		u.PendingTOTP = s.sealer.Seal(secret, u.Name)
		return nil
	}, s.auditEntry(c, "start second factor enrolment", p.Name, ""))
	if err != nil {
		return s.refuseAccount(c, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Enrol: &views.Enrolment{Secret: secret, URI: uri}})
}

// confirmTOTP answers POST /account/totp/confirm (form: code): a right code
// for the pending secret turns the second factor on, and the recovery
// codes are shown once.
func (s *Server) confirmTOTP(c *echo.Context) error {
	p := who(c)
	code := c.FormValue("code")
	codes, hashes := password.RecoveryCodes()
	now := s.now().UTC()
	_, err := s.st.UpdateUser(c.Request().Context(), p.Name, func(_ *store.Tx, u *store.User) error {
		if u.PendingTOTP == "" {
			return refused(errors.New("no enrolment is under way; start it again"), http.StatusConflict)
		}
		secret, err := s.sealer.Open(u.PendingTOTP, u.Name)
		if err != nil {
			return refused(errors.New(err.Error()+"; start the enrolment again"), http.StatusConflict)
		}
		step, ok := password.CheckTOTP(secret, code, now, 0)
		if !ok {
			return refused(errors.New("that code is not the one the authenticator shows now; start the enrolment again if the secret was not added"), http.StatusBadRequest)
		}
		u.TOTP = &store.TOTP{Secret: s.sealer.Seal(secret, u.Name), LastStep: step, Recovery: hashes, EnrolledAt: now}
		u.PendingTOTP = ""
		return nil
	}, s.auditEntry(c, "enrol second factor", p.Name, strconv.Itoa(len(codes))+" recovery codes"))
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
	checked, err := s.checkOwnPassword(c)
	if err != nil {
		return s.refuseAccount(c, err)
	}
	_, err = s.st.UpdateUser(c.Request().Context(), p.Name, func(_ *store.Tx, u *store.User) error {
		if err := samePassword(u, checked); err != nil {
			return err
		}
		if s.cfg.Auth.RequireTOTPForAdmins && u.Role == store.RoleAdmin {
			return refused(errors.New("admins must keep a second factor here (auth.require_totp_for_admins); if it is lost, another admin can reset it"), http.StatusConflict)
		}
		u.TOTP, u.PendingTOTP = nil, ""
		return nil
	}, s.auditEntry(c, "remove second factor", p.Name, "own"))
	if err != nil {
		return s.refuseAccount(c, err)
	}
	return s.renderAccount(c, http.StatusOK, views.AccountPage{Notice: &views.Notice{Tone: "ok", Text: "The second factor is off."}})
}

// mustEnrol reports whether the configuration requires u to enrol a second
// factor before using the dashboard.
func (s *Server) mustEnrol(u store.User) bool {
	return s.cfg.Auth.RequireTOTPForAdmins && u.Role == store.RoleAdmin && u.TOTP == nil
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
		if !s.mustEnrol(u) {
			return next(c)
		}
		if c.Request().Method == http.MethodGet && !strings.HasPrefix(c.Request().URL.Path, "/api/") {
			return c.Redirect(http.StatusSeeOther, "/account#totp")
		}
		return errorf(http.StatusForbidden, "admins must enrol a second factor first: open /account")
	}
}
