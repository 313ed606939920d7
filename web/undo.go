package web

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// undoAnswer says what an undo did.
type undoAnswer struct {
	Status   string       `json:"status"` // undone
	DraftID  string       `json:"draft_id"`
	OutboxID string       `json:"outbox_id"` // the reply taken back, which no longer exists
	UndoneBy string       `json:"undone_by"`
	UndoneAt string       `json:"undone_at"`
	Draft    *store.Draft `json:"draft"` // waiting for approval again
}

// undo is the one undo shared by the API and the dashboard: the approval
// of draft id taken back inside its undo window (review.Undo).
func (s *Server) undo(c *echo.Context, id string) (review.Undone, store.Decision, error) {
	dec := store.Decision{By: actor(c), At: s.now().UTC(), From: c.RealIP()}
	res, err := review.New(s.st, s.cfg).Undo(c.Request().Context(), id, dec)
	if err != nil {
		return review.Undone{}, dec, missing(err, "there is no draft %q", id)
	}
	return res, dec, nil
}

// undoDraft answers POST /api/v1/drafts/{id}/undo: 200 with the draft
// waiting again, or 409 when the reply can no longer be undone.
func (s *Server) undoDraft(c *echo.Context) error {
	res, dec, err := s.undo(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, undoAnswer{
		Status: "undone", DraftID: res.Draft.ID, OutboxID: res.Outbox.ID,
		UndoneBy: dec.By, UndoneAt: dec.At.Format(time.RFC3339), Draft: &res.Draft,
	})
}

// undoFromQueue answers POST /drafts/{id}/undo (form: owner, channel,
// cursor), the banner's Undo after an approval: htmx gets the undone
// draft's card back, waiting again, with the list and count; a refusal
// replaces only the banner with its sentence, so the card under it stays.
func (s *Server) undoFromQueue(c *echo.Context) error {
	v, err := newQueueView(who(c), c.FormValue("owner"), c.FormValue("channel"), c.FormValue("cursor"))
	if err != nil {
		return err
	}
	v.only = s.only(c)
	id := c.Param("id")
	res, _, err := s.undo(c, id)
	var refused *delivery.UndoError
	if err != nil && isHX(c) && errors.As(err, &refused) {
		h := c.Response().Header()
		h.Set("HX-Retarget", "#undo-toast")
		h.Set("HX-Reswap", "outerHTML")
		_, msg := answerFor(err)
		return render(c, http.StatusConflict, views.UndoNotice(&views.UndoToast{Refused: msg}))
	}
	if err != nil {
		return err
	}
	if !isHX(c) {
		return c.Redirect(http.StatusSeeOther, v.filter.URL(id))
	}
	page, next, _, err := s.pendingPage(v, queuePage)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(page, func(d store.Draft) bool { return d.ID == id })
	d := res.Draft
	if i >= 0 {
		d = page[i]
	}
	card, err := s.pendingCard(c, v, page, next, i, d)
	if err != nil {
		return err
	}
	card.Notice = &views.Notice{Tone: "ok", Text: "Undone: the reply to " + res.Outbox.To + " was not sent, and this draft waits for approval again."}
	return s.answerQueue(c, v, page, card, http.StatusOK)
}

// undoToast is the banner for draft decided, just approved by the person
// asking, while its reply can still be undone; nil otherwise (rejected,
// approved by someone else or at once, the window over).
func (s *Server) undoToast(c *echo.Context, v queueView, decided store.Draft) *views.UndoToast {
	dec := decided.Decision
	if decided.Status != store.DraftApproved || dec == nil || dec.By != actor(c) || decided.OutboxID == "" {
		return nil
	}
	o, err := s.st.OutboxRow(decided.OutboxID)
	if err != nil || o.Status != store.OutboxPending || o.UndoUntil.IsZero() {
		return nil
	}
	left := o.UndoUntil.Sub(s.now())
	if left <= 0 {
		return nil
	}
	lead := "Approved by " + dec.By + " at " + dec.At.UTC().Format("15:04:05 UTC")
	if dec.Edited {
		lead = "Approved with your edit by " + dec.By + " at " + dec.At.UTC().Format("15:04:05 UTC")
	}
	return &views.UndoToast{DraftID: decided.ID, Lead: lead, To: o.To, Left: left, Filter: v.filter, CSRF: csrfOf(c)}
}
