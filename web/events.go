package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
)

// timeline is everything known about one event.
type timeline struct {
	Event   store.Event    `json:"event"`
	Jobs    []store.Job    `json:"jobs"`
	Draft   *store.Draft   `json:"draft"`
	Handoff *store.Handoff `json:"handoff"`
	Outbox  *store.Outbox  `json:"outbox"`
}

// eventTimeline answers GET /api/v1/events/{event key}.
func (s *Server) eventTimeline(c *echo.Context) error {
	key := c.Param("*")
	ev, err := s.st.EventByKey(key)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "no event has the key %q", key)
	}
	if err != nil {
		return err
	}
	jobs, err := s.st.JobsByCorrelation(ev.CorrelationID)
	if err != nil {
		return err
	}
	t := timeline{Event: ev, Jobs: jobs}
	if jobs == nil {
		t.Jobs = []store.Job{}
	}
	d, err := s.st.DraftByEvent(ev.Key)
	switch {
	case err == nil:
		t.Draft = &d
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if t.Draft != nil && t.Draft.OutboxID != "" {
		o, err := s.st.OutboxRow(t.Draft.OutboxID)
		if err != nil {
			return err
		}
		t.Outbox = &o
	}
	h, err := s.st.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
	switch {
	case err == nil:
		t.Handoff = &h
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	return c.JSON(http.StatusOK, t)
}
