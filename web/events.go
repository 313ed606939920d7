package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/review"
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
	// AnsweredBy is the event whose draft answers this message, when it
	// joined a turn drafted for another message (draft and outbox are then
	// that draft's); empty when the draft is the event's own.
	AnsweredBy string `json:"answered_by,omitempty"`
	// Unreadable is each record of the timeline that cannot be read
	// (a job, a draft version, the lead, the reply), left out of it.
	Unreadable []store.Unreadable `json:"unreadable,omitempty"`
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

// leadBody is the optional body of POST /api/v1/events/{key}/{action}.
type leadBody struct {
	Text        string `json:"text"`        // reply: the person's reply
	Instruction string `json:"instruction"` // redraft: what the new draft should do differently
	Reason      string `json:"reason"`      // close: why no reply is sent
}

// leadActionAnswer says what a lead action did.
type leadActionAnswer struct {
	Status   string         `json:"status"` // approved, drafting, closed, already_closed
	Draft    *store.Draft   `json:"draft,omitempty"`
	Outbox   *store.Outbox  `json:"outbox,omitempty"`
	Job      *store.Job     `json:"job,omitempty"`
	Handoff  *store.Handoff `json:"handoff,omitempty"`
	OutboxID string         `json:"outbox_id,omitempty"`
	// Message says what the action did, in words: the sentence the
	// dashboard shows after it (leadMessage).
	Message string `json:"message"`
}

// leadActionAPI answers POST /api/v1/events/{key}/reply, …/redraft and
// …/close: the ways a person ends the open turn of the event's lead.
func (s *Server) leadActionAPI(c *echo.Context) error {
	key, action, err := splitAction(c.Param("*"), "use POST /api/v1/events/{key}/reply, /redraft or /close")
	if err != nil {
		return err
	}
	var body leadBody
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	ans, err := s.leadAction(c, key, action, body)
	if err != nil {
		return err
	}
	ans.Message = s.leadMessage(key, body, ans, true)
	return c.JSON(http.StatusOK, ans)
}

// turnDraftOf names the draft of the open turn of event key's lead, ""
// when there is none or it cannot be read: the draft a lead action ends.
func (s *Server) turnDraftOf(key string) string {
	id := ""
	_ = s.st.View(func(tx *store.Tx) error {
		ev, err := tx.EventByKey(key)
		if err != nil {
			return err
		}
		h, err := tx.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
		if err != nil {
			return err
		}
		id, err = tx.CurrentDraftID(h)
		return err
	})
	return id
}

// leadAction runs one lead action for the API and the dashboard alike.
func (s *Server) leadAction(c *echo.Context, key, action string, body leadBody) (leadActionAnswer, error) {
	ended := s.turnDraftOf(key) // read before the action moves the turn on
	ans, err := s.runLeadAction(c, key, action, body)
	if err == nil && ended != "" {
		// The turn's draft is decided (rejected or replaced): its soft
		// claim ends with it, on the API as on the dashboard.
		s.claims.release(ended)
	}
	return ans, err
}

func (s *Server) runLeadAction(c *echo.Context, key, action string, body leadBody) (leadActionAnswer, error) {
	ctx := c.Request().Context()
	rv := review.New(s.st, s.cfg)
	dec := store.Decision{By: actor(c), At: s.now().UTC(), From: c.RealIP()}
	switch action {
	case "reply":
		text, err := replyText(body.Text, "text is empty; write the reply to send")
		if err != nil {
			return leadActionAnswer{}, err
		}
		res, err := rv.Write(ctx, key, text, dec)
		if err != nil {
			return leadActionAnswer{}, missing(err, "no event has the key %q", key)
		}
		if res.Created {
			s.jobs.Wake()
		}
		return leadActionAnswer{Status: "approved", Draft: &res.Draft, Outbox: &res.Outbox, OutboxID: res.Outbox.ID}, nil
	case "redraft":
		instr := strings.TrimSpace(body.Instruction)
		if len(instr) > 1000 {
			return leadActionAnswer{}, errorf(http.StatusBadRequest, "the instruction is %d bytes; keep it under 1000", len(instr))
		}
		dec.Reason = instr // the drafter's instruction (review.DraftArgs)
		j, err := rv.Redraft(ctx, key, dec)
		if err != nil {
			return leadActionAnswer{}, missing(err, "no event has the key %q", key)
		}
		s.jobs.Wake()
		return leadActionAnswer{Status: "drafting", Job: &j}, nil
	case "close":
		reason := strings.TrimSpace(body.Reason)
		if reason == "" {
			return leadActionAnswer{}, errorf(http.StatusBadRequest, "reason is empty; say why the lead is closed without a reply")
		}
		if len(reason) > 1000 {
			return leadActionAnswer{}, errorf(http.StatusBadRequest, "the reason is %d bytes; keep it under 1000", len(reason))
		}
		dec.Reason = reason
		res, err := rv.Close(ctx, key, dec)
		if err != nil {
			return leadActionAnswer{}, missing(err, "no event has the key %q", key)
		}
		status := "closed"
		if !res.Closed {
			status = "already_closed"
		} else {
			s.metrics.LeadClosed()
			s.jobs.Wake() // the move may have queued a CRM write (crm.MoveTx)
		}
		return leadActionAnswer{Status: status, Handoff: &res.Lead}, nil
	default:
		return leadActionAnswer{}, errorf(http.StatusNotFound, "there is no lead action %q; use reply, redraft or close", action)
	}
}

// leadActionPage answers POST /events/{key}/reply, …/redraft and …/close
// from the dashboard (form: text, instruction, reason, back), then goes
// back to the page the form was on (the queue or the event's timeline).
func (s *Server) leadActionPage(c *echo.Context) error {
	key, action, err := splitAction(c.Param("*"), "there is no such lead action")
	if err != nil {
		return err
	}
	body := leadBody{Text: c.FormValue("text"), Instruction: c.FormValue("instruction"), Reason: c.FormValue("reason")}
	ans, err := s.leadAction(c, key, action, body)
	if err != nil {
		return err
	}
	return s.answerLeadAction(c, key, action, body, ans) // drafts.go: what it did, in words, and the queue moved on
}
