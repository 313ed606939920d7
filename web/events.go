package web

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
)

// timeline is everything known about one event.
type timeline struct {
	Event   store.Event    `json:"event"`
	Jobs    []store.Job    `json:"jobs"`
	Draft   *store.Draft   `json:"draft"`  // the current draft
	Drafts  []store.Draft  `json:"drafts"` // every version, oldest first; each names the one it replaces
	Handoff *store.Handoff `json:"handoff"`
	Outbox  *store.Outbox  `json:"outbox"`
}

// eventTimeline answers GET /api/v1/events/{event key}.
func (s *Server) eventTimeline(c *echo.Context) error {
	t, err := s.loadTimeline(c.Param("*"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}
