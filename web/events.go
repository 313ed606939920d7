package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode/utf8"

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

// timelineAnswer is a timeline as the API renders it. Its Event shadows
// timeline.Event (encoding/json takes the shallower of two fields with one
// name), so that the body is rendered by eventAnswer's rules.
type timelineAnswer struct {
	timeline
	Event eventAnswer `json:"event"`
}

// eventAnswer is an event as the API renders it: always valid UTF-8. JSON
// bodies are refused unless they are UTF-8, but an event recorded before that
// rule may hold other bytes inside its body's strings, and a json.RawMessage
// is copied into the answer as it is, which strict JSON parsers refuse.
type eventAnswer struct {
	store.Event
	// BodyInvalidUTF8 says the stored body held bytes that are not UTF-8;
	// each run of them is shown as U+FFFD.
	BodyInvalidUTF8 bool `json:"body_invalid_utf8,omitempty"`
}

func newEventAnswer(ev store.Event) eventAnswer {
	a := eventAnswer{Event: ev}
	a.Body, a.BodyInvalidUTF8 = validUTF8JSON(ev.Body)
	return a
}

// validUTF8JSON returns raw with each run of bytes that are not UTF-8
// replaced by U+FFFD, and whether there was any. raw is valid JSON, so such
// bytes can only sit inside its strings, and it stays the same document, with
// those strings read as encoding/json reads them.
func validUTF8JSON(raw json.RawMessage) (json.RawMessage, bool) {
	if utf8.Valid(raw) {
		return raw, false
	}
	return bytes.ToValidUTF8(raw, []byte("\uFFFD")), true
}

// eventTimeline answers GET /api/v1/events/{event key}.
func (s *Server) eventTimeline(c *echo.Context) error {
	t, err := s.loadTimeline(c.Param("*"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, timelineAnswer{timeline: t, Event: newEventAnswer(t.Event)})
}
