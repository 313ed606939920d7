package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

const (
	// queuePage is how many waiting drafts the queue lists at a time.
	queuePage = 20
	// queueScan bounds how many drafts one request reads while filtering,
	// so a filter that matches little stays as fast with 100,000 drafts
	// waiting as with 10: the page then ends early with a cursor to go on.
	queueScan = 2000
	// earlierMessages is how many lines of a lead's conversation before
	// the turn (its messages and our replies) the card shows.
	earlierMessages = 8
	// maxReply is the longest reply a person may approve (as the API).
	maxReply = 4000
)

// queueView is one view of the approval queue: its filters and its page.
type queueView struct {
	filter views.QueueFilter // as asked (Owner may be "mine")
	after  []byte            // the decoded cursor; nil for the first page
	owner  string            // the owner to match; "" matches any
	none   bool              // "mine" for a person with no owner: matches nothing
	only   *store.Visible    // a person limited to clients: their channels (clients.go); nil: every channel
}

// newQueueView reads the queue's filters, from the query or a form.
func newQueueView(p *principal, owner, channel, cursor string) (queueView, error) {
	v := queueView{filter: views.QueueFilter{Owner: owner, Channel: channel, Cursor: cursor}, owner: owner}
	if owner == "mine" {
		v.owner, v.none = p.Owner, p.Owner == ""
	}
	after, ok := draftCursor(cursor, store.DraftPending)
	if !ok || after != nil && !store.QueueCursorOK(after) {
		return queueView{}, errorf(http.StatusBadRequest, "cursor %q is not a cursor this queue gave out", cursor)
	}
	v.after = after
	return v, nil
}

// filtered and keep leave v.none to pendingPage, which reads nothing then.
func (v queueView) filtered() bool { return v.owner != "" || v.filter.Channel != "" || v.only != nil }

func (v queueView) keep(d store.Draft) bool {
	return (v.owner == "" || d.Owner == v.owner) && (v.filter.Channel == "" || d.Channel == v.filter.Channel) && (v.only == nil || v.only.Draft(d))
}

// withCursor is the same view at another page.
func (v queueView) withCursor(after []byte) queueView {
	v.after, v.filter.Cursor = after, ""
	if after != nil {
		v.filter.Cursor = base64.RawURLEncoding.EncodeToString(after)
	}
	return v
}

// pendingPage returns up to n waiting drafts of view v, in the queue's
// order (open reply windows soonest to close first, then oldest first), and
// the cursor after the last one (nil at the end of the queue). Filters are
// applied here, over the store's pages; partial says the scan budget ran
// out before the page filled (next then continues the scan).
func (s *Server) pendingPage(v queueView, n int) (out []store.Draft, next []byte, partial bool, err error) {
	if v.none {
		return []store.Draft{}, nil, false, nil
	}
	// In reply-window order across the whole queue (window.go).
	f := store.DraftFilter{Status: store.DraftPending, After: v.after, Limit: n, Windows: s.windows(), Now: s.now()}
	if v.filtered() {
		f.Keep, f.Scan = v.keep, queueScan
	}
	return s.st.DraftsWhere(f)
}

// later reports whether a comes after b in the queue's order.
func (s *Server) later(a, b store.Draft) bool { return store.QueueLater(a, b, s.windows(), s.now()) }

// pendingCard builds the card of waiting draft d, which is page[i] (i is
// -1 when d is not on the page: its next is then the page's first).
func (s *Server) pendingCard(c *echo.Context, v queueView, page []store.Draft, next []byte, i int, d store.Draft) (views.DraftCard, error) {
	card := views.DraftCard{State: views.CardPending, Draft: d, Filter: v.filter, CSRF: csrfOf(c), Now: s.now()}
	if i > 0 {
		card.Prev = v.filter.URL(page[i-1].ID)
	}
	switch {
	case i+1 < len(page):
		card.Next = v.filter.URL(page[i+1].ID)
	case next != nil:
		card.Next = v.withCursor(next).filter.URL("")
	}
	cv, err := s.st.Card(d, earlierMessages)
	if err != nil {
		return card, err
	}
	ev := cv.Event
	card.Event, card.Turn, card.Handoff, card.Conversation = ev, cv.Turn, cv.Lead, cv.Conversation
	card.Stuck = leads.IsStuck(cv.Lead, card.Now, leads.StuckAfter(s.cfg))
	card.Lead = s.leadActionsOf(c, ev, cv.Lead, cv.Drafting, v.filter.URL(d.ID))
	card.Recipient = card.Lead.Recipient
	card.SMS = s.sendsSMS(d.Channel)
	card.Window = s.windowCard(cv.Lead, card.Now) // window.go
	card.Lead.WindowClosed = card.Window.Closed() // no Approve, no reply of one's own: the ways out only
	if p := who(c); p != nil {
		card.LookedBy = s.claims.look(d.ID, p.Name, s.now())
	}
	return card, nil
}

// sendsSMS reports whether channel replies through an SMS provider (twilio).
func (s *Server) sendsSMS(channel string) bool {
	ch, ok := s.cfg.Channel(channel)
	if !ok {
		return false
	}
	p, ok := s.cfg.Provider(ch.Provider)
	return ok && p.Kind == "twilio"
}

// leadActions says what a person can do to end the open turn of ev's
// lead, with forms that return to back.
func (s *Server) leadActions(c *echo.Context, ev store.Event, back string) (views.LeadActions, error) {
	h, err := s.st.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
	if err != nil {
		return views.LeadActions{}, err
	}
	drafting := false
	if h.TurnDraft != "" {
		err := s.st.View(func(tx *store.Tx) error { _, err := tx.LiveJob(store.KindDraft, h.TurnDraft); return err })
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return views.LeadActions{}, err
		}
		drafting = err == nil
	}
	a := s.leadActionsOf(c, ev, h, drafting, back)
	a.WindowClosed = s.windowCard(h, s.now()).Closed()
	return a, nil
}

// leadActionsOf is leadActions with the lead h and whether a draft job of
// its open turn is live (only ever true when h.TurnDraft is set) already read.
func (s *Server) leadActionsOf(c *echo.Context, ev store.Event, h store.Handoff, drafting bool, back string) views.LeadActions {
	a := views.LeadActions{EventKey: ev.Key, CSRF: csrfOf(c), Back: back}
	a.Recipient = review.Recipient(ev, h)
	a.Open = leads.TurnOpen(h)
	a.Waiting = len(h.TurnEvents)
	a.Drafting = drafting
	return a
}

// decidedCard says who decided d, and offers the next waiting draft.
func (s *Server) decidedCard(c *echo.Context, v queueView, d store.Draft, page []store.Draft, n *views.Notice) (views.DraftCard, error) {
	card := views.DraftCard{State: views.CardDecided, Draft: d, Filter: v.filter, CSRF: csrfOf(c), Now: s.now(), Notice: n}
	if card.Notice == nil {
		card.Notice = decisionNotice(d, "")
	}
	if len(page) > 0 {
		card.Next = v.filter.URL(page[0].ID)
	}
	ev, err := s.st.EventByKey(d.EventKey)
	card.Event = ev
	if err == nil && d.Status == store.DraftSuperseded {
		s.supersededCard(&card, v, d) // drafts.go: the customer named, their current draft linked
	}
	return card, err
}

// decisionNotice says who decided a draft and when; me is the person
// asking ("" when unknown), so a second approval reads "already".
func decisionNotice(d store.Draft, me string) *views.Notice {
	dec := d.Decision
	if dec == nil {
		return nil
	}
	verb := "approved"
	switch d.Status {
	case store.DraftRejected:
		verb = "rejected"
	case store.DraftSuperseded:
		text := "Superseded: the customer wrote again, so this draft no longer answers the conversation."
		if d.SupersededBy != "" {
			text += " The current draft is " + d.SupersededBy + "."
		}
		return &views.Notice{Tone: "warn", Text: text}
	}
	text := "Already " + verb + " by " + dec.By + " at " + dec.At.UTC().Format("15:04:05 UTC, 2 Jan") + "."
	if me != "" && dec.By == me {
		text = strings.ToUpper(verb[:1]) + verb[1:] + " by " + dec.By + " at " + dec.At.UTC().Format("15:04:05 UTC") + "."
	}
	if dec.Reason != "" {
		text += " Reason: " + dec.Reason
	}
	if me != "" && dec.By == me {
		return &views.Notice{Tone: "ok", Text: text}
	}
	return &views.Notice{Tone: "warn", Text: text}
}

// queueItems lists a page for the side of the queue.
func (s *Server) queueItems(v queueView, page []store.Draft, current string, now time.Time) ([]views.QueueItem, error) {
	lines, err := s.st.DraftLines(page)
	if err != nil {
		return nil, err
	}
	after := leads.StuckAfter(s.cfg)
	items := make([]views.QueueItem, 0, len(page))
	for i, d := range page {
		ev, h := lines[i].Event, lines[i].Lead
		items = append(items, views.QueueItem{
			ID: d.ID, Channel: d.Channel, Owner: d.Owner, Name: views.LeadName(ev, h),
			Age: views.Age(now.Sub(ev.ReceivedAt)), Line: views.FirstLine(ev.Text, 90),
			URL: v.filter.URL(d.ID), Current: d.ID == current, Stuck: leads.IsStuck(h, now, after),
		})
	}
	return items, nil
}

// queueMore says what waits after page, the list of view v: the number
// when v is the whole queue's first page (waiting drafts less the page),
// else -1; next is the cursor after the page (nil: none, or not known).
func (s *Server) queueMore(v queueView, page []store.Draft, next []byte, waiting int) views.QueueMore {
	m := views.QueueMore{N: -1}
	if v.after == nil && v.owner == "" && v.filter.Channel == "" && !v.none {
		m.N = max(waiting-len(page), 0) // waiting counts what the person sees, as v.only lists
	}
	if next != nil {
		m.Next = v.withCursor(next).filter.URL("")
	}
	return m
}

// owners are the routing owners the configuration can assign.
func (s *Server) owners() []string {
	out := []string{s.cfg.Routing.DefaultOwner}
	for _, r := range s.cfg.Routing.Rules {
		out = append(out, r.Owner)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// draftsPage answers GET /drafts?owner=&channel=&cursor=&id=: the approval
// queue, oldest first, showing draft id (or the page's first) as the card.
func (s *Server) draftsPage(c *echo.Context) error {
	v, err := newQueueView(who(c), c.QueryParam("owner"), c.QueryParam("channel"), c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	v.only = s.only(c)
	return s.queuePage(c, v, c.QueryParam("id"), nil)
}

// queuePage renders the queue of view v with draft id (or the page's
// first) as the card, and sel, what a selection just did, on it.
func (s *Server) queuePage(c *echo.Context, v queueView, id string, sel *views.Selection) error {
	p := who(c)
	page, next, partial, err := s.pendingPage(v, queuePage)
	if err != nil {
		return err
	}
	l, err := s.layout(c, "Drafts", "drafts")
	if err != nil {
		return err
	}
	card, err := s.focusCard(c, v, page, next, id)
	if err != nil {
		return err
	}
	card.Selection = sel
	drafting, err := s.st.DraftingFor(s.visible(c))
	if err != nil {
		return err
	}
	card.Drafting = &drafting
	if v.none {
		card.Notice = &views.Notice{Tone: "warn", Text: "Your account has no routing owner, so “mine” matches nothing; an admin can add a person with an owner on Users."}
	}
	items, err := s.queueItems(v, page, card.Draft.ID, l.Now)
	if err != nil {
		return err
	}
	q := views.DraftQueue{
		Filter: v.filter, Owners: s.owners(), HasOwner: p.Owner != "", Card: card, Items: items, Partial: partial,
		Drafting: drafting, CSRF: csrfOf(c), PushKey: s.pushKey(c),
	}
	vis := s.visible(c)
	if q.Counts, err = s.st.DraftCountsFor(vis); err != nil {
		return err
	}
	q.More = s.queueMore(v, page, next, q.Counts[store.DraftPending])
	for _, ch := range s.cfg.Channels {
		if vis.Channel(ch.Name) {
			q.Channels = append(q.Channels, ch.Name)
		}
	}
	if next != nil {
		q.NextPage = v.withCursor(next).filter.URL("")
	}
	if v.after != nil {
		q.FirstPage = v.withCursor(nil).filter.URL("")
	}
	// Read last, so the reads above have added what they stepped over.
	l.Unreadable = s.unreadableFor(c, s.st.UnreadableOf("draft", "event", "lead"))
	return render(c, http.StatusOK, views.Drafts(l, q))
}

// unclaimed is the index of the first draft of page, from from on and
// round to the start, that nobody else has open (claims.go), now claimed
// for the person asking; from itself when others have them all open.
func (s *Server) unclaimed(c *echo.Context, page []store.Draft, from int) int {
	p := who(c)
	if p == nil {
		return from
	}
	ids := make([]string, 0, len(page))
	for k := range page {
		ids = append(ids, page[(from+k)%len(page)].ID)
	}
	k := s.claims.pick(ids, p.Name, s.now())
	if k < 0 {
		return from
	}
	return (from + k) % len(page)
}

// focusCard is the card of draft id (when given) or of the page's first draft.
func (s *Server) focusCard(c *echo.Context, v queueView, page []store.Draft, next []byte, id string) (views.DraftCard, error) {
	if id == "" {
		if len(page) == 0 {
			return views.DraftCard{State: views.CardEmpty, Filter: v.filter}, nil
		}
		i := s.unclaimed(c, page, 0)
		return s.pendingCard(c, v, page, next, i, page[i])
	}
	if i := slices.IndexFunc(page, func(d store.Draft) bool { return d.ID == id }); i >= 0 {
		return s.pendingCard(c, v, page, next, i, page[i])
	}
	d, err := s.st.Draft(id)
	if err == nil && v.only != nil && !v.only.Draft(d) {
		err = store.ErrNotFound // another client's: as if there were none
	}
	if err != nil {
		return views.DraftCard{}, missing(err, "there is no draft %q", id)
	}
	if d.Status != store.DraftPending {
		return s.decidedCard(c, v, d, page, nil)
	}
	return s.pendingCard(c, v, page, next, -1, d) // waiting, but not on this page or in this view
}

// approveFromQueue answers POST /drafts/{id}/approve (form: action, text,
// owner, channel, cursor). It runs the same idempotent approval as the
// API and answers htmx with the next card.
func (s *Server) approveFromQueue(c *echo.Context) error {
	v, err := newQueueView(who(c), c.FormValue("owner"), c.FormValue("channel"), c.FormValue("cursor"))
	if err != nil {
		return err
	}
	v.only = s.only(c)
	id := c.Param("id")
	text := ""
	if c.FormValue("action") == "edit" {
		if text, err = replyText(c.FormValue("text"), "the reply is empty; write one, or approve the draft as written"); err != nil {
			return err
		}
	}
	res, err := s.approve(c, id, text, decisionReason{code: c.FormValue("reason_code"), text: c.FormValue("edit_reason")})
	if err != nil {
		return s.refusedDecision(c, v, id, err)
	}
	s.claims.release(id) // decided: nobody is "looking at" it any more, whatever the answer
	if !isHX(c) {
		return c.Redirect(http.StatusSeeOther, v.filter.URL(""))
	}
	if !res.Created {
		return s.answerDecision(c, v, res.Draft, decisionNotice(res.Draft, ""), http.StatusOK, true)
	}
	dec := res.Draft.Decision
	text = "Approved by " + dec.By + " at " + dec.At.UTC().Format("15:04:05 UTC") + ": the reply to " + s.customerOf(res.Draft.EventKey) + " is on its way."
	if dec.Edited {
		text = "Approved with your edit by " + dec.By + " at " + dec.At.UTC().Format("15:04:05 UTC") + ": the reply to " + s.customerOf(res.Draft.EventKey) + " is on its way."
	}
	return s.answerDecision(c, v, res.Draft, &views.Notice{Tone: "ok", Text: text}, http.StatusOK, false)
}

// rejectFromQueue answers POST /drafts/{id}/reject (form: reason, owner,
// channel, cursor) with the next card.
func (s *Server) rejectFromQueue(c *echo.Context) error {
	p := who(c)
	v, err := newQueueView(p, c.FormValue("owner"), c.FormValue("channel"), c.FormValue("cursor"))
	if err != nil {
		return err
	}
	v.only = s.only(c)
	id := c.Param("id")
	res, err := s.reject(c, id, decisionReason{code: c.FormValue("reason_code"), text: c.FormValue("reason")})
	if err != nil {
		return s.refusedDecision(c, v, id, err)
	}
	s.claims.release(id)
	if !isHX(c) {
		return c.Redirect(http.StatusSeeOther, v.filter.URL(""))
	}
	if !res.Decided { // an earlier rejection stands, even one by this person in another tab
		return s.answerDecision(c, v, res.Draft, decisionNotice(res.Draft, ""), http.StatusOK, true)
	}
	return s.answerDecision(c, v, res.Draft, decisionNotice(res.Draft, p.Name), http.StatusOK, false)
}

// refusedDecision answers a decision the store refused: a conflict with
// an earlier decision (409) shows that decision's card with its sentence.
func (s *Server) refusedDecision(c *echo.Context, v queueView, id string, err error) error {
	status, msg := answerFor(err)
	if !isHX(c) || status != http.StatusConflict {
		return err
	}
	d, derr := s.st.Draft(id)
	if derr != nil {
		return err
	}
	return s.answerDecision(c, v, d, &views.Notice{Tone: "error", Text: msg}, status, true)
}

// answerDecision renders the answer to a decision on draft decided: the
// card of the next waiting draft (or, when showDecided, the decided
// draft's card with a link to it), the refreshed list and the nav count.
func (s *Server) answerDecision(c *echo.Context, v queueView, decided store.Draft, n *views.Notice, status int, showDecided bool) error {
	v, page, next, err := s.answerPage(v)
	if err != nil {
		return err
	}
	// Next is the first waiting draft after the decided one; drafts
	// skipped before it come round again at the end of the page.
	s.claims.release(decided.ID)
	i := slices.IndexFunc(page, func(d store.Draft) bool { return s.later(d, decided) })
	if i < 0 && len(page) > 0 {
		i = 0
	}
	if i >= 0 && !showDecided {
		i = s.unclaimed(c, page, i) // steer clear of a draft another person has open
	}
	var card views.DraftCard
	switch {
	case showDecided:
		if card, err = s.decidedCard(c, v, decided, page, n); err != nil {
			return err
		}
		if i >= 0 && decided.Status != store.DraftSuperseded { // a superseded draft's Next is its customer's current draft
			card.Next = v.filter.URL(page[i].ID)
		}
	case i >= 0:
		if card, err = s.pendingCard(c, v, page, next, i, page[i]); err != nil {
			return err
		}
		card.Notice = n
	default:
		if card, err = s.emptyCard(c, v, n); err != nil {
			return err
		}
	}
	if u := s.undoToast(c, v, decided); u != nil && !showDecided {
		card.Undo = u // the undo stack, swapped in with its new entry (undo.go)
	}
	return s.answerQueue(c, v, page, card, status)
}

// answerPage is the page of view v that an answer on the queue shows; when
// v's page has emptied it starts over from the first page (and says so in
// the view it returns).
func (s *Server) answerPage(v queueView) (queueView, []store.Draft, []byte, error) {
	page, next, _, err := s.pendingPage(v, queuePage)
	if err == nil && len(page) == 0 && v.after != nil {
		v = v.withCursor(nil)
		page, next, _, err = s.pendingPage(v, queuePage)
	}
	return v, page, next, err
}

// emptyCard is the card of a view with nothing waiting, saying what is
// still being drafted, with notice n.
func (s *Server) emptyCard(c *echo.Context, v queueView, n *views.Notice) (views.DraftCard, error) {
	drafting, err := s.st.DraftingFor(s.visible(c))
	if err != nil {
		return views.DraftCard{}, err
	}
	return views.DraftCard{State: views.CardEmpty, Filter: v.filter, Notice: n, Drafting: &drafting}, nil
}

// answerQueue renders card as an htmx answer on the queue (a decision, a
// selection, an undo): the card, page's list out of band, the nav count.
func (s *Server) answerQueue(c *echo.Context, v queueView, page []store.Draft, card views.DraftCard, status int) error {
	now := s.now()
	items, err := s.queueItems(v, page, card.Draft.ID, now)
	if err != nil {
		return err
	}
	counts, err := s.st.CountsFor(s.visible(c), stuckBefore(s.cfg, now))
	if err != nil {
		return err
	}
	byStatus, err := s.st.DraftCountsFor(s.visible(c))
	if err != nil {
		return err
	}
	more := s.queueMore(v, page, nil, counts.DraftsWaiting) // the page's own pager links on
	return render(c, status, views.QueueAnswered(views.QueueAnswer{Card: card, Items: items, Waiting: counts.DraftsWaiting, More: more, Counts: byStatus}))
}

// livePoll is how often an open queue asks GET /drafts/live; the page says
// it once (hx-trigger), this is for the documentation and the measures.
const livePoll = 5 * time.Second

// queueLive answers GET /drafts/live?owner=&channel=&cursor=&current=&empty=
// (the open queue's poll, every livePoll): the list and the nav count,
// the first waiting draft when the page shows the empty card (empty=1),
// and a warning when current, the card's draft, no longer waits. A light
// poll rather than server-sent events: one small read transaction per
// open tab every few seconds, no connection held open per approver
// through proxies, and the answer's ETag lets an unchanged queue cost a
// 304 with no body.
func (s *Server) queueLive(c *echo.Context) error {
	v, err := newQueueView(who(c), c.QueryParam("owner"), c.QueryParam("channel"), c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	v.only = s.only(c)
	page, next, _, err := s.pendingPage(v, queuePage)
	if err != nil {
		return err
	}
	now := s.now()
	counts, err := s.st.CountsFor(s.visible(c), stuckBefore(s.cfg, now))
	if err != nil {
		return err
	}
	byStatus, err := s.st.DraftCountsFor(s.visible(c))
	if err != nil {
		return err
	}
	current, empty := c.QueryParam("current"), c.QueryParam("empty") == "1"
	live := views.QueueLive{Waiting: counts.DraftsWaiting, Counts: byStatus, More: s.queueMore(v, page, next, counts.DraftsWaiting)}
	// The tag covers what the answer shows, the ages to the minute.
	tag := sha256.New()
	fmt.Fprintf(tag, "%d|%s|%t|%s|", counts.DraftsWaiting, current, empty, now.UTC().Truncate(time.Minute).Format(time.RFC3339))
	for _, st := range store.DraftStatuses {
		fmt.Fprintf(tag, "%s=%d,", st, byStatus[st])
	}
	for _, d := range page {
		fmt.Fprintf(tag, "%s,", d.ID)
	}
	onPage := slices.ContainsFunc(page, func(d store.Draft) bool { return d.ID == current })
	if p := who(c); p != nil && current != "" && onPage {
		// The card is still open: renew its claim, and say again who
		// else has it (nobody, once they decided it or left it).
		live.Current, live.LookedBy = true, s.claims.look(current, p.Name, now)
		fmt.Fprintf(tag, "looked:%s|", live.LookedBy)
	}
	if current != "" && !onPage {
		d, err := s.st.Draft(current)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case d.Status != store.DraftPending && (v.only == nil || v.only.Draft(d)):
			live.Stale, live.Current = decisionNotice(d, ""), true // and nobody is looking at it any more
			if d.Status == store.DraftSuperseded {
				live.Stale = &views.Notice{Tone: "warn", Text: "This draft was superseded meanwhile: the customer wrote again. Its newer draft is in the list."}
			}
			fmt.Fprintf(tag, "stale:%s", d.Status)
		}
	}
	etag := `"` + base64.RawURLEncoding.EncodeToString(tag.Sum(nil)[:12]) + `"`
	h := c.Response().Header()
	h.Set("Cache-Control", "private, no-cache")
	h.Set("ETag", etag)
	if c.Request().Header.Get("If-None-Match") == etag {
		return c.NoContent(http.StatusNotModified)
	}
	if empty && len(page) > 0 {
		i := s.unclaimed(c, page, 0) // two empty queues filling at once get different drafts
		card, err := s.pendingCard(c, v, page, next, i, page[i])
		if err != nil {
			return err
		}
		card.OOB = true
		live.Card, current = &card, card.Draft.ID
	}
	if live.Items, err = s.queueItems(v, page, current, now); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := views.QueueLiveAnswer(live).Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Referrer-Policy", "same-origin")
	return c.HTMLBlob(http.StatusOK, buf.Bytes())
}
