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
	State  string
	Draft  store.Draft
	Event  store.Event
	Filter QueueFilter
	CSRF   string
	Prev   string // URL of the previous draft in the list; "" when none
	Next   string // URL of the next draft (or page); "" when none
	Notice *Notice
	Now    time.Time
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
	// Handoff is the draft's lead (its name and contact when the message
	// gave none, and whether it is stuck); zero when not read.
	Handoff store.Handoff
	// Conversation is the lead's messages and our replies so far, oldest
	// first, the turn's messages marked (store.CardView).
	Conversation []store.Said
	// Stuck says the lead has waited past its stuck threshold (leads.IsStuck).
	Stuck bool
	// Selection is what deciding several drafts at once just did; nil: nothing.
	Selection *Selection
	// Undo is the banner of the approval just made, while it can be
	// undone; nil: none.
	Undo *UndoToast
	// Window is the lead's reply window (window.templ); zero: none.
	Window ReplyWindow
}

// QueueLive is the live queue's poll answer, all of it swapped out of
// band: the list, the nav count, a new card when the page showed the
// empty one, and a warning when the card's draft was decided elsewhere or
// superseded meanwhile.
type QueueLive struct {
	Items   []QueueItem
	More    QueueMore // what waits after Items
	Waiting int
	Counts  map[store.DraftStatus]int
	Card    *DraftCard // nil: the card stays
	Stale   *Notice    // nil: the card's draft still waits
	// Current says the answer speaks of the card's draft (still waiting
	// on the page, or decided meanwhile): LookedBy is then who else has
	// it open, "" deleting the card's "… is looking at this draft too".
	Current  bool
	LookedBy string
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
	// WindowClosed says the channel's reply window closed: a reply of
	// one's own or a new draft would be refused as the draft is, so only
	// closing is offered here (the template is on the card).
	WindowClosed bool
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
	// Stuck says the lead has waited past its stuck threshold (leads.IsStuck).
	Stuck bool
}

// QueueMore is what waits after the list's drafts: N of them (-1 when
// the view cannot count them cheaply: a filter, a later page), and the
// next page's address ("" when not known).
type QueueMore struct {
	N    int
	Next string
}

// DraftQueue is the approval queue page.
type DraftQueue struct {
	Filter    QueueFilter
	Owners    []string // choices of the owner filter
	Channels  []string
	HasOwner  bool // the person has a routing owner, so "mine" means something
	Card      DraftCard
	Items     []QueueItem
	More      QueueMore // what waits after Items
	NextPage  string    // "" at the end
	FirstPage string    // "" on the first page
	Partial   bool      // the filter looked at many drafts without filling the page
	Drafting  store.Drafting
	// Counts are the drafts in each status (store.DraftStatuses).
	Counts map[store.DraftStatus]int
	CSRF   string // the session's token, for the selection's form
	// PushKey is the VAPID public key (base64url) when approvals.webpush
	// is configured: the page offers Web Push; "" offers nothing.
	PushKey string
}

// QueueAnswer is the answer to a decision made through htmx: the next card,
// and the list and count brought up to date out of band.
type QueueAnswer struct {
	Card    DraftCard
	Items   []QueueItem
	Waiting int
	More    QueueMore // what waits after Items
	// Counts are the drafts in each status, for the queue's footer; nil
	// leaves it as it is.
	Counts map[store.DraftStatus]int
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

// LeadName is what the queue calls the customer of event ev of lead h: the
// name the message gave, else the lead's, else the message's or the lead's
// contact (an SMS lead often has only the number), else the conversation
// id; "—" when there is nothing at all.
func LeadName(ev store.Event, h store.Handoff) string {
	for _, s := range []string{ev.Name, h.Name, ev.Contact, h.Contact, ev.ConversationID, h.ConversationID} {
		if s != "" {
			return s
		}
	}
	return "—"
}

// cardName is the card's name for its customer.
func (c DraftCard) cardName() string { return LeadName(c.Event, c.Handoff) }

// cardContact is the card's contact line: the message's, else the lead's.
func (c DraftCard) cardContact() string {
	if c.Event.Contact != "" {
		return c.Event.Contact
	}
	return orDash(c.Handoff.Contact)
}

// earlierLines counts the conversation's lines before the turn.
func earlierLines(said []store.Said) int {
	n := 0
	for _, s := range said {
		if !s.InTurn {
			n++
		}
	}
	return n
}

// replyState names a reply's status as a person reads it, and its tone.
func replyState(o store.Outbox) (label, tone string) {
	switch o.Status {
	case store.OutboxSent:
		return "sent", "ok"
	case store.OutboxPending, store.OutboxEffectPending:
		return "pending", "warn"
	case store.OutboxNeedsReconciliation:
		return "failed? a person must check", "error"
	default:
		return "failed", "error"
	}
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

// Selection is what deciding several drafts at once did.
type Selection struct {
	Action  string   // approve or reject
	Done    []string // the drafts this request decided
	Refused []Refusal
}

// Refusal is a draft of a selection that was not decided, and why.
type Refusal struct {
	ID  string
	Why string
}

func (r Selection) verb() string {
	if r.Action == "reject" {
		return "rejected"
	}
	return "approved"
}

func (r Selection) summary() string {
	s := itoa(len(r.Done)) + " of " + itoa(len(r.Done)+len(r.Refused)) + plural(len(r.Done)+len(r.Refused), " selected draft ", " selected drafts ") + r.verb()
	if len(r.Refused) == 0 {
		return s + "."
	}
	return s + "; " + itoa(len(r.Refused)) + " could not be:"
}

func (r Selection) tone() string {
	switch {
	case len(r.Refused) == 0:
		return "ok"
	case len(r.Done) == 0:
		return "error"
	}
	return "warn"
}
