package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// The reply window on the dashboard and the API (review/window.go): the
// card's time left, the queue's page with what closes first at its top,
// and the template a person sends once the window closed.

// A person limited to clients sends a template only for the drafts they
// see, as they approve them (clients.go's table; added here so the table
// keeps its layout).
func init() {
	limitedRoutes["POST /drafts/:id/template"] = draftParam("there is no draft %q")
	limitedRoutes["POST /api/v1/drafts/:id/template"] = draftParam("there is no draft %q")
}

// templateBody is the body of POST /api/v1/drafts/{id}/template.
type templateBody struct {
	Template string `json:"template"`
	// Parameters, when given, fill the template's body parameters instead
	// of the ones the config names (as many as it has).
	Parameters []string `json:"parameters"`
}

// templateDraft answers POST /api/v1/drafts/{id}/template: the draft is
// answered with one of its provider's templates instead of its text, as an
// approval would (the same outbox id; already answered: that answer).
func (s *Server) templateDraft(c *echo.Context) error {
	var body templateBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	if strings.TrimSpace(body.Template) == "" {
		return errorf(http.StatusBadRequest, "template is empty; name one of the channel's templates")
	}
	res, err := s.sendTemplate(c, c.Param("id"), review.TemplateChoice{Name: body.Template, Params: body.Parameters})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, approvedAnswer(res))
}

// templateFromQueue answers POST /drafts/{id}/template (form: template,
// owner, channel, cursor) with the next card, as an approval does.
func (s *Server) templateFromQueue(c *echo.Context) error {
	v, err := newQueueView(who(c), c.FormValue("owner"), c.FormValue("channel"), c.FormValue("cursor"))
	if err != nil {
		return err
	}
	v.only = s.only(c)
	id := c.Param("id")
	res, err := s.sendTemplate(c, id, review.TemplateChoice{Name: c.FormValue("template")})
	if err != nil {
		return s.refusedDecision(c, v, id, err)
	}
	if !isHX(c) {
		return c.Redirect(http.StatusSeeOther, v.filter.URL(""))
	}
	if !res.Created {
		return s.answerDecision(c, v, res.Draft, decisionNotice(res.Draft, ""), http.StatusOK, true)
	}
	dec := res.Draft.Decision
	text := "Sent by " + dec.By + " at " + dec.At.UTC().Format("15:04:05 UTC") + ": " + dec.Text + " is on its way to " + res.Outbox.To + "."
	return s.answerDecision(c, v, res.Draft, &views.Notice{Tone: "ok", Text: text}, http.StatusOK, false)
}

// sendTemplate is the one template answer shared by the API and the dashboard.
func (s *Server) sendTemplate(c *echo.Context, id string, choice review.TemplateChoice) (review.Approved, error) {
	res, err := review.New(s.st, s.cfg).SendTemplate(c.Request().Context(), id, choice, store.Decision{By: actor(c), At: s.now().UTC(), From: c.RealIP()})
	if err != nil {
		return review.Approved{}, missing(err, "there is no draft %q", id)
	}
	s.claims.release(id)
	if res.Created {
		s.jobs.Wake()
	}
	return res, nil
}

// windowCard is the reply window of lead h for its card at now; zero when
// its channel has none, or when it cannot be read (the card still shows,
// and the approval checks the window itself).
func (s *Server) windowCard(h store.Handoff, now time.Time) views.ReplyWindow {
	rv := review.New(s.st, s.cfg)
	var w review.Window
	if err := s.st.View(func(tx *store.Tx) (err error) { w, err = rv.WindowTx(tx, h); return err }); err != nil || !w.Has {
		return views.ReplyWindow{}
	}
	left := w.Left(now)
	return views.ReplyWindow{
		Has: true, Kind: s.kindOf(h.Channel), Left: left, Closes: w.Closes,
		Soon: left > 0 && left <= review.WindowWarning(s.cfg), Templates: rv.Templates(h.Channel),
		Unknown: w.Unknown, Why: w.Why,
	}
}

// kindOf names the provider kind channel replies through ("" when unknown).
func (s *Server) kindOf(channel string) string {
	ch, ok := s.cfg.Channel(channel)
	if !ok {
		return ""
	}
	p, ok := s.cfg.Provider(ch.Provider)
	if !ok {
		return ""
	}
	return p.Kind
}

// windows is how long each configured channel's reply window lasts (the
// channels with one), which orders the queue: its open windows soonest to
// close first across the whole queue (store/queue.go), then the rest
// oldest first, then the closed windows.
func (s *Server) windows() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, ch := range s.cfg.Channels {
		if d := review.WindowLength(s.cfg, ch.Name); d > 0 {
			out[ch.Name] = d
		}
	}
	return out
}
