package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"
	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
	"github.com/handoff/handoff/views"
)

// createToken answers POST /users/tokens (form: name, scope): the secret
// is shown once; only its SHA-256 is stored.
func (s *Server) createToken(c *echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	scope := store.Scope(c.FormValue("scope"))
	switch {
	case !users.ValidName(name):
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "A token name is 1 to 64 letters, digits, dots, dashes, underscores or @."})
	case !store.ValidScope(scope):
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "The scope must be one of approve, read, keys, metrics or admin."})
	}
	clients, err := s.formClients(c)
	if err != nil {
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "Not created: " + err.Error() + "."})
	}
	if len(clients) > 0 && scope != store.ScopeRead && scope != store.ScopeApprove {
		// A keys or metrics token reads no client's records, and an admin
		// token sees every client: a limit there would be a promise not kept.
		return s.renderUsers(c, http.StatusBadRequest, nil, &views.Notice{Tone: "error", Text: "Not created: only a read or approve token can be limited to clients; a " + string(scope) + " token reaches no client's leads or reaches them all, so leave its clients empty."})
	}
	secret := newSecret()
	// The store binds it to the ID of the person named here, in its write.
	t := store.Token{ID: ulid.Make().String(), Name: name, User: who(c).Name, Scope: scope, Clients: clients, CreatedAt: s.now().UTC()}
	err = s.st.CreateToken(c.Request().Context(), hashSecret(secret), t, s.auditEntry(c, "create token", t.ID, name+", scope "+string(scope)+", clients "+clientsText(clients)))
	if err != nil {
		return s.refuseUsers(c, taken(err, "A live token is already named %s; revoke it first or choose another name.", name), "%s")
	}
	return s.renderUsers(c, http.StatusOK, &views.Secret{What: "API token " + name, Value: secret},
		&views.Notice{Tone: "ok", Text: "Created token " + name + ". Send it as Authorization: Bearer <token>."})
}

// revokeToken answers POST /users/tokens/{id}/revoke.
func (s *Server) revokeToken(c *echo.Context) error {
	id := c.Param("id")
	_, err := s.st.RevokeToken(c.Request().Context(), id, s.now().UTC(), s.auditEntry(c, "revoke token", id, ""))
	if err != nil {
		return missing(err, "there is no token %q", id)
	}
	return c.Redirect(http.StatusSeeOther, "/users?revoked="+id)
}
