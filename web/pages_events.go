package web

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// loadTimeline reads what GET /api/v1/events/{key} answers and the page
// shows, from one read transaction.
func (s *Server) loadTimeline(key string) (timeline, error) {
	t, err := s.st.Timeline(key)
	if err != nil {
		return timeline{}, missing(err, "no event has the key %q", key)
	}
	return timeline{Event: t.Event, Jobs: t.Jobs, Draft: t.Draft, Drafts: t.Drafts, Handoff: t.Handoff, Outbox: t.Outbox, AnsweredBy: t.AnsweredBy, Unreadable: t.Unreadable}, nil
}

// timelinePage answers GET /events/{event key}: the event and everything
// that followed from it, in time order.
func (s *Server) timelinePage(c *echo.Context) error {
	key := c.Param("*")
	t, err := s.loadTimeline(key)
	if u, ok := store.AsUnreadable(err); ok {
		// The event itself cannot be read: the page says so, in its one row.
		l, err := s.layout(c, "Event "+key, "")
		if err != nil {
			return err
		}
		l.Query, l.Unreadable = key, s.unreadableFor(c, []store.Unreadable{*u})
		return render(c, http.StatusOK, views.UnreadablePage(l, key))
	}
	if err != nil {
		return err
	}
	v := views.Timeline{
		Event: t.Event, Draft: t.Draft, Outbox: t.Outbox, Handoff: t.Handoff, Jobs: t.Jobs, Entries: entries(t),
		AnsweredBy: t.AnsweredBy,
	}
	unreadable := t.Unreadable
	if t.Handoff != nil {
		// The lead's conversation, read apart from the timeline: a page, not
		// a decision, so two moments a few microseconds apart are fine.
		lv, err := s.st.LeadConversation(t.Handoff.Key, leadLines)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		v.Conversation, v.Earlier = lv.Conversation, lv.Earlier
		unreadable = append(unreadable, lv.Unreadable...)
	}
	l, err := s.layout(c, views.LeadName(t.Event, derefLead(t.Handoff)), "")
	if err != nil {
		return err
	}
	l.Query, l.Unreadable = key, s.unreadableFor(c, unreadable)
	v.Now = l.Now
	if t.Handoff != nil {
		if v.Lead, err = s.leadActions(c, t.Event, views.EventURL(key)); err != nil {
			return err
		}
	}
	return render(c, http.StatusOK, views.TimelinePage(l, v))
}

// leadLines bounds the conversation a lead's page shows: its newest lines.
const leadLines = 50

// derefLead is *h, or a zero lead when h is nil.
func derefLead(h *store.Handoff) store.Handoff {
	if h == nil {
		return store.Handoff{}
	}
	return *h
}

// entries lays a timeline out as moments, oldest first.
func entries(t timeline) []views.Entry {
	ev := t.Event
	out := []views.Entry{{
		At: ev.ReceivedAt, Kind: "event", Title: "Message received on " + ev.Channel,
		Facts: []views.Fact{
			{Label: "From", Value: views.JoinSet(" · ", ev.Name, ev.Contact)},
			{Label: "Event key", Value: ev.Key, Mono: true},
			{Label: "Correlation id", Value: ev.CorrelationID, Mono: true},
		},
		Text: ev.Text,
	}}
	if ev.Duplicates > 0 && ev.LastDuplicateAt != nil {
		first := ev.LastDuplicateAt
		if ev.FirstDuplicateAt != nil {
			first = ev.FirstDuplicateAt
		}
		title := "The same event arrived again (1 duplicate); nothing was done twice"
		if ev.Duplicates > 1 {
			title = fmt.Sprintf("The same event arrived again (%d duplicates, the first here); nothing was done twice", ev.Duplicates)
		}
		out = append(out, views.Entry{
			At: *first, Kind: "event", Tone: "warn", Title: title,
			Facts: []views.Fact{
				{Label: "Duplicates", Value: strconv.Itoa(ev.Duplicates)},
				{Label: "First arrived", Value: first.UTC().Format("2006-01-02 15:04:05.000 UTC")},
				{Label: "Last arrived", Value: ev.LastDuplicateAt.UTC().Format("2006-01-02 15:04:05.000 UTC")},
			},
		})
	}
	for _, j := range t.Jobs {
		out = append(out, views.Entry{
			At: j.CreatedAt, Kind: "job", Title: "Job " + j.Kind + " queued",
			Facts: []views.Fact{
				{Label: "Job", Value: j.ID, Mono: true},
				{Label: "Key", Value: j.Key, Mono: true},
				{Label: "State now", Value: string(j.State)},
				{Label: "Attempts", Value: strconv.Itoa(j.Attempt) + " of at most " + strconv.Itoa(j.MaxAttempts)},
			},
		})
		for _, a := range j.Attempts {
			e := views.Entry{
				At: a.StartedAt, Kind: "attempt", Error: a.Error, Text: a.Raw,
				Title: fmt.Sprintf("%s attempt %d: %s", j.Kind, a.Number, orRunning(a.Outcome)),
				Facts: []views.Fact{
					{Label: "Execution", Value: a.ExecutionID, Mono: true},
					{Label: "Started", Value: a.StartedAt.UTC().Format("15:04:05.000 UTC")},
				},
			}
			if a.EndedAt != nil {
				e.Facts = append(e.Facts,
					views.Fact{Label: "Ended", Value: a.EndedAt.UTC().Format("15:04:05.000 UTC")},
					views.Fact{Label: "Took", Value: a.EndedAt.Sub(a.StartedAt).String()})
			}
			switch a.Outcome {
			case store.OutcomeCompleted:
				e.Tone = "ok"
			case store.OutcomeRetry:
				e.Tone = "warn"
			case store.OutcomeDiscarded, store.OutcomeLeaseExpired:
				e.Tone = "error"
			}
			out = append(out, e)
		}
		for _, r := range j.Replays {
			out = append(out, replayEntry("Job "+j.Kind+" "+j.ID, r))
		}
		if d := j.Dismissed; d != nil {
			out = append(out, views.Entry{
				At: d.At, Kind: "job", Tone: "warn", Title: "Job " + j.Kind + " cancelled by " + d.By,
				Facts: []views.Fact{{Label: "Job", Value: j.ID, Mono: true}, {Label: "Reason", Value: d.Reason}},
			})
		}
	}
	drafts := t.Drafts
	if len(drafts) == 0 && t.Draft != nil {
		drafts = []store.Draft{*t.Draft}
	}
	// Every version's drafting before any decision: a regeneration rejects
	// the version it replaces at the very moment the new one is drafted.
	var decisions []views.Entry
	for _, d := range drafts {
		drafted, decided := draftEntries(d, len(drafts) > 1)
		out = append(out, drafted)
		decisions = append(decisions, decided...)
	}
	out = append(out, decisions...)
	if o := t.Outbox; o != nil {
		out = append(out, views.Entry{
			At: o.CreatedAt, Kind: "outbox", Title: "Reply queued to be sent",
			Facts: []views.Fact{
				{Label: "Outbox id", Value: o.ID, Mono: true},
				{Label: "To", Value: o.To},
				{Label: "Provider", Value: o.Provider},
				{Label: "Status now", Value: string(o.Status)},
				{Label: "Provider's id", Value: o.ProviderID, Mono: true},
			},
			Text: o.Text,
		})
		for _, a := range o.Attempts {
			e := views.Entry{
				At: a.At, Kind: "send", Title: "Provider " + a.Action + ": " + a.Outcome, Error: a.Error,
				Facts: []views.Fact{
					{Label: "Execution", Value: a.ExecutionID, Mono: true},
					{Label: "Provider's id", Value: a.ProviderID, Mono: true},
				},
			}
			switch a.Outcome {
			case "sent":
				e.Tone = "ok"
			case "ambiguous":
				e.Tone = "warn"
			case "permanent":
				e.Tone = "error"
			}
			out = append(out, e)
		}
		for _, r := range o.Replays {
			out = append(out, replayEntry("Reply "+o.ID, r))
		}
		if d := o.Dismissed; d != nil {
			out = append(out, views.Entry{
				At: d.At, Kind: "outbox", Tone: "warn", Title: "Reply taken off the dead-letter list by " + d.By,
				Facts: []views.Fact{{Label: "Reason", Value: d.Reason}},
			})
		}
		for _, r := range o.Reconciliations {
			out = append(out, views.Entry{
				At: r.At, Kind: "reconcile", Title: "Reconciled by " + r.By + ": " + r.Outcome, Tone: "ok",
				Facts: []views.Fact{{Label: "Provider's id", Value: r.ProviderID, Mono: true}, {Label: "From", Value: r.From}},
			})
		}
		if o.Note != "" && (o.Status == store.OutboxNeedsReconciliation || o.Status == store.OutboxFailed) {
			out = append(out, views.Entry{At: o.UpdatedAt, Kind: "outbox", Title: "Waiting for a person: " + string(o.Status), Error: o.Note, Tone: "error"})
		}
	}
	if h := t.Handoff; h != nil {
		for _, tr := range h.History {
			title := fmt.Sprintf("Lead %s (cycle %d)", tr.Status, tr.Cycle)
			if strings.HasPrefix(tr.Note, "message starts turn") || strings.HasPrefix(tr.Note, "message joins turn") {
				title = "A new message: " + tr.Note // the status stays; the turn moves
			}
			out = append(out, views.Entry{
				At: tr.At, Kind: "lead", Title: title,
				Facts: []views.Fact{{Label: "Why", Value: tr.Note}, {Label: "Event", Value: tr.EventKey, Mono: true}},
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// draftEntries are the moments of one draft version: drafted, and decided
// when it was. versioned says the event has several, so each names its version.
func draftEntries(d store.Draft, versioned bool) (views.Entry, []views.Entry) {
	facts := []views.Fact{
		{Label: "Draft", Value: d.ID, Mono: true},
		{Label: "Drafter", Value: views.JoinSet(" · ", d.Drafter, d.Model)},
		{Label: "Prompt version", Value: d.PromptVersion},
		{Label: "Input hash", Value: d.InputHash, Mono: true},
		{Label: "Routing", Value: views.JoinSet(" · ", d.RuleVersion, d.Rule)},
		{Label: "Owner", Value: d.Owner},
		{Label: "Execution", Value: d.ExecutionID, Mono: true},
	}
	version := max(d.Version, 1)
	title := "Reply drafted"
	if versioned || version > 1 {
		title = fmt.Sprintf("Reply drafted (version %d)", version)
		facts = append(facts, views.Fact{Label: "Version", Value: strconv.Itoa(version)})
	}
	if d.Replaces != "" {
		title += ", replacing " + d.Replaces
		facts = append(facts, views.Fact{Label: "Replaces", Value: d.Replaces, Mono: true})
	}
	if d.PromptTokens+d.OutputTokens > 0 {
		facts = append(facts, views.Fact{Label: "Tokens", Value: fmt.Sprintf("%d in, %d out", d.PromptTokens, d.OutputTokens)})
	}
	for _, k := range sortedKeys(d.Fields) {
		facts = append(facts, views.Fact{Label: "Field " + k, Value: d.Fields[k]})
	}
	if len(d.Answers) > 1 {
		title += fmt.Sprintf(", answering %d messages", len(d.Answers))
		facts = append(facts, views.Fact{Label: "Answers", Value: strings.Join(d.Answers, " · "), Mono: true})
	}
	if d.Instruction != "" {
		facts = append(facts, views.Fact{Label: "Instruction", Value: d.Instruction})
	}
	if d.FactsVersion > 0 {
		v := fmt.Sprintf("version %d", d.FactsVersion)
		for i, e := range d.FactsCited {
			if i == 0 {
				v += ", cites "
			} else {
				v += ", "
			}
			v += e.ID
		}
		facts = append(facts, views.Fact{Label: "Facts", Value: v})
	}
	if d.Author != "" {
		title = "Reply written by " + d.Author + strings.TrimPrefix(title, "Reply drafted")
	}
	drafted := views.Entry{At: d.CreatedAt, Kind: "draft", Title: title, Facts: facts, Text: d.Text}
	dec := d.Decision
	if dec == nil {
		return drafted, nil
	}
	e := views.Entry{At: dec.At, Kind: "decision", Facts: []views.Fact{{Label: "Draft", Value: d.ID, Mono: true}, {Label: "From", Value: dec.From}}}
	what := ""
	if versioned {
		what = fmt.Sprintf("Version %d ", version)
	}
	switch d.Status {
	case store.DraftRejected:
		e.Title, e.Tone = strings.TrimSpace(what+"rejected by "+dec.By), "warn"
		e.Facts = append(e.Facts, views.Fact{Label: "Reason", Value: dec.Reason})
	case store.DraftSuperseded:
		e.Title, e.Tone = strings.TrimSpace(what+"superseded: the customer wrote again"), "warn"
		e.Facts = append(e.Facts, views.Fact{Label: "Why", Value: dec.Reason}, views.Fact{Label: "Current draft", Value: d.SupersededBy, Mono: true})
	default:
		e.Title, e.Tone = strings.TrimSpace(what+"approved by "+dec.By), "ok"
		if dec.Edited {
			e.Title += ", with an edit"
			e.Text = dec.Text
		}
	}
	e.Title = strings.ToUpper(e.Title[:1]) + e.Title[1:]
	return drafted, []views.Entry{e}
}

// replayEntry is a person's replay of a dead letter.
func replayEntry(what string, r store.Replay) views.Entry {
	title := what + " replayed by " + r.By
	var how []string
	if r.Regenerate {
		how = append(how, "to be drafted afresh")
	}
	if r.Confirmed {
		how = append(how, "confirmed after a check")
	}
	if len(how) > 0 {
		title += " (" + strings.Join(how, ", ") + ")"
	}
	return views.Entry{
		At: r.At, Kind: "replay", Tone: "warn", Title: title,
		Facts: []views.Fact{
			{Label: "Regenerate", Value: strconv.FormatBool(r.Regenerate)},
			{Label: "Confirmed", Value: strconv.FormatBool(r.Confirmed)},
			{Label: "From", Value: r.From},
		},
	}
}

func orRunning(outcome string) string {
	if outcome == "" {
		return "running"
	}
	return outcome
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// searchLimit is how many leads a search lists.
const searchLimit = 50

// search answers GET /search?q=: an event key, a draft id, an outbox id, a
// lead key or a correlation id opens the event's timeline; a contact or
// conversation id that names one lead exactly opens its latest message;
// anything else lists the leads whose name, contact or conversation id
// starts with q, then those whose recent messages hold it (store.Search),
// all of them in the clients the person sees; 404 when none.
func (s *Server) search(c *echo.Context) error {
	q := strings.TrimSpace(c.QueryParam("q"))
	if q == "" {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	vis := s.visible(c)
	key, err := s.st.FindEvent(vis, q) // "" when q names nothing the caller sees
	if err != nil {
		return err
	}
	if key != "" {
		return c.Redirect(http.StatusSeeOther, views.EventURL(key))
	}
	res, err := s.st.Search(vis, q, searchLimit)
	if err != nil {
		return err
	}
	unreadable := s.unreadableFor(c, res.Unreadable)
	title, status := "Search", http.StatusOK
	if len(res.Leads) == 0 && len(unreadable) == 0 {
		title, status = "Nothing found", http.StatusNotFound
	}
	l, err := s.layout(c, title, "")
	if err != nil {
		return err
	}
	l.Query, l.Unreadable = q, unreadable
	p := views.SearchPage{Query: q, More: res.More, Scanned: res.Scanned, Oldest: res.Oldest, TextScan: store.TextScan, Now: l.Now}
	after := leads.StuckAfter(s.cfg)
	for _, h := range res.Leads {
		at := h.Last.ReceivedAt
		if at.IsZero() {
			at = h.Lead.Since
		}
		contact := h.Lead.Contact
		if contact == "" {
			contact = h.Last.Contact
		}
		p.Hits = append(p.Hits, views.SearchHit{
			Name: views.LeadName(h.Last, h.Lead), Contact: contact, Channel: h.Lead.Channel,
			Status: string(h.Lead.Status), Stuck: leads.IsStuck(h.Lead, l.Now, after), By: h.By,
			Snippet: h.Snippet, At: at, URL: views.EventURL(h.Lead.LastEventKey),
		})
	}
	return render(c, status, views.SearchResults(l, p))
}
