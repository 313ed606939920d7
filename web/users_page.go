package web

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
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

// ValidName reports whether s may name a person or an API token: 1 to 64
// letters, digits, '.', '_', '-' or '@' (the dashboard and "user add" alike).
func ValidName(s string) bool {
	return len(s) >= 1 && len(s) <= 64 && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r))
	})
}

func formRole(c *echo.Context) (store.Role, bool) {
	r := store.Role(c.FormValue("role"))
	return r, r == store.RoleAdmin || r == store.RoleApprover
}

// createUser answers POST /users (form: name, role, owner, password). An
// empty password is generated and shown once.
func (s *Server) createUser(c *echo.Context) error {
	name, owner, pw := strings.TrimSpace(c.FormValue("name")), strings.TrimSpace(c.FormValue("owner")), c.FormValue("password")
	role, ok := formRole(c)
	switch {
	case !ValidName(name):
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "A name is 1 to 64 letters, digits, dots, dashes, underscores or @."})
	case !ok:
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "The role must be admin or approver."})
	case len(owner) > 64:
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "The owner is at most 64 characters."})
	}
	clients, err := s.formClients(c)
	if err != nil {
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "Not added: " + err.Error() + "."})
	}
	generated := pw == ""
	if generated {
		pw = password.Generate()
	}
	hash, err := s.passwordRule(role == store.RoleAdmin, name, owner).Hash(pw)
	if err != nil {
		return s.refuseUsers(c, refused(err, http.StatusBadRequest), "Not added: %s.")
	}
	now := s.now().UTC()
	err = s.st.CreateUser(c.Request().Context(), store.User{Name: name, Role: role, Owner: owner, Clients: clients, PasswordHash: hash, CreatedAt: now},
		s.auditEntry(c, "create user", name, "role "+string(role)+", owner "+owner+", clients "+clientsText(clients)))
	if err != nil {
		return s.refuseUsers(c, taken(err, "There is already a person named %s.", name), "%s")
	}
	var secret *views.Secret
	if generated {
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
		return s.refuseUsers(c, refuseLastAdmin(missing(err, "there is no person named %s", name)), "Not changed: %s.")
	}
	return s.renderUsers(c, http.StatusOK, nil, &views.Notice{Tone: "ok", Text: done})
}

// refuseLastAdmin answers the last-admin rule as a 409 with its sentence.
func refuseLastAdmin(err error) error {
	if errors.Is(err, store.ErrLastAdmin) {
		return refused(store.ErrLastAdmin, http.StatusConflict)
	}
	return err
}

// resetPassword answers POST /users/:name/password (form: password; empty
// generates one, shown once): every session of the person ends with it.
func (s *Server) resetPassword(c *echo.Context) error {
	name, pw := userTarget(c), c.FormValue("password")
	generated := pw == ""
	if generated {
		pw = password.Generate()
	}
	target, err := s.st.User(name)
	if err != nil {
		return s.changed(c, err, name, "")
	}
	hash, err := s.passwordRule(target.Role == store.RoleAdmin, name, target.Owner).Hash(pw)
	if err != nil {
		return s.refuseUsers(c, refused(err, http.StatusBadRequest), "Not changed: %s.")
	}
	_, err = s.st.UpdateUser(c.Request().Context(), name, func(tx *store.Tx, u *store.User) error {
		if u.Role != target.Role {
			return refused(errors.New("their role changed meanwhile; reload the page and try again"), http.StatusConflict)
		}
		u.PasswordHash = hash
		_, err := tx.EndSessions(u.Name, nil)
		return err
	}, s.auditEntry(c, "reset password", name, "every session ended"))
	if err != nil {
		return s.changed(c, err, name, "")
	}
	var secret *views.Secret
	if generated {
		secret = &views.Secret{What: "New password of " + name, Value: pw}
	}
	return s.renderUsers(c, http.StatusOK, secret, &views.Notice{Tone: "ok", Text: "The password of " + name + " is reset, and their sessions are logged out."})
}

// disableUser answers POST /users/:name/disable: the person cannot log in,
// and their sessions and tokens stop working, at once.
func (s *Server) disableUser(c *echo.Context) error {
	name := userTarget(c)
	_, err := s.st.UpdateUser(c.Request().Context(), name, func(_ *store.Tx, u *store.User) error {
		u.Disabled = true
		return nil
	}, s.auditEntry(c, "disable user", name, "sessions ended, tokens refused"))
	return s.changed(c, err, name, name+" is disabled: their sessions and tokens no longer work.")
}

// enableUser answers POST /users/:name/enable.
func (s *Server) enableUser(c *echo.Context) error {
	name := userTarget(c)
	_, err := s.st.UpdateUser(c.Request().Context(), name, func(_ *store.Tx, u *store.User) error {
		u.Disabled = false
		return nil
	}, s.auditEntry(c, "enable user", name, ""))
	return s.changed(c, err, name, name+" is enabled.")
}

// changeUser answers POST /users/:name/role (form: role, owner).
func (s *Server) changeUser(c *echo.Context) error {
	name, owner := userTarget(c), strings.TrimSpace(c.FormValue("owner"))
	role, ok := formRole(c)
	switch {
	case !ok:
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "The role must be admin or approver."})
	case len(owner) > 64:
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "The owner is at most 64 characters."})
	}
	clients, err := s.formClients(c)
	if err != nil {
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "Not changed: " + err.Error() + "."})
	}
	now := s.now().UTC()
	var revoked []store.Token
	_, err = s.st.UpdateUser(c.Request().Context(), name, func(tx *store.Tx, u *store.User) error {
		revoked = nil
		if u.Role == store.RoleAdmin && role != store.RoleAdmin {
			// A token acts for an admin; an admin no longer is one, so every
			// token of theirs is revoked with the demotion. Revoked, not
			// paused: making them admin again brings none back.
			var err error
			if revoked, err = tx.RevokeTokensOf(*u, now); err != nil {
				return err
			}
		}
		u.Role, u.Owner, u.Clients = role, owner, clients
		return nil
	}, s.auditEntry(c, "change user", name, "role "+string(role)+", owner "+orNone(owner)+", clients "+clientsText(clients)+demotionText(revoked)))
	return s.changed(c, err, name, name+" is now "+string(role)+" with owner "+orNone(owner)+"."+revokedText(revoked))
}

// demotionText names the tokens a change revoked, for the audit log.
func demotionText(revoked []store.Token) string {
	if len(revoked) == 0 {
		return ""
	}
	return "; tokens revoked: " + tokenNames(revoked)
}

// revokedText says which tokens a change revoked, for the notice.
func revokedText(revoked []store.Token) string {
	if len(revoked) == 0 {
		return ""
	}
	if len(revoked) == 1 {
		return fmt.Sprintf(" Their API token is revoked (%s).", tokenNames(revoked))
	}
	return fmt.Sprintf(" Their %d API tokens are revoked (%s).", len(revoked), tokenNames(revoked))
}

func tokenNames(ts []store.Token) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// removeUser answers POST /users/:name/remove: the person and their
// sessions are deleted and their tokens revoked, in one transaction; the
// audit trail stays.
func (s *Server) removeUser(c *echo.Context) error {
	name := userTarget(c)
	revoked, err := s.st.RemoveUser(c.Request().Context(), name, s.now().UTC(), s.auditEntry(c, "remove user", name, "sessions ended, tokens revoked"))
	return s.changed(c, err, name, name+" is removed; the audit log keeps what they did."+revokedText(revoked))
}

// resetTOTP answers POST /users/:name/totp/reset: a lost second factor is
// turned off, so the person can log in with the password and enrol again.
func (s *Server) resetTOTP(c *echo.Context) error {
	name := userTarget(c)
	_, err := s.st.UpdateUser(c.Request().Context(), name, func(tx *store.Tx, u *store.User) error {
		u.TOTP, u.PendingTOTP = nil, ""
		_, err := tx.EndSessions(u.Name, nil)
		return err
	}, s.auditEntry(c, "reset second factor", name, "every session ended"))
	return s.changed(c, err, name, "The second factor of "+name+" is off; they can enrol again on their account page.")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
