package views

import (
	"net/url"
	"time"

	"github.com/handoff/handoff/store"
)

// QueueFilter is the approval queue's filters and page. The decision forms
// carry it, so the answer to a decision is the next draft of the same view.
type QueueFilter struct {
	Owner   string // "", "mine" or an owner name
	Channel string // "" or a channel name
	Cursor  string // the page's cursor (base64url); "" for the first page
}

// URL links to the queue with this filter, showing draft id when given.
func (f QueueFilter) URL(id string) string {
	q := url.Values{}
	if f.Owner != "" {
		q.Set("owner", f.Owner)
	}
	if f.Channel != "" {
		q.Set("channel", f.Channel)
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if id != "" {
		q.Set("id", id)
	}
	if len(q) == 0 {
		return "/drafts"
	}
	return "/drafts?" + q.Encode()
}

// Card states.
const (
	CardPending = "pending" // the draft waits: show the decision forms
	CardDecided = "decided" // someone decided it: say who, offer the next
	CardEmpty   = "empty"   // nothing waits in this view
)

// DraftCard is the one draft a person is deciding.
type DraftCard struct {
	State   string
	Draft   store.Draft
	Event   store.Event
	Earlier []store.Event // the lead's messages before this one, oldest first
	Filter  QueueFilter
	CSRF    string
	Prev    string // URL of the previous draft in the list; "" when none
	Next    string // URL of the next draft (or page); "" when none
	Notice  *Notice
	Now     time.Time
	// Turn is every message the draft answers, oldest first (the card's
	// message when it answers one).
	Turn []store.Event
	// Recipient is where the reply goes; "" when the lead has no contact,
	// and then the draft cannot be approved, only the lead closed.
	Recipient string
	Lead      LeadActions
	// Drafting is what waits for a draft (the empty card must not say
	// "all caught up" while drafting fails); nil when not read.
	Drafting *store.Drafting
	// LookedBy is another person who has this draft open (a soft claim);
	// "" when nobody else does.
	LookedBy string
	// SMS says the channel sends SMS: the reply shows its segment count.
	SMS bool
	// OOB marks the card for an out-of-band swap: the live queue brings
	// the first waiting draft onto an empty card.
	OOB bool
}

// QueueLive is the live queue's poll answer, all of it swapped out of
// band: the list, the nav count, a new card when the page showed the
// empty one, and a warning when the card's draft was decided elsewhere or
// superseded meanwhile.
type QueueLive struct {
	Items   []QueueItem
	Waiting int
	Counts  map[store.DraftStatus]int
	Card    *DraftCard // nil: the card stays
	Stale   *Notice    // nil: the card's draft still waits
}

// LiveURL is the live queue's poll address for this filter.
func (f QueueFilter) LiveURL() string {
	u := f.URL("")
	if u == "/drafts" {
		return "/drafts/live"
	}
	return "/drafts/live" + u[len("/drafts"):]
}

// LeadActions are the ways a person ends a lead's open turn other than
// approving its draft: write the reply, draft again, close without reply.
type LeadActions struct {
	Open      bool   // the lead waits for a reply: the actions apply
	EventKey  string // any event of the lead: the actions' target
	CSRF      string
	Back      string // where the forms return to
	Recipient string // "" : no contact, so only closing is offered
	Waiting   int    // messages in the open turn
	Drafting  bool   // a draft of the turn is being written, so "draft again" waits
}

// QueueItem is one line of the list of upcoming drafts.
type QueueItem struct {
	ID      string
	Channel string
	Owner   string
	Name    string
	Age     string
	Line    string // the first line of the customer's message
	URL     string
	Current bool
}

// DraftQueue is the approval queue page.
type DraftQueue struct {
	Filter    QueueFilter
	Owners    []string // choices of the owner filter
	Channels  []string
	HasOwner  bool // the person has a routing owner, so "mine" means something
	Card      DraftCard
	Items     []QueueItem
	NextPage  string // "" at the end
	FirstPage string // "" on the first page
	Partial   bool   // the filter looked at many drafts without filling the page
	Drafting  store.Drafting
	// Counts are the drafts in each status (store.DraftStatuses).
	Counts map[store.DraftStatus]int
}

// QueueAnswer is the answer to a decision made through htmx: the next card,
// and the list and count brought up to date out of band.
type QueueAnswer struct {
	Card    DraftCard
	Items   []QueueItem
	Waiting int
}

// EventURL links to the timeline of an event key.
func EventURL(key string) string { return "/events/" + url.PathEscape(key) }

// draftFacts are what a person checks before approving: who it was routed
// to and why, and what wrote it.
func draftFacts(d store.Draft) []Fact {
	owner := d.Owner
	if d.Rule != "" || d.RuleVersion != "" {
		owner += " (routing " + d.RuleVersion
		if d.Rule != "" {
			owner += ": " + d.Rule
		}
		owner += ")"
	}
	drafter := d.Drafter
	if d.Model != "" {
		drafter += " · " + d.Model
	}
	return []Fact{
		{Label: "Owner", Value: owner},
		{Label: "Drafted by", Value: drafter + " · prompt " + d.PromptVersion},
		{Label: "Drafted", Value: when(d.CreatedAt)},
		{Label: "Draft", Value: d.ID, Mono: true},
	}
}

// leadName is what the card calls the customer: the name they gave, else
// their contact (an SMS lead often has only the number).
func leadName(ev store.Event) string {
	if ev.Name != "" {
		return ev.Name
	}
	return orDash(ev.Contact)
}

// smsLine says how long a reply is as SMS, "87 characters · 1 SMS".
func smsLine(text string) string {
	s := SMSOf(text)
	line := itoa(s.Units) + " characters · " + itoa(s.Segments) + " SMS"
	if s.Unicode {
		line = itoa(s.Units) + " characters (Unicode: 70 a message) · " + itoa(s.Segments) + " SMS"
	}
	return line
}
