package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// clientsPage answers GET /clients: the clients the caller sees, with the
// export and erase forms.
func (s *Server) clientsPage(c *echo.Context) error {
	return s.renderClients(c, http.StatusOK, nil)
}

func (s *Server) renderClients(c *echo.Context, status int, n *views.Notice) error {
	l, err := s.layout(c, "Clients", "clients")
	if err != nil {
		return err
	}
	list := views.ClientList{Notice: n}
	for _, cl := range s.cfg.ClientList() {
		if s.seesClient(c, cl.ID) {
			list.Clients = append(list.Clients, views.ClientRow{ID: cl.ID, Name: cl.Name, Channels: s.cfg.ClientChannels(cl.ID)})
		}
	}
	return render(c, status, views.ClientsPage(l, list))
}

// subject is what /clients/{id}/… with ?contact= or the contact field names.
func (s *Server) subject(c *echo.Context, contact string) store.Subject {
	id := c.Param("id")
	return store.Subject{Client: id, Channels: s.cfg.ClientChannels(id), Contact: strings.TrimSpace(contact)}
}

// exportClient answers GET /clients/{id}/export[?contact=]: a JSON download
// of what is stored about the client's customers, or one contact's. It is
// audited, since it hands customer data out.
func (s *Server) exportClient(c *echo.Context) error {
	sub := s.subject(c, c.QueryParam("contact"))
	if len(sub.Contact) > 1000 {
		return errorf(http.StatusBadRequest, "the contact is %d bytes; a contact is at most 1000", len(sub.Contact))
	}
	what := "client " + sub.Client
	if sub.Contact != "" {
		what += " contact " + sub.Contact
	}
	if err := s.st.Audit(c.Request().Context(), s.auditEntry(c, "export", what, "")); err != nil {
		return err
	}
	name := "handoff-export-" + sub.Client
	if sub.Contact != "" {
		name += "-contact"
	}
	h := c.Response().Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name+".json"))
	c.Response().WriteHeader(http.StatusOK)
	if _, err := s.st.Export(c.Response(), sub, s.now()); err != nil {
		// The header is out: cut the stream, so the download is not taken
		// for a whole file.
		panic(http.ErrAbortHandler)
	}
	return nil
}

// eraseClient answers POST /clients/{id}/erase (form: contact, empty for
// the whole client; confirm, the client's id): the customers' words are
// removed, their keys and the audit kept (store.Erase).
func (s *Server) eraseClient(c *echo.Context) error {
	sub := s.subject(c, c.FormValue("contact"))
	switch {
	case c.FormValue("confirm") != sub.Client:
		return s.renderClients(c, http.StatusBadRequest, &views.Notice{Tone: "error", Text: "Nothing erased: type the client's id " + sub.Client + " to confirm."})
	case len(sub.Contact) > 1000:
		return s.renderClients(c, http.StatusBadRequest, &views.Notice{Tone: "error", Text: "Nothing erased: a contact is at most 1000 bytes."})
	}
	what := "client " + sub.Client
	if sub.Contact != "" {
		what += " contact " + sub.Contact
	}
	res, err := s.st.Erase(c.Request().Context(), sub, s.auditEntry(c, "erase", what, "the customers' messages, drafts and replies"))
	if err != nil {
		return err
	}
	text := "Erased " + what + ": " + views.Count(res.Leads, "lead", "leads") + ", " + views.Count(res.Events, "message", "messages") + ", " +
		views.Count(res.Drafts, "draft", "drafts") + ", " + views.Count(res.Outbox, "reply", "replies") + "."
	if n := len(res.Busy); n > 0 {
		left := " leads were left as they were because a draft or reply is still under way (%s); decide or close them and erase again."
		if n == 1 {
			left = " lead was left as it was because a draft or reply is still under way (%s); decide or close it and erase again."
		}
		text += fmt.Sprintf(" %d"+left, n, strings.Join(res.Busy, ", "))
	}
	return s.renderClients(c, http.StatusOK, &views.Notice{Tone: "ok", Text: text})
}
