package web

import (
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// maxDecided bounds the drafts one selection decides.
const maxDecided = 100

// decideSelected answers POST /drafts/selected (form: id… , action approve
// or reject, reason, owner, channel, cursor): every ticked draft approved
// (as written) or rejected, each in its own transaction through the same
// review.Approve / review.Reject as one draft, so a draft decided or
// superseded meanwhile is refused alone and the others still go. The
// answer is the queue (htmx: the next card and the list) saying how many
// were decided and which were not, and why.
func (s *Server) decideSelected(c *echo.Context) error {
	v, err := newQueueView(who(c), c.FormValue("owner"), c.FormValue("channel"), c.FormValue("cursor"))
	if err != nil {
		return err
	}
	v.only = s.only(c)
	form, err := c.FormValues()
	if err != nil {
		return errorf(http.StatusBadRequest, "the form cannot be read: %v", err)
	}
	action := c.FormValue("action")
	if action != "approve" && action != "reject" {
		return errorf(http.StatusBadRequest, "action %q is neither approve nor reject", action)
	}
	ids := slices.Compact(slices.Sorted(slices.Values(form["id"])))
	if len(ids) > 0 && ids[0] == "" { // an empty box's value sorts first
		ids = ids[1:]
	}
	switch {
	case len(ids) == 0:
		return errorf(http.StatusBadRequest, "no draft is selected; tick the drafts to %s first", action)
	case len(ids) > maxDecided:
		return errorf(http.StatusBadRequest, "%d drafts are selected; decide at most %d at a time", len(ids), maxDecided)
	}
	reason := c.FormValue("reason")
	if action == "reject" {
		if err := checkReason(reason); err != nil {
			return err // one answer for the selection, not one refusal per draft
		}
	}
	sel := views.Selection{Action: action}
	known := 0
	for _, id := range ids {
		d, err := s.st.Draft(id)
		if errors.Is(err, store.ErrNotFound) || err == nil && v.only != nil && !v.only.Draft(d) {
			sel.Refused = append(sel.Refused, views.Refusal{ID: id, Why: "there is no such draft"})
			continue // another client's is as absent as one that never was
		}
		if err != nil {
			return err
		}
		known++
		why, err := s.decideOne(c, id, action, reason)
		if err != nil {
			return err
		}
		if why != "" {
			sel.Refused = append(sel.Refused, views.Refusal{ID: id, Why: why})
			continue
		}
		sel.Done = append(sel.Done, id)
		s.claims.release(id)
	}
	if known == 0 {
		return errorf(http.StatusNotFound, "there is no such draft")
	}
	if !isHX(c) {
		return s.queuePage(c, v, "", &sel)
	}
	return s.answerSelection(c, v, &sel)
}

// decideOne approves or rejects draft id in its own transaction; why is
// the sentence of a refusal (decided already, superseded, no contact),
// "" when this call decided it. err is only what no person can act on.
func (s *Server) decideOne(c *echo.Context, id, action, reason string) (why string, err error) {
	if action == "reject" {
		res, err := s.reject(c, id, decisionReason{text: reason})
		switch {
		case err != nil:
			return refusal(err)
		case !res.Decided:
			return "already rejected" + decidedBy(res.Decision), nil
		}
		return "", nil
	}
	res, err := s.approve(c, id, "", decisionReason{})
	switch {
	case err != nil:
		return refusal(err)
	case !res.Created:
		return "already approved" + decidedBy(res.Draft.Decision), nil
	}
	return "", nil
}

// decidedBy says " by Dana at 10:04:05 UTC" of an earlier decision.
func decidedBy(d *store.Decision) string {
	if d == nil {
		return ""
	}
	return " by " + d.By + " at " + d.At.UTC().Format("15:04:05 UTC")
}

// refusal turns a decision's error into its sentence when it is one a
// person can read (a 4xx: a conflict, a superseded draft, no contact);
// anything else stays an error.
func refusal(err error) (string, error) {
	status, msg := answerFor(err)
	if status >= 500 {
		return "", err
	}
	return msg, nil
}

// answerSelection answers a selection made through htmx: the card of the
// first waiting draft nobody else has open (or the empty card) with what
// the selection did, and the list and the nav count out of band.
func (s *Server) answerSelection(c *echo.Context, v queueView, sel *views.Selection) error {
	v, page, next, err := s.answerPage(v)
	if err != nil {
		return err
	}
	var card views.DraftCard
	if len(page) > 0 {
		i := s.unclaimed(c, page, 0)
		if card, err = s.pendingCard(c, v, page, next, i, page[i]); err != nil {
			return err
		}
	} else if card, err = s.emptyCard(c, v, nil); err != nil {
		return err
	}
	card.Selection = sel
	card.Undo = s.undoOOB(c, v) // the approvals just held, on the undo stack (undo.go)
	return s.answerQueue(c, v, page, card, http.StatusOK)
}
