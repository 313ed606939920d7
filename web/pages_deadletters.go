package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// deadLettersPageSize is how many rows one page of the table holds.
const deadLettersPageSize = 50

// deadLettersPage answers GET
// /dead-letters?kind=&channel=&error=&older_than=&after=|before=: one page
// of the table, its neighbours' cursors, and the counts, each item once
// (the replies to reconcile are on /reconcile).
func (s *Server) deadLettersPage(c *echo.Context) error {
	q := filterFrom(c.QueryParam)
	q.noReconcile = true
	vf := views.DeadLetterFilter{Kind: q.Kind, Channel: q.Channel, Error: q.Error, OlderThan: q.OlderThan}
	f, err := s.storeFilter(q)
	if err != nil {
		return err
	}
	page, err := s.outbox.DeadLetterPage(f, c.QueryParam("after"), c.QueryParam("before"), deadLettersPageSize)
	if errors.Is(err, store.ErrBadCursor) {
		return errorf(http.StatusBadRequest, "that page of the list no longer exists or never did; start again from the first page")
	}
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Dead letters", "dead-letters")
	if err != nil {
		return err
	}
	list := views.DeadLetterList{Filter: vf, Items: page.Items, Next: page.Next, Prev: page.Prev, Lookup: s.lookupProviders()}
	for _, ch := range s.cfg.Channels {
		list.Channels = append(list.Channels, ch.Name)
	}
	list.Notice = s.deadLetterNotice(c.QueryParam("done"), c.QueryParam("action"))
	return render(c, http.StatusOK, views.DeadLettersPage(l, list))
}

// deadLetterPage answers GET /dead-letters/{id}: one item with everything
// known about it (attempts, side effects, earlier replays) and its actions.
func (s *Server) deadLetterPage(c *echo.Context) error {
	id := c.Param("*")
	dl, err := s.outbox.DeadLetter(id)
	var state *store.StateError
	if errors.As(err, &state) {
		err = fmt.Errorf("%w: %w", store.ErrNotFound, err) // a reply settled meanwhile is off the list
	}
	if err != nil {
		return missing(err, "there is no dead letter %q", id)
	}
	l, err := s.layout(c, "Dead letter "+id, "dead-letters")
	if err != nil {
		return err
	}
	item := views.DeadLetterItem{Item: dl, Notice: s.deadLetterNotice(c.QueryParam("done"), c.QueryParam("action"))}
	if dl.Outbox != nil {
		item.Lookup = delivery.Lookable(*dl.Outbox, s.providers[dl.Outbox.Provider])
	}
	return render(c, http.StatusOK, views.DeadLetterItemPage(l, item))
}

// deadLetterNotice words what happened to item id after an action without
// htmx. It is read back from the item's record, so a crafted link cannot
// make the page say anything the record does not bear out.
func (s *Server) deadLetterNotice(id, action string) *views.Notice {
	if id == "" {
		return nil
	}
	var replays []store.Replay
	var dismissed *store.Dismissal
	if j, err := s.st.Job(id); err == nil {
		replays, dismissed = j.Replays, j.Dismissed
	} else if o, err := s.st.OutboxRow(id); err == nil {
		replays, dismissed = o.Replays, o.Dismissed
	} else {
		return nil
	}
	switch {
	case action == "lookup":
		return s.lookedNotice(id)
	case action == "replay" && len(replays) > 0:
		r := replays[len(replays)-1]
		n := replayNotice(id, r)
		return &n
	case action == "cancel" && dismissed != nil:
		return &views.Notice{Tone: "ok", Text: id + " was cancelled by " + dismissed.By + ": " + dismissed.Reason}
	}
	return nil
}

func replayNotice(id string, r store.Replay) views.Notice {
	text := id + " was replayed by " + r.By
	if r.Regenerate {
		text += ", to be drafted afresh"
	}
	if r.Confirmed {
		text += ", confirmed after a check"
	}
	return views.Notice{Tone: "ok", Text: text + ". Follow it on its timeline."}
}

// deadLetterSubmit answers POST /dead-letters/{id}/replay (form: confirm,
// regenerate) and /dead-letters/{id}/cancel (form: reason), through the
// same code as the API. htmx gets the item's replacement; a plain form
// goes back to the list.
func (s *Server) deadLetterSubmit(c *echo.Context) error {
	id, action, err := splitAction(c.Param("*"), "use /dead-letters/{id}/replay or /{id}/cancel")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var notice views.Notice
	switch action {
	case "replay":
		regenerate := false
		if v := c.FormValue("regenerate"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errorf(http.StatusBadRequest, "regenerate must be true or false, not %q", v)
			}
			regenerate = b
		}
		confirm := strings.TrimSpace(c.FormValue("confirm"))
		if _, err := s.replayItem(ctx, id, confirm, regenerate, actor(c), c.RealIP()); err != nil {
			return err
		}
		notice = replayNotice(id, store.Replay{By: actor(c), Regenerate: regenerate, Confirmed: confirm == id})
	case "cancel":
		if err := s.cancelItem(ctx, id, c.FormValue("reason"), actor(c), c.RealIP()); err != nil {
			return err
		}
		notice = views.Notice{Tone: "ok", Text: id + " was cancelled by " + actor(c) + ": " + strings.TrimSpace(c.FormValue("reason"))}
	case "lookup":
		if _, err := s.lookUp(c, id); err != nil {
			return err
		}
		back := views.DeadLetterURL(id)
		if c.FormValue("back") == "reconcile" {
			back = "/reconcile"
		}
		return c.Redirect(http.StatusSeeOther, back+"?"+url.Values{"done": {id}, "action": {action}}.Encode())
	default:
		return errorf(http.StatusNotFound, "%q is not an action on a dead letter (use replay, cancel or lookup)", action)
	}
	if isHX(c) {
		return render(c, http.StatusOK, views.DeadLetterDone(id, notice))
	}
	return c.Redirect(http.StatusSeeOther, "/dead-letters?"+url.Values{"done": {id}, "action": {action}}.Encode())
}

// lookedNotice words what the last lookup of reply id found, read back
// from the row (so a crafted link says only what the row bears out).
func (s *Server) lookedNotice(id string) *views.Notice {
	o, err := s.st.OutboxRow(id)
	if err != nil || len(o.Attempts) == 0 || o.Attempts[len(o.Attempts)-1].Action != "lookup" {
		return nil
	}
	switch a := o.Attempts[len(o.Attempts)-1]; a.Outcome {
	case "sent":
		return &views.Notice{Tone: "ok", Text: "The provider has reply " + id + " as " + a.ProviderID + ": it is recorded as sent."}
	case "not_found":
		return &views.Notice{Tone: "ok", Text: "The provider has no record of reply " + id + ": it is recorded as failed, and a replay sends it once."}
	default:
		return &views.Notice{Tone: "warn", Text: "The lookup of reply " + id + " could not tell: " + a.Error + ". It still needs a person."}
	}
}

// replaySelectedSubmit answers POST /dead-letters/replay-selected (form:
// id, once per ticked row): a bulk replay of those items, started as the
// person. htmx gets the status, which then polls; a plain form goes to the
// run's page.
func (s *Server) replaySelectedSubmit(c *echo.Context) error {
	form, err := c.FormValues()
	if err != nil {
		return errorf(http.StatusBadRequest, "the form could not be read: %v", err)
	}
	run, err := s.startSelected(c.Request().Context(), form["id"], actor(c), c.RealIP())
	if err != nil {
		return err
	}
	if isHX(c) {
		return render(c, http.StatusOK, views.BulkStatusFragment(bulkView(statusOf(run), csrfOf(c))))
	}
	return c.Redirect(http.StatusSeeOther, views.BulkStatus{ID: run.ID}.URL())
}

// bulkView is a run's status for the page.
func bulkView(st bulkStatus, csrf string) views.BulkStatus {
	b := views.BulkStatus{ID: st.ID, State: st.State, Total: st.Total, Replayed: st.Replayed, CSRF: csrf}
	for _, it := range st.Skipped {
		b.Skipped = append(b.Skipped, views.BulkItem{ID: it.ID, Why: it.Why})
	}
	for _, it := range st.Failed {
		b.Failed = append(b.Failed, views.BulkItem{ID: it.ID, Why: it.Why})
	}
	return b
}

// bulkReplaySubmit answers POST /dead-letters/replay (form: the list's
// filters): the bulk replay of the API, started as the person. htmx gets
// the status, which then polls; a plain form goes to the run's page.
func (s *Server) bulkReplaySubmit(c *echo.Context) error {
	f := filterFrom(c.FormValue)
	f.noReconcile = true // what the page lists
	run, err := s.startBulk(c.Request().Context(), f, actor(c), c.RealIP())
	if err != nil {
		return err
	}
	if isHX(c) {
		return render(c, http.StatusOK, views.BulkStatusFragment(bulkView(statusOf(run), csrfOf(c))))
	}
	return c.Redirect(http.StatusSeeOther, views.BulkStatus{ID: run.ID}.URL())
}

// bulkStatusPage answers GET /dead-letters/bulk/{id}: the fragment htmx
// polls, or a page of its own.
func (s *Server) bulkStatusPage(c *echo.Context) error {
	run, err := s.lookupBulk(c.Param("id"))
	if err != nil {
		return err
	}
	b := bulkView(statusOf(run), csrfOf(c))
	if isHX(c) {
		return render(c, http.StatusOK, views.BulkStatusFragment(b))
	}
	l, err := s.layout(c, "Bulk replay", "dead-letters")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.BulkPage(l, b))
}

// bulkCancelSubmit answers POST /dead-letters/bulk/{id}/cancel: the item
// under way finishes, no further item starts.
func (s *Server) bulkCancelSubmit(c *echo.Context) error {
	run, err := s.cancelBulk(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if isHX(c) {
		return render(c, http.StatusOK, views.BulkStatusFragment(bulkView(statusOf(run), csrfOf(c))))
	}
	return c.Redirect(http.StatusSeeOther, views.BulkStatus{ID: run.ID}.URL())
}
