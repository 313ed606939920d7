package views

import (
	"net/url"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// HandoffRow is one lead in a list.
type HandoffRow struct {
	Key        string
	Channel    string
	Contact    string
	Owner      string
	Status     store.HandoffStatus
	Since      time.Time
	InStatus   string // how long it has been in its status
	StuckAfter string // the status's threshold; "" for replied
	Stuck      bool
	Cycle      int
	EventURL   string // the lead's page, at its last message
	// Name is who the lead is for a person: its name, else its contact
	// or conversation id (LeadName).
	Name string
	// Last is the lead's latest message folded to one line (OneLine),
	// received LastAge ago at LastAt; "" when it is gone.
	Last    string
	LastAt  time.Time
	LastAge string
}

// Overview is the front page: counts and the leads that are stuck.
type Overview struct {
	Counts     store.Counts
	Stuck      []HandoffRow
	Thresholds []Fact
	Backup     *Notice // the last backup failed; nil otherwise
	// Unreadable is the banner about records that cannot be read; nil when none is known.
	Unreadable *Notice
	// Drafting is the messages waiting for a draft and whether drafting fails.
	Drafting store.Drafting
	// Stats is what drafts cost and how they were decided (views/drafting.go).
	Stats DraftStats
	// Quality is how much people changed the drafts and why (views/quality.go).
	Quality QualityStats
	// Canaries are the clients' canaries, A beside B (views/canary.go).
	Canaries Canaries
	// Notice is what an admin's action on the overview did; nil: none.
	Notice *Notice
}

// HandoffList is the handoffs page.
type HandoffList struct {
	Status string // "" for every status
	Stuck  bool
	Rows   []HandoffRow
	Limit  int
	More   bool // the list was cut at Limit
}

// Entry is one moment of an event's timeline.
type Entry struct {
	At    time.Time
	Kind  string // event, job, attempt, draft, decision, outbox, send, reconcile, lead
	Title string
	Facts []Fact
	Text  string // a message, a reply, a model's raw output
	Error string
	Tone  string // "", ok, warn, error
}

// Timeline is everything known about one event, in time order.
type Timeline struct {
	Event   store.Event
	Draft   *store.Draft
	Outbox  *store.Outbox
	Handoff *store.Handoff
	Jobs    []store.Job
	Entries []Entry
	// Lead is what a person can do to end the lead's open turn.
	Lead LeadActions
	// AnsweredBy is the event whose draft answers this message (it joined
	// that event's turn); "" when the draft is the event's own.
	AnsweredBy string
	// Conversation is the newest lines of the lead's conversation, oldest
	// first (empty: the event has no lead, or it was not read); Earlier
	// says older lines were left out.
	Conversation []store.Said
	Earlier      bool
	Now          time.Time
}

// lead is the timeline's lead, zero when it has none.
func (t Timeline) lead() store.Handoff {
	if t.Handoff == nil {
		return store.Handoff{}
	}
	return *t.Handoff
}

// name is who the lead is for a person (LeadName).
func (t Timeline) name() string { return LeadName(t.Event, t.lead()) }

// contact is the lead's contact, else the message's.
func (t Timeline) contact() string {
	if h := t.lead(); h.Contact != "" {
		return h.Contact
	}
	return t.Event.Contact
}

// ReconcileRows is the reconcile page.
type ReconcileRows struct {
	Rows   []store.Outbox
	Notice *Notice
	Limit  int
	Lookup map[string]bool // providers that can find a send by our reference
	// Names are the customers the replies went to, by outbox id: a row is
	// titled "Reply to Ada Lovelace", its id among its facts.
	Names map[string]string
}

// Secret is a password or token shown once, right after it was made.
type Secret struct {
	What  string // "Password of dana", "Token ci-bot"
	Value string
}

// UsersPage lists people and API tokens, with the forms to add them.
type UsersPage struct {
	Users  []store.User
	Tokens []store.Token
	// LiveTokens counts each person's tokens not revoked, by their ID:
	// the ones a demotion or removal revokes.
	LiveTokens map[string]int
	Secret     *Secret
	Notice     *Notice
	Owners     []string // routing owners, suggested for a new user
	// Lockouts are the names and addresses whose logins are refused or
	// slowed now, each with an unlock button.
	Lockouts []Lockout
}

// Settings is the read-only configuration, secrets already redacted.
type Settings struct {
	Config   config.Config
	Warnings []string
	Database []Fact // the file's size and free pages
}

// stuckRule says when a lead counts as stuck.
func stuckRule(ts []Fact) string {
	s := "A lead is stuck when it stays longer than"
	for i, t := range ts {
		switch {
		case i == 0:
			s += " "
		case i == len(ts)-1:
			s += " or "
		default:
			s += ", "
		}
		s += t.Value + " in " + t.Label
	}
	return s + "."
}

// statusTabs are the statuses the handoffs page offers a tab for: every
// status (leads.Statuses), or with the stuck filter on, those a lead can be
// stuck in (leads.OpenStatuses).
func statusTabs(stuck bool) []string {
	ss := leads.Statuses
	if stuck {
		ss = leads.OpenStatuses
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// handoffsURL links to the handoffs page; a replied or closed lead is never
// stuck (not leads.Open), so the stuck filter drops that status.
func handoffsURL(status string, stuck bool) string {
	q := url.Values{}
	if stuck && status != "" && !leads.Open(store.HandoffStatus(status)) {
		status = ""
	}
	if status != "" {
		q.Set("status", status)
	}
	if stuck {
		q.Set("stuck", "true")
	}
	if len(q) == 0 {
		return "/handoffs"
	}
	return "/handoffs?" + q.Encode()
}

// eventFacts describe an inbound event.
func eventFacts(ev store.Event) []Fact {
	dups := "none"
	if ev.Duplicates > 0 {
		dups = itoa(ev.Duplicates) + ", the last at " + whenPtr(ev.LastDuplicateAt)
	}
	return []Fact{
		{Label: "Channel", Value: ev.Channel},
		{Label: "Message id", Value: ev.MessageID, Mono: true},
		{Label: "Conversation", Value: ev.ConversationID, Mono: true},
		{Label: "Correlation id", Value: ev.CorrelationID, Mono: true},
		{Label: "From", Value: JoinSet(" · ", ev.Name, ev.Contact)},
		{Label: "Received", Value: when(ev.ReceivedAt)},
		{Label: "Duplicates", Value: dups},
	}
}

// JoinSet joins the values that are set.
func JoinSet(sep string, vs ...string) string {
	out := ""
	for _, v := range vs {
		if v == "" {
			continue
		}
		if out != "" {
			out += sep
		}
		out += v
	}
	return out
}

// ClientList is the clients page: the clients a person sees.
type ClientList struct {
	Clients []ClientRow
	Notice  *Notice
}

// ClientRow is one client and its channels.
type ClientRow struct {
	ID, Name string
	Channels []string
}
