package web

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// draftPage is the answer of GET /api/v1/drafts.
type draftPage struct {
	Drafts     []store.Draft `json:"drafts"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// listDrafts answers GET /api/v1/drafts?status=&limit=&cursor=: oldest first
// (newest last), a page at a time; the waiting drafts in the queue's order
// (open reply windows soonest to close first).
func (s *Server) listDrafts(c *echo.Context) error {
	status := store.DraftStatus(c.QueryParamOr("status", string(store.DraftPending)))
	if !slices.Contains(store.DraftStatuses, status) {
		return errorf(http.StatusBadRequest, "status %q is not one of pending_approval, approved, rejected, superseded", status)
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	after, ok := draftCursor(cursor, status)
	if !ok {
		return errorf(http.StatusBadRequest, "cursor %q is not a cursor this list gave out for status %s", cursor, status)
	}
	if status == store.DraftPending && after != nil && !store.QueueCursorOK(after) {
		return errorf(http.StatusBadRequest, "cursor %q is not a cursor this list gave out for status %s", cursor, status)
	}
	f := store.DraftFilter{Status: status, After: after, Limit: limit}
	if status == store.DraftPending {
		// Open reply windows soonest to close first, then oldest first (window.go).
		f.Windows, f.Now = s.windows(), s.now()
	}
	if only := s.only(c); only != nil {
		f.Keep = only.Draft // another client's drafts are not listed
	}
	page, next, err := s.st.Drafts(f)
	if err != nil {
		return err
	}
	out := draftPage{Drafts: page}
	if next != nil {
		out.NextCursor = base64.RawURLEncoding.EncodeToString(next)
	}
	return c.JSON(http.StatusOK, out)
}

// draftCursor decodes a cursor of the drafts of one status, as the API
// and the queue give it out: "" is the first page (nil); ok is false when
// v is not such a cursor.
func draftCursor(v string, status store.DraftStatus) (after []byte, ok bool) {
	if v == "" {
		return nil, true
	}
	after, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || !strings.HasPrefix(string(after), string(status)+"\x00") {
		return nil, false
	}
	return after, true
}

// approveBody is the optional body of an approval.
type approveBody struct {
	Text *string `json:"text"`
	// ReasonCode and Reason say why the text was edited (kept with an
	// edit only): one of store.ReasonCodes, and the person's words.
	ReasonCode string `json:"reason_code"`
	Reason     string `json:"reason"`
}

// approveAnswer says what an approval did, and who approved first.
type approveAnswer struct {
	Status     string `json:"status"` // approved (this call) or already_approved
	DraftID    string `json:"draft_id"`
	OutboxID   string `json:"outbox_id"`
	ApprovedBy string `json:"approved_by"`
	ApprovedAt string `json:"approved_at"`
	Edited     bool   `json:"edited"`
	// UndoUntil is when the reply goes out: until then POST
	// /api/v1/drafts/{id}/undo takes the approval back. Empty: sent at once.
	UndoUntil string          `json:"undo_until,omitempty"`
	Outbox    *store.Outbox   `json:"outbox"`
	Decision  *store.Decision `json:"decision"`
}

// approveDraft answers POST /api/v1/drafts/{id}/approve.
func (s *Server) approveDraft(c *echo.Context) error {
	var body approveBody
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	text := ""
	if body.Text != nil {
		var err error
		if text, err = replyText(*body.Text, "text is empty; leave it out to approve the draft as written"); err != nil {
			return err
		}
	}
	res, err := s.approve(c, c.Param("id"), text, decisionReason{code: body.ReasonCode, text: body.Reason})
	var superseded *store.SupersededError
	if errors.As(err, &superseded) {
		// The one 409 that names where to go: the turn's current draft.
		return c.JSON(http.StatusConflict, supersededAnswer{Error: superseded.Error(), DraftID: superseded.Draft.ID, CurrentDraftID: superseded.Current})
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, approvedAnswer(res))
}

// supersededAnswer is the 409 of an approval of a superseded draft.
type supersededAnswer struct {
	Error          string `json:"error"`
	DraftID        string `json:"draft_id"`
	CurrentDraftID string `json:"current_draft_id,omitempty"` // empty: the turn has ended
}

// replyText checks an edited reply (API and dashboard alike): not empty
// (empty says so with ifEmpty), at most maxReply bytes.
func replyText(text, ifEmpty string) (string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return "", errorf(http.StatusBadRequest, "%s", ifEmpty)
	}
	if len(text) > maxReply {
		return "", errorf(http.StatusBadRequest, "the reply is %d bytes; a reply may be at most %d", len(text), maxReply)
	}
	return text, nil
}

// splitAction splits "{id}/{action}" (ids such as outbox ids may hold '/',
// so the action is the last segment).
func splitAction(rest, usage string) (id, action string, err error) {
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", errorf(http.StatusNotFound, "%s", usage)
	}
	return rest[:i], rest[i+1:], nil
}

// decisionReason is a person's reason for an edit or a rejection: a code of
// store.ReasonCodes (one tap) and their own words, both optional.
type decisionReason struct{ code, text string }

// check refuses a code not in the list, and words over 1000 bytes.
func (w decisionReason) check() error {
	if err := review.CheckReasonCode(w.code); err != nil {
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	return checkReason(w.text)
}

// approve runs the one idempotent approval shared by the API and the
// dashboard; w is kept when the text was edited (review measures how much).
func (s *Server) approve(c *echo.Context, id, text string, w decisionReason) (review.Approved, error) {
	if err := w.check(); err != nil {
		return review.Approved{}, err
	}
	res, err := review.New(s.st, s.cfg).Approve(c.Request().Context(), id, store.Decision{
		By: actor(c), At: s.now().UTC(), From: c.RealIP(), Text: text, ReasonCode: w.code, Reason: strings.TrimSpace(w.text),
	})
	if err != nil {
		return review.Approved{}, missing(err, "there is no draft %q", id)
	}
	s.claims.release(id) // decided, here or earlier: nobody is "looking at" it any more
	if res.Created {
		s.jobs.Wake()
	}
	return res, nil
}

func approvedAnswer(res review.Approved) approveAnswer {
	a := approveAnswer{Status: "approved", DraftID: res.Draft.ID, OutboxID: res.Outbox.ID, Outbox: &res.Outbox, Decision: res.Draft.Decision}
	if !res.Created {
		a.Status = "already_approved"
	}
	if d := res.Draft.Decision; d != nil {
		a.ApprovedBy, a.ApprovedAt, a.Edited = d.By, d.At.Format("2006-01-02T15:04:05Z07:00"), d.Edited
	}
	if u := res.Outbox.UndoUntil; !u.IsZero() {
		a.UndoUntil = u.UTC().Format(time.RFC3339Nano)
	}
	return a
}

// rejectBody is the optional body of a rejection.
type rejectBody struct {
	Reason     string `json:"reason"`
	ReasonCode string `json:"reason_code"` // one of store.ReasonCodes
}

// rejectAnswer says what a rejection did, and who rejected first.
type rejectAnswer struct {
	Status     string          `json:"status"` // rejected (this call) or already_rejected
	DraftID    string          `json:"draft_id"`
	RejectedBy string          `json:"rejected_by"`
	RejectedAt string          `json:"rejected_at"`
	Decision   *store.Decision `json:"decision"`
}

// rejectDraft answers POST /api/v1/drafts/{id}/reject.
func (s *Server) rejectDraft(c *echo.Context) error {
	var body rejectBody
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	res, err := s.reject(c, c.Param("id"), decisionReason{code: body.ReasonCode, text: body.Reason})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rejectedAnswer(res))
}

func rejectedAnswer(res review.Rejected) rejectAnswer {
	a := rejectAnswer{Status: "rejected", DraftID: res.ID, Decision: res.Decision}
	if !res.Decided {
		a.Status = "already_rejected"
	}
	if d := res.Decision; d != nil {
		a.RejectedBy, a.RejectedAt = d.By, d.At.Format("2006-01-02T15:04:05Z07:00")
	}
	return a
}

// checkReason refuses a rejection's reason over 1000 bytes.
func checkReason(reason string) error {
	if len(reason) > 1000 {
		return errorf(http.StatusBadRequest, "the reason is %d bytes; keep it under 1000", len(reason))
	}
	return nil
}

// reject is the one rejection shared by the API and the dashboard; the
// answer says whether this call made the decision.
func (s *Server) reject(c *echo.Context, id string, w decisionReason) (review.Rejected, error) {
	if err := w.check(); err != nil {
		return review.Rejected{}, err
	}
	res, err := review.New(s.st, s.cfg).Reject(c.Request().Context(), id, store.Decision{
		By: actor(c), At: s.now().UTC(), From: c.RealIP(), Reason: strings.TrimSpace(w.text), ReasonCode: w.code,
	})
	if err != nil {
		return review.Rejected{}, missing(err, "there is no such draft")
	}
	s.claims.release(id)
	return res, nil
}

// leadMessage says what a lead action did, in words, naming the customer:
// the dashboard's sentence after it (answerLeadAction) and the API's
// message (api: the undo is named by its API route, not the stack's
// button).
func (s *Server) leadMessage(key string, body leadBody, ans leadActionAnswer, api bool) string {
	name := s.customerOf(key)
	var text string
	switch ans.Status {
	case "approved":
		undoHow := "Undo below"
		if api && ans.Draft != nil {
			undoHow = "POST /api/v1/drafts/" + ans.Draft.ID + "/undo"
		}
		text = "Your reply to " + name + " is on its way."
		if o := ans.Outbox; o != nil && !o.UndoUntil.IsZero() {
			text = "Your reply to " + name + " goes out at " + o.UndoUntil.UTC().Format("15:04:05 UTC") + "; until then " + undoHow + " takes it back."
		}
	case "drafting":
		text = "A new draft for " + name + " is being written"
		if instr := strings.TrimSpace(body.Instruction); instr != "" {
			text += " with your instruction “" + shortName(instr) + "”"
		}
		text += "; it takes the old draft's place in the queue when it is ready."
		if s.cfg.Drafter.Kind == "template" {
			text += " The template drafter ignores instructions and writes the same text again, so the new draft will read like the old one."
		}
	case "closed":
		text = "Closed " + name + " without a reply."
		if s.cfg.UndoWindow > 0 {
			undoHow := "Undo below"
			if api && ans.Handoff != nil {
				undoHow = "POST /api/v1/handoffs/" + url.PathEscape(ans.Handoff.Key) + "/reopen"
			}
			text += " " + undoHow + " reopens it for the next " + views.Age(s.cfg.UndoWindow) + "."
		}
	case "already_closed":
		text = name + " was closed already."
		if h := ans.Handoff; h != nil && h.Closed != nil {
			text = name + " was closed already, by " + h.Closed.By + " at " + h.Closed.At.UTC().Format("15:04:05 UTC") + ": " + h.Closed.Reason
		}
	}
	return text
}

// answerLeadAction answers a lead action made from a page (leadActionPage:
// "Send my reply", "Draft again", "Close without reply"): it says what the
// action did, in words, in the next page's undo stack (setFlash), and goes
// back to the page the form was on — on the queue, to the next draft of
// another customer, so the queue moves on rather than showing the card of
// a draft the action just replaced or closed.
func (s *Server) answerLeadAction(c *echo.Context, key, action string, body leadBody, ans leadActionAnswer) error {
	if text := s.leadMessage(key, body, ans, false); text != "" {
		s.setFlash(c, text)
	}
	back := c.FormValue("back")
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.Contains(back, "\\") {
		back = views.EventURL(key) // only a path of this site; never an open redirect
	}
	return c.Redirect(http.StatusSeeOther, s.movedOn(c, back, key))
}

// movedOn is where an action on the lead of event key goes back to: back
// itself, unless it is the queue, where it is the next waiting draft of
// another customer after the one the queue showed (nobody else's open one
// when it can: claims.go), or the queue's first page.
func (s *Server) movedOn(c *echo.Context, back, key string) string {
	u, err := url.Parse(back)
	if err != nil || u.Path != "/drafts" {
		return back
	}
	q := u.Query()
	v, err := newQueueView(who(c), q.Get("owner"), q.Get("channel"), q.Get("cursor"))
	if err != nil {
		return "/drafts"
	}
	v.only = s.only(c)
	v, page, _, err := s.answerPage(v)
	if err != nil {
		return v.filter.URL("")
	}
	lead := ""
	if ev, err := s.st.EventByKey(key); err == nil {
		lead = store.LeadKey(ev.Channel, ev.ConversationID)
	}
	others := slices.DeleteFunc(page, func(d store.Draft) bool { return store.LeadKey(d.Channel, d.ConversationID) == lead })
	if len(others) == 0 {
		return v.filter.URL("")
	}
	i := 0
	if old, err := s.st.Draft(q.Get("id")); err == nil {
		if j := slices.IndexFunc(others, func(d store.Draft) bool { return s.later(d, old) }); j >= 0 {
			i = j
		}
	}
	return v.filter.URL(others[s.unclaimed(c, others, i)].ID)
}

// supersededCard makes card, the decided card of superseded draft d, say
// whose draft it was and where their current one is: its notice names the
// customer (a refusal keeps its tone), and "Next draft →" goes to that
// customer's current draft while it waits, rather than to another
// customer's.
func (s *Server) supersededCard(card *views.DraftCard, v queueView, d store.Draft) {
	name := s.customerOf(d.EventKey)
	tone := "warn"
	if card.Notice != nil {
		tone = card.Notice.Tone
	}
	text := name + " wrote again, so this draft no longer answers the conversation"
	var cur store.Draft
	err := s.st.View(func(tx *store.Tx) error {
		h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
		if err != nil {
			return err
		}
		id, err := tx.CurrentDraftID(h)
		if err != nil || id == "" {
			return err
		}
		cur, err = tx.Draft(id)
		if errors.Is(err, store.ErrNotFound) {
			cur, err = store.Draft{ID: id}, nil // not written yet
		}
		return err
	})
	switch {
	case err != nil || cur.ID == "":
		text += "; it has been answered or closed since."
	case cur.Status == store.DraftPending && (v.only == nil || v.only.Draft(cur)):
		text += ". Their current draft waits for approval: Next draft → opens it."
		card.Next = v.filter.URL(cur.ID)
	case cur.Status == "":
		text += "; their new draft is being written and comes into the queue when it is ready."
	default:
		text += "; their current draft is " + string(cur.Status) + "."
	}
	card.Notice = &views.Notice{Tone: tone, Text: text}
}
