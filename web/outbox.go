package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
)

// outboxRow answers GET /api/v1/outbox/{id}.
func (s *Server) outboxRow(c *echo.Context) error {
	id := c.Param("*")
	o, err := s.st.OutboxRow(id)
	if err != nil {
		return missing(err, "there is no outbox row %q", id)
	}
	return c.JSON(http.StatusOK, o)
}

// reconcileBody is a person's verdict.
type reconcileBody struct {
	Outcome    string `json:"outcome"`
	ProviderID string `json:"provider_id"`
}

// reconcile answers POST /api/v1/reconcile/{outbox id}.
func (s *Server) reconcile(c *echo.Context) error {
	var body reconcileBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	o, err := s.reconcileRow(c, c.Param("*"), body.Outcome, body.ProviderID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, o)
}

// reconcileRow is the one reconciliation shared by the API and the dashboard.
func (s *Server) reconcileRow(c *echo.Context, id, outcome, providerID string) (store.Outbox, error) {
	providerID = strings.TrimSpace(providerID)
	switch outcome {
	case "sent":
		if providerID == "" {
			return store.Outbox{}, errorf(http.StatusBadRequest, "outcome sent needs the provider_id you found at the provider")
		}
	case "not_sent":
		if providerID != "" {
			return store.Outbox{}, errorf(http.StatusBadRequest, "outcome not_sent takes no provider_id")
		}
	default:
		return store.Outbox{}, errorf(http.StatusBadRequest, `outcome must be "sent" or "not_sent", not %q`, outcome)
	}
	o, err := s.outbox.Reconcile(c.Request().Context(), id, store.Reconciliation{
		By: actor(c), At: s.now().UTC(), Outcome: outcome, ProviderID: providerID, From: c.RealIP(),
	})
	if err != nil {
		return store.Outbox{}, missing(err, "there is no outbox row %q", id)
	}
	if outcome == "not_sent" {
		s.jobs.Wake()
	}
	return o, nil
}

// sandboxMessages answers GET /api/v1/sandbox/messages: what the built-in provider received.
func (s *Server) sandboxMessages(c *echo.Context) error {
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	msgs, err := s.st.SandboxMessages(limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"messages": msgs})
}
