package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// createToken answers POST /users/tokens (form: name, scope): the secret
// is shown once; only its SHA-256 is stored.
func (s *Server) createToken(c *echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	scope := store.Scope(c.FormValue("scope"))
	clients, err := s.formClients(c)
	if err != nil && users.ValidName(name) && store.ValidScope(scope) {
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "Not created: " + err.Error() + "."})
	}
	// The store binds it to the ID of the person named here, in its write.
	secret, _, err := s.accounts.MintToken(c.Request().Context(), users.NewToken{Name: name, User: who(c).Name, Scope: scope, Clients: clients},
		s.now().UTC(), s.auditEntry(c, "create token", "", name+", scope "+string(scope)+", clients "+clientsText(clients)))
	switch {
	case errors.Is(err, users.ErrTokenName), errors.Is(err, users.ErrTokenScope):
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: sentence(err)})
	case errors.As(err, new(*users.Invalid)):
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "Not created: " + err.Error() + "."})
	case err != nil:
		return s.refuseUsers(c, taken(err, "A live token is already named %s; revoke it first or choose another name.", name), "%s")
	}
	return s.renderUsers(c, http.StatusOK, &views.Secret{What: "API token " + name, Value: secret},
		&views.Notice{Tone: "ok", Text: "Created token " + name + ". Send it as Authorization: Bearer <token>."})
}

// revokeToken answers POST /users/tokens/{id}/revoke.
func (s *Server) revokeToken(c *echo.Context) error {
	id := c.Param("id")
	_, err := s.accounts.RevokeToken(c.Request().Context(), id, s.now().UTC(), s.auditEntry(c, "revoke token", id, ""))
	if err != nil {
		return missing(err, "there is no token %q", id)
	}
	return c.Redirect(http.StatusSeeOther, "/users?revoked="+id)
}
