package web

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// The undo stack (views/undo.templ): every decision the person logged in
// can still take back — approvals held for undo_window (bulk ones and
// "Send my reply" too), rejections and closes inside the same window — is
// read from the server on every dashboard page (s.layout) and by the
// stack's own poll (GET /undo), never kept by the page, so it survives j,
// a reload and another page. review.UndoableTx is the one read.

// undoAnswer says what an undo did.
type undoAnswer struct {
	Status   string       `json:"status"` // undone
	Undid    string       `json:"undid"`  // approval or rejection
	DraftID  string       `json:"draft_id"`
	OutboxID string       `json:"outbox_id,omitempty"` // an approval's reply taken back, which no longer exists
	UndoneBy string       `json:"undone_by"`
	UndoneAt string       `json:"undone_at"`
	Draft    *store.Draft `json:"draft"` // waiting for approval again
}

// reopenAnswer says what undoing a close did.
type reopenAnswer struct {
	Status   string         `json:"status"` // reopened
	LeadKey  string         `json:"lead_key"`
	UndoneBy string         `json:"undone_by"`
	UndoneAt string         `json:"undone_at"`
	Handoff  *store.Handoff `json:"handoff"`
	Draft    *store.Draft   `json:"draft,omitempty"` // the turn's draft, waiting for approval again
	Job      *store.Job     `json:"job,omitempty"`   // the draft job writing it, when it had none
}

// undo is the one undo of a draft's decision shared by the API and the
// dashboard: an approval or a rejection of draft id taken back inside its
// undo window (review.Undo).
func (s *Server) undo(c *echo.Context, id string) (review.Undone, store.Decision, error) {
	dec := store.Decision{By: actor(c), At: s.now().UTC(), From: c.RealIP()}
	res, err := review.New(s.st, s.cfg).Undo(c.Request().Context(), id, dec)
	if err != nil {
		return review.Undone{}, dec, missing(err, "there is no draft %q", id)
	}
	return res, dec, nil
}

// reopen is the one undo of a close, for the API and the dashboard.
func (s *Server) reopen(c *echo.Context, key string) (review.Reopened, store.Decision, error) {
	dec := store.Decision{By: actor(c), At: s.now().UTC(), From: c.RealIP()}
	res, err := review.New(s.st, s.cfg).UndoClose(c.Request().Context(), key, dec)
	if err != nil {
		return review.Reopened{}, dec, missing(err, "there is no lead %q", key)
	}
	s.metrics.LeadCloseUndone()
	if res.Job != nil {
		s.jobs.Wake()
	}
	return res, dec, nil
}

// undoDraft answers POST /api/v1/drafts/{id}/undo: 200 with the draft
// waiting again, or 409 when the decision can no longer be undone.
func (s *Server) undoDraft(c *echo.Context) error {
	res, dec, err := s.undo(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, undoAnswer{
		Status: "undone", Undid: res.What, DraftID: res.Draft.ID, OutboxID: res.Outbox.ID,
		UndoneBy: dec.By, UndoneAt: dec.At.Format(time.RFC3339), Draft: &res.Draft,
	})
}

// reopenAPI answers POST /api/v1/handoffs/{key}/reopen: the close of the
// lead undone inside its window (200), or 409 in one sentence.
func (s *Server) reopenAPI(c *echo.Context) error {
	key, action, err := splitAction(c.Param("*"), "use POST /api/v1/handoffs/{key}/reopen")
	if err != nil {
		return err
	}
	if action != "reopen" {
		return errorf(http.StatusNotFound, "there is no lead action %q here; use reopen", action)
	}
	res, dec, err := s.reopen(c, key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reopenAnswer{
		Status: "reopened", LeadKey: res.Lead.Key, UndoneBy: dec.By, UndoneAt: dec.At.Format(time.RFC3339),
		Handoff: &res.Lead, Draft: res.Draft, Job: res.Job,
	})
}

// undoFromQueue answers POST /drafts/{id}/undo (form: from, owner,
// channel, cursor), an Undo of the stack: from the queue (from=queue) htmx
// gets the undone draft's card back, waiting again, with the list, the
// count and the stack; elsewhere the stack alone, saying what was undone.
// A refusal (409) replaces only the stack, with its sentence.
func (s *Server) undoFromQueue(c *echo.Context) error {
	id := c.Param("id")
	res, _, err := s.undo(c, id)
	if err != nil {
		return s.refusedUndo(c, err)
	}
	text := "Undone: the draft for " + s.customerOf(res.Draft.EventKey) + " waits for approval again."
	if res.What == review.UndoApproval {
		text = "Undone: the reply to " + s.customerOf(res.Draft.EventKey) + " was not sent, and the draft waits for approval again."
	}
	return s.answerUndo(c, res.Draft.ID, text)
}

// reopenPage answers POST /handoffs/{key}/reopen from the stack: the close
// of the lead undone, answered as undoFromQueue answers.
func (s *Server) reopenPage(c *echo.Context) error {
	key, action, err := splitAction(c.Param("*"), "there is no such lead action")
	if err != nil {
		return err
	}
	if action != "reopen" {
		return errorf(http.StatusNotFound, "there is no lead action %q here; use reopen", action)
	}
	res, _, err := s.reopen(c, key)
	if err != nil {
		return s.refusedUndo(c, err)
	}
	text := "Undone: " + s.customerOf(res.Lead.LastEventKey) + " is open again"
	id := ""
	switch {
	case res.Draft != nil:
		text += ", and the draft waits for approval."
		id = res.Draft.ID
	case res.Job != nil:
		text += "; a draft is being written."
	default:
		text += "."
	}
	return s.answerUndo(c, id, text)
}

// refusedUndo answers an undo the store refused: htmx gets the stack with
// the refusal's sentence (409) in place of the stack; anything else, and
// every other error, is answered as any error.
func (s *Server) refusedUndo(c *echo.Context, err error) error {
	var refused *delivery.UndoError
	if !isHX(c) || !errors.As(err, &refused) {
		return err
	}
	_, msg := answerFor(err)
	st, serr := s.undoStackFor(c, c.FormValue("from") == "queue", s.formFilter(c), &views.Notice{Tone: "error", Text: msg})
	if serr != nil {
		return serr
	}
	h := c.Response().Header()
	h.Set("HX-Retarget", "#undo-stack")
	h.Set("HX-Reswap", "outerHTML")
	return render(c, http.StatusConflict, views.UndoAnswer(*st))
}

// answerUndo answers an undo that took something back, saying text: the
// card of draft id (waiting again; "" when there is none) on the queue,
// else the stack; without htmx, the draft's card (or the queue) as a page,
// the sentence in the stack.
func (s *Server) answerUndo(c *echo.Context, id, text string) error {
	fromQueue := c.FormValue("from") == "queue"
	f := s.formFilter(c)
	if !isHX(c) {
		s.setFlash(c, text)
		return c.Redirect(http.StatusSeeOther, f.URL(id))
	}
	if !fromQueue {
		st, err := s.undoStackFor(c, false, f, &views.Notice{Tone: "ok", Text: text})
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.UndoAnswer(*st))
	}
	v, err := newQueueView(who(c), f.Owner, f.Channel, f.Cursor)
	if err != nil {
		return err
	}
	v.only = s.only(c)
	v, page, next, err := s.answerPage(v)
	if err != nil {
		return err
	}
	var card views.DraftCard
	d, derr := s.st.Draft(id)
	switch i := slices.IndexFunc(page, func(d store.Draft) bool { return d.ID == id }); {
	case i >= 0:
		card, err = s.pendingCard(c, v, page, next, i, page[i])
	case id != "" && derr == nil && d.Status == store.DraftPending:
		card, err = s.pendingCard(c, v, page, next, -1, d)
	case len(page) > 0:
		j := s.unclaimed(c, page, 0)
		card, err = s.pendingCard(c, v, page, next, j, page[j])
	default:
		card, err = s.emptyCard(c, v, nil)
	}
	if err != nil {
		return err
	}
	card.Notice = &views.Notice{Tone: "ok", Text: text}
	st, err := s.undoStackFor(c, true, v.filter, nil)
	if err != nil {
		return err
	}
	if st == nil {
		st = &views.UndoStack{} // empty, so the entry just undone goes from the page
	}
	st.OOB = true
	card.Undo = &views.UndoToast{Stack: *st}
	return s.answerQueue(c, v, page, card, http.StatusOK)
}

// formFilter is the queue's view an undo's form names.
func (s *Server) formFilter(c *echo.Context) views.QueueFilter {
	return views.QueueFilter{Owner: c.FormValue("owner"), Channel: c.FormValue("channel"), Cursor: c.FormValue("cursor")}
}

// undoStackPage answers GET /undo?queue=&owner=&channel=&cursor=: the
// stack alone, its poll while an entry is live.
func (s *Server) undoStackPage(c *echo.Context) error {
	f := views.QueueFilter{Owner: c.QueryParam("owner"), Channel: c.QueryParam("channel"), Cursor: c.QueryParam("cursor")}
	st, err := s.undoStackFor(c, c.QueryParam("queue") == "1", f, nil)
	if err != nil {
		return err
	}
	if st == nil {
		st = &views.UndoStack{}
	}
	return render(c, http.StatusOK, views.UndoAnswer(*st))
}

// undoStackFor reads the stack of the person asking (nil when there is
// nothing to show: no entry, no notice), with notice n. queue and f say
// whether it is on the approval queue, and which view of it.
func (s *Server) undoStackFor(c *echo.Context, queue bool, f views.QueueFilter, n *views.Notice) (*views.UndoStack, error) {
	p := who(c)
	if p == nil {
		return nil, nil
	}
	now := s.now()
	us, err := review.New(s.st, s.cfg).Undoable(p.Name, now)
	if err != nil {
		return nil, err
	}
	vis := s.visible(c)
	st := &views.UndoStack{Notice: n, CSRF: csrfOf(c), Queue: queue, Filter: f}
	for _, u := range us {
		if !vis.Key(u.Lead.Key) {
			continue // a client no longer theirs
		}
		e := views.UndoEntry{What: u.What, Name: shortName(views.LeadName(u.Event, u.Lead)), Left: u.Until.Sub(now)}
		if u.What == review.UndoClose {
			e.Action = "/handoffs/" + url.PathEscape(u.Lead.Key) + "/reopen"
			e.Open = views.EventURL(u.Lead.LastEventKey)
		} else {
			e.Action = "/drafts/" + url.PathEscape(u.Draft.ID) + "/undo"
			e.Open = views.EventURL(u.Draft.EventKey)
		}
		st.Entries = append(st.Entries, e)
	}
	if len(st.Entries) == 0 && st.Notice == nil {
		return nil, nil
	}
	return st, nil
}

// undoToast is the stack to swap in beside the answer to a decision on
// draft decided, when the decision is one the person can undo (its entry
// is on the stack); nil otherwise (approved by someone else or at once).
func (s *Server) undoToast(c *echo.Context, v queueView, decided store.Draft) *views.UndoToast {
	st, err := s.undoStackFor(c, true, v.filter, nil)
	if err != nil || st == nil {
		return nil
	}
	own := "/drafts/" + url.PathEscape(decided.ID) + "/undo"
	if !slices.ContainsFunc(st.Entries, func(e views.UndoEntry) bool { return e.Action == own }) {
		return nil
	}
	st.OOB = true
	return &views.UndoToast{Stack: *st}
}

// undoOOB is the stack to swap in beside a queue answer that decided
// several drafts (a selection); nil when it has nothing.
func (s *Server) undoOOB(c *echo.Context, v queueView) *views.UndoToast {
	st, err := s.undoStackFor(c, true, v.filter, nil)
	if err != nil || st == nil {
		return nil
	}
	st.OOB = true
	return &views.UndoToast{Stack: *st}
}

// customerOf names the customer of the lead of event key, as the queue
// does (views.LeadName); "the customer" when neither can be read.
func (s *Server) customerOf(key string) string {
	ev, err := s.st.EventByKey(key)
	if err != nil {
		return "the customer"
	}
	h, _ := s.st.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
	return shortName(views.LeadName(ev, h))
}

// shortName keeps a customer's name to a line's worth (a name is what its
// message gave: it can be anything).
func shortName(name string) string {
	const most = 60
	if utf8.RuneCountInString(name) <= most {
		return name
	}
	r := []rune(name)
	return strings.TrimSpace(string(r[:most])) + "…"
}

// flashCookie carries the one sentence an action answers with across its
// redirect (a lead action, an undo without htmx) to the next page's stack.
const flashCookie = "handoff_flash"

// setFlash leaves text for the next page the person sees.
func (s *Server) setFlash(c *echo.Context, text string) {
	if len(text) > 1000 {
		text = text[:1000]
	}
	c.SetCookie(&http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(text)), Path: "/", MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.https(),
	})
}

// takeFlash reads the sentence setFlash left, and clears it: only a
// page's layout takes it (s.layout), never a poll.
func (s *Server) takeFlash(c *echo.Context) string {
	ck, err := c.Cookie(flashCookie)
	if err != nil || ck.Value == "" {
		return ""
	}
	c.SetCookie(&http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.https()})
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || !utf8.Valid(b) {
		return ""
	}
	return string(b)
}

// layoutUndo is the stack of a dashboard page (s.layout), with the
// sentence a redirect left; on the queue (active "drafts") with its view.
func (s *Server) layoutUndo(c *echo.Context, active string) (*views.UndoStack, error) {
	var n *views.Notice
	if text := s.takeFlash(c); text != "" {
		n = &views.Notice{Tone: "ok", Text: text}
	}
	f := views.QueueFilter{Owner: c.QueryParam("owner"), Channel: c.QueryParam("channel"), Cursor: c.QueryParam("cursor")}
	return s.undoStackFor(c, active == "drafts", f, n)
}
