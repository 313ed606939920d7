package web

import (
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
	return render(c, status, views.UsersPageView(l, views.UsersPage{Users: users, Tokens: tokens, Secret: secret, Notice: n, Owners: s.owners()}))
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
	generated := pw == ""
	if generated {
		pw = password.Generate()
	}
	hash, err := password.Hash(pw)
	if err != nil {
		return s.refuseUsers(c, err, "Not added: %s.")
	}
	now := s.now().UTC()
	err = s.st.CreateUser(c.Request().Context(), store.User{Name: name, Role: role, Owner: owner, PasswordHash: hash, CreatedAt: now},
		s.auditEntry(c, "create user", name, "role "+string(role)+", owner "+owner))
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
