package web

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// Clients: a person may be limited to some clients (store.User.Clients),
// and then sees only their channels' leads, drafts, events and replies.
//
// Two things keep that from being forgotten on a route:
//   - clientScope, in the chain of every dashboard and API route, lets a
//     limited person reach only the routes of limitedRoutes; any other
//     route answers them 404, as if it did not exist. A route with an id
//     in its path names how that id's channel is found, and an id of a
//     channel they do not see gets the same 404 as an id that does not
//     exist.
//   - every list and count a limited person reaches reads through
//     s.visible(c) (store.Visible, whose zero value sees nothing), inside
//     the store's read transaction, so pages, cursors and counts agree.
//
// Admins (and the tokens they make) see every client: they run the
// install, its backups and its users.

// visible is what the request's caller may see.
func (s *Server) visible(c *echo.Context) store.Visible {
	p := who(c)
	switch {
	case p == nil:
		return store.Visible{}
	case p.Role == store.RoleAdmin || len(p.Clients) == 0:
		return store.Everything()
	}
	return store.OnlyChannels(s.cfg.ClientChannels(p.Clients...)...)
}

// only is visible for the filters whose nil means every channel.
func (s *Server) only(c *echo.Context) *store.Visible {
	v := s.visible(c)
	if v.All() {
		return nil
	}
	return &v
}

// limitedRoute says whether a limited person may use a route, and checks
// the record its path names; nil lets the handler run.
type limitedRoute func(s *Server, c *echo.Context, v store.Visible) error

// limitedRoutes are the routes a person limited to clients may reach, by
// method and path pattern. Lists (listed) filter by s.visible themselves.
var limitedRoutes = map[string]limitedRoute{
	"GET /":                           listed,
	"GET /search":                     listed,
	"GET /drafts":                     listed,
	"GET /drafts/live":                listed, // the queue's poll: the page's filter, through s.visible
	"GET /handoffs":                   listed,
	"GET /events/*":                   eventParam(false),
	"POST /events/*":                  eventParam(true),
	"POST /drafts/:id/approve":        draftParam("there is no draft %q"),
	"POST /drafts/:id/reject":         draftParam("there is no such draft"),
	"POST /drafts/selected":           listed, // each selected draft is checked (selection.go)
	"POST /drafts/:id/undo":           draftParam("there is no draft %q"),
	"GET /undo":                       listed, // the person's own decisions, through s.visible
	"POST /handoffs/*":                leadParam,
	"POST /api/v1/handoffs/*":         leadParam,
	"GET /api/v1/handoffs":            listed,
	"GET /api/v1/drafts":              listed,
	"GET /api/v1/events/*":            eventParam(false),
	"POST /api/v1/events/*":           eventParam(true),
	"POST /api/v1/drafts/:id/approve": draftParam("there is no draft %q"),
	"POST /api/v1/drafts/:id/reject":  draftParam("there is no such draft"),
	"POST /api/v1/drafts/:id/undo":    draftParam("there is no draft %q"),
	"GET /api/v1/outbox/*":            outboxParam,
	"GET /api/v1/stats/quality":       listed,
	"GET /api/v1/canary":              listed, // the clients whose channels the person sees (canary.go)
	"GET /clients":                    listed,
}

// listed routes filter what they list by s.visible.
func listed(*Server, *echo.Context, store.Visible) error { return nil }

// eventParam checks the event or lead key of /events/{key}[/{action}].
func eventParam(action bool) limitedRoute {
	return func(_ *Server, c *echo.Context, v store.Visible) error {
		key := c.Param("*")
		if action {
			k, _, err := splitAction(key, "there is no such lead action")
			if err != nil {
				return err
			}
			key = k
		}
		if !v.Key(key) {
			return errorf(http.StatusNotFound, "no event has the key %q", key)
		}
		return nil
	}
}

// leadParam checks the lead key of /handoffs/{key}/{action} (a close undone).
func leadParam(_ *Server, c *echo.Context, v store.Visible) error {
	key, _, err := splitAction(c.Param("*"), "there is no such lead action")
	if err != nil {
		return err
	}
	if !v.Key(key) {
		return errorf(http.StatusNotFound, "there is no lead %q", key)
	}
	return nil
}

// draftParam checks the draft of /drafts/{id}/…; missing is the sentence
// the route says of a draft that does not exist.
func draftParam(missingDraft string) limitedRoute {
	return func(s *Server, c *echo.Context, v store.Visible) error {
		id := c.Param("id")
		d, err := s.st.Draft(id)
		if errors.Is(err, store.ErrNotFound) || err == nil && !v.Draft(d) {
			if strings.Contains(missingDraft, "%q") {
				return errorf(http.StatusNotFound, missingDraft, id)
			}
			return errorf(http.StatusNotFound, "%s", missingDraft)
		}
		return err
	}
}

// outboxParam checks the row of /api/v1/outbox/{id}.
func outboxParam(s *Server, c *echo.Context, v store.Visible) error {
	id := c.Param("*")
	o, err := s.st.OutboxRow(id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !v.Outbox(o) {
		return errorf(http.StatusNotFound, "there is no outbox row %q", id)
	}
	return err
}

// clientParam checks the client of /clients/{id}/…: one of the person's own.
func clientParam(s *Server, c *echo.Context, _ store.Visible) error {
	if !s.seesClient(c, c.Param("id")) {
		return errorf(http.StatusNotFound, "there is no client %q", c.Param("id"))
	}
	return nil
}

// seesClient reports whether the caller may see client id: an admin or a
// person not limited sees every configured client.
func (s *Server) seesClient(c *echo.Context, id string) bool {
	if _, ok := s.cfg.Client(id); !ok {
		return false
	}
	p := who(c)
	switch {
	case p == nil:
		return false
	case p.Role == store.RoleAdmin || len(p.Clients) == 0:
		return true
	}
	return slices.Contains(p.Clients, id)
}

// notHere is the 404 a person limited to clients gets for a route that is
// not theirs: "no such route", as for a path that does not exist.
func notHere(c *echo.Context) error {
	r := c.Request()
	return errorf(http.StatusNotFound, "there is no %s %s", r.Method, r.URL.Path)
}

// notYours is notHere for an admin's route, whose path may hold an
// item's id (a dead letter's): it is not echoed.
func notYours(*echo.Context) error {
	return errorf(http.StatusNotFound, "there is no such page")
}

// clientScope keeps a person limited to clients to limitedRoutes and to
// the records of their clients' channels (see the comment above). It runs
// after requireAPI / requirePage, which set the principal.
func (s *Server) clientScope(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		v := s.visible(c)
		if v.All() {
			return next(c)
		}
		check, ok := limitedRoutes[c.Request().Method+" "+c.Path()]
		if !ok {
			return notHere(c)
		}
		if err := check(s, c, v); err != nil {
			return err
		}
		return next(c)
	}
}

// formClients reads a person's clients from a form: the ids, separated by
// commas or spaces (empty: every client), each a configured client.
func (s *Server) formClients(c *echo.Context) ([]string, error) {
	ids := users.ParseClients(c.FormValue("clients"))
	if err := s.cfg.CheckClients(ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// clientsText names clients for the audit log.
func clientsText(ids []string) string {
	if len(ids) == 0 {
		return "all"
	}
	return strings.Join(ids, ", ")
}
