package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// usersPage answers GET /users.
func (s *Server) usersPage(c *echo.Context) error {
	var n *views.Notice
	if id := c.QueryParam("revoked"); id != "" {
		tokens, err := s.st.Tokens()
		if err != nil {
			return err
		}
		// Only a token that is revoked is named: the link cannot be made to say anything else.
		if i := slices.IndexFunc(tokens, func(t store.Token) bool { return t.ID == id && t.RevokedAt != nil }); i >= 0 {
			n = &views.Notice{Tone: "ok", Text: "Token " + tokens[i].Name + " is revoked: it no longer opens the API."}
		}
	}
	return s.renderUsers(c, http.StatusOK, nil, n)
}

// renderUsers shows the users page, with a secret shown once or a notice.
func (s *Server) renderUsers(c *echo.Context, status int, secret *views.Secret, n *views.Notice) error {
	users, err := s.st.Users()
	if err != nil {
		return err
	}
	tokens, err := s.st.Tokens()
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Users", "users")
	if err != nil {
		return err
	}
	live := map[string]int{}
	for _, t := range tokens {
		if t.RevokedAt == nil && t.UserID != "" {
			live[t.UserID]++
		}
	}
	return render(c, status, views.UsersPageView(l, views.UsersPage{Users: users, Tokens: tokens, LiveTokens: live, Secret: secret, Notice: n, Owners: s.owners(), Lockouts: s.lockoutViews()}))
}

// refuseUsers shows the users page again with a form's refusal (a name in
// use, a password too short), worded by answerFor and put into format; an
// error that is not the form's fault is the error page.
func (s *Server) refuseUsers(c *echo.Context, err error, format string) error {
	status, msg := answerFor(err)
	if status >= http.StatusInternalServerError {
		return err
	}
	return s.renderUsers(c, status, nil, &views.Notice{Tone: "error", Text: fmt.Sprintf(format, msg)})
}

// createUser answers POST /users (form: name, role, owner, clients,
// password). An empty password is generated and shown once.
func (s *Server) createUser(c *echo.Context) error {
	name, owner := strings.TrimSpace(c.FormValue("name")), strings.TrimSpace(c.FormValue("owner"))
	role := store.Role(c.FormValue("role"))
	clients := users.ParseClients(c.FormValue("clients"))
	pw, err := s.accounts.Add(c.Request().Context(), users.Person{Name: name, Role: role, Owner: owner, Clients: clients, Password: c.FormValue("password")}, s.now().UTC(),
		s.auditEntry(c, "create user", name, "role "+string(role)+", owner "+owner+", clients "+clientsText(clients)))
	if err != nil {
		return s.refuseUsers(c, taken(err, "There is already a person named %s.", name), "Not added: %s.")
	}
	var secret *views.Secret
	if pw != "" {
		secret = &views.Secret{What: "Password of " + name, Value: pw}
	}
	return s.renderUsers(c, http.StatusOK, secret, &views.Notice{Tone: "ok", Text: "Added " + name + " as " + string(role) + "."})
}

// auditEntry describes a dashboard action, for the transaction that does it.
func (s *Server) auditEntry(c *echo.Context, action, target, detail string) store.AuditEntry {
	return store.AuditEntry{At: s.now().UTC(), Who: who(c).Name, From: c.RealIP(), Action: action, Target: target, Detail: detail}
}

// userTarget is the person a /users/:name form acts on, and the sentence
// for a name that is not (or no longer) a person.
func userTarget(c *echo.Context) string { return c.Param("name") }

// changed shows the users page after an admin's change, or its refusal.
func (s *Server) changed(c *echo.Context, err error, name, done string) error {
	if err != nil {
		return s.refuseUsers(c, missing(err, "there is no person named %s", name), "Not changed: %s.")
	}
	return s.renderUsers(c, http.StatusOK, nil, &views.Notice{Tone: "ok", Text: done})
}

// resetPassword answers POST /users/:name/password (form: password; empty
// generates one, shown once): every session of the person ends with it.
func (s *Server) resetPassword(c *echo.Context) error {
	name := userTarget(c)
	pw, err := s.accounts.ResetPassword(c.Request().Context(), name, c.FormValue("password"), false, s.auditEntry(c, "reset password", name, "every session ended"))
	if err != nil {
		return s.changed(c, err, name, "")
	}
	var secret *views.Secret
	if pw != "" {
		secret = &views.Secret{What: "New password of " + name, Value: pw}
	}
	return s.renderUsers(c, http.StatusOK, secret, &views.Notice{Tone: "ok", Text: "The password of " + name + " is reset, and their sessions are logged out."})
}

// disableUser answers POST /users/:name/disable: the person cannot log in,
// and their sessions and tokens stop working, at once.
func (s *Server) disableUser(c *echo.Context) error {
	name := userTarget(c)
	err := s.accounts.SetDisabled(c.Request().Context(), name, true, s.auditEntry(c, "disable user", name, "sessions ended, tokens refused"))
	return s.changed(c, err, name, name+" is disabled: their sessions and tokens no longer work.")
}

// enableUser answers POST /users/:name/enable.
func (s *Server) enableUser(c *echo.Context) error {
	name := userTarget(c)
	err := s.accounts.SetDisabled(c.Request().Context(), name, false, s.auditEntry(c, "enable user", name, ""))
	return s.changed(c, err, name, name+" is enabled.")
}

// changeUser answers POST /users/:name/role (form: role, owner, clients).
func (s *Server) changeUser(c *echo.Context) error {
	name, owner := userTarget(c), strings.TrimSpace(c.FormValue("owner"))
	role := store.Role(c.FormValue("role"))
	clients := users.ParseClients(c.FormValue("clients"))
	revoked, err := s.accounts.Change(c.Request().Context(), name, role, owner, clients, s.now().UTC(),
		s.auditEntry(c, "change user", name, "role "+string(role)+", owner "+orNone(owner)+", clients "+clientsText(clients)))
	return s.changed(c, err, name, name+" is now "+string(role)+" with owner "+orNone(owner)+"."+revokedText(revoked))
}

// revokedText says which tokens a change revoked, for the notice.
func revokedText(revoked []store.Token) string {
	if len(revoked) == 0 {
		return ""
	}
	if len(revoked) == 1 {
		return fmt.Sprintf(" Their API token is revoked (%s).", users.TokenNames(revoked))
	}
	return fmt.Sprintf(" Their %d API tokens are revoked (%s).", len(revoked), users.TokenNames(revoked))
}

// removeUser answers POST /users/:name/remove: the person and their
// sessions are deleted and their tokens revoked, in one transaction; the
// audit trail stays.
func (s *Server) removeUser(c *echo.Context) error {
	name := userTarget(c)
	revoked, err := s.accounts.Remove(c.Request().Context(), name, s.now().UTC(), s.auditEntry(c, "remove user", name, "sessions ended, tokens revoked"))
	return s.changed(c, err, name, name+" is removed; the audit log keeps what they did."+revokedText(revoked))
}

// resetTOTP answers POST /users/:name/totp/reset: a lost second factor is
// turned off, so the person can log in with the password and enrol again.
func (s *Server) resetTOTP(c *echo.Context) error {
	name := userTarget(c)
	err := s.accounts.ResetTOTP(c.Request().Context(), name, s.auditEntry(c, "reset second factor", name, "every session ended"))
	return s.changed(c, err, name, "The second factor of "+name+" is off; they can enrol again on their account page.")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
