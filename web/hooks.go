package web

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/intake"
)

// hookAnswer is the body of every non-error webhook answer.
type hookAnswer struct {
	Status        string `json:"status"`
	EventKey      string `json:"event_key"`
	CorrelationID string `json:"correlation_id"`
}

// receiveHook records an inbound event and enqueues its draft job in one
// transaction (intake.Record), durable before the answer. Nothing is stored on any error.
func (s *Server) receiveHook(c *echo.Context) error {
	name := c.Param("channel")
	outcome, err := s.receive(c, name)
	s.metrics.Webhook(name, outcome)
	return err
}

// receive does the work of receiveHook and names the outcome for metrics.
func (s *Server) receive(c *echo.Context, name string) (string, error) {
	ch, ok := s.cfg.Channel(name)
	if !ok {
		return "rejected_unknown_channel", errorf(http.StatusNotFound, "there is no channel named %q", name)
	}
	req := c.Request()
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, ch.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return "rejected_too_large", errorf(http.StatusRequestEntityTooLarge, "the body is larger than the %d-byte limit of channel %s", ch.MaxBody, ch.Name)
		}
		return "rejected_unreadable", &apiError{status: http.StatusBadRequest, msg: "the body could not be read", err: err}
	}
	now := s.now().UTC()
	if v := s.verifiers[ch.Name]; v != nil {
		if err := v.Verify(req.Header, body, now); err != nil {
			return "rejected_signature", refused(err, http.StatusUnauthorized)
		}
	}
	p, err := hook.Parse(req.Header.Get("Content-Type"), body, req.Header)
	if err != nil {
		return "rejected_body", refused(err, http.StatusBadRequest)
	}
	msgID, err := hook.MessageID(p, ch.Fields.MessageID)
	if err != nil {
		return "rejected_message_id", refused(err, http.StatusBadRequest)
	}
	contact := optional(p, ch.Fields.Contact)
	rec, err := intake.Record(req.Context(), s.st, intake.Message{
		Channel: ch.Name, MessageID: msgID, ConversationID: conversationID(p, ch, contact, msgID),
		Contact: contact, Name: optional(p, ch.Fields.Name), Text: optional(p, ch.Fields.Text),
		ContentType: req.Header.Get("Content-Type"), Body: body, JSON: p.IsJSON(), ReceivedAt: now,
	}, s.cfg.Retry.MaxAttempts)
	if err != nil {
		return "rejected_unavailable", &apiError{status: http.StatusServiceUnavailable, msg: "the event could not be stored; nothing was recorded, retry later", err: err}
	}
	if !rec.Created {
		return "duplicate", c.JSON(http.StatusOK, hookAnswer{Status: "duplicate", EventKey: rec.Event.Key, CorrelationID: rec.Event.CorrelationID})
	}
	s.jobs.Wake()
	return "accepted", c.JSON(http.StatusAccepted, hookAnswer{Status: "accepted", EventKey: rec.Event.Key, CorrelationID: rec.Event.CorrelationID})
}

// optional reads a field that may be absent or of the wrong type: a message
// is never refused over a name that is not a string. Field trims the value.
func optional(p *hook.Payload, source string) string {
	if source == "" {
		return ""
	}
	v, ok, err := p.Field(source)
	if !ok || err != nil {
		return ""
	}
	return v
}

// conversationID is the configured field, else the contact, else the message id.
func conversationID(p *hook.Payload, ch *config.Channel, contact, msgID string) string {
	if v := optional(p, ch.Fields.ConversationID); v != "" {
		return v
	}
	if contact != "" {
		return contact
	}
	return msgID
}
