package delivery

import (
	"time"

	"github.com/handoff/handoff/store"
)

// Event is one outbound event to one subscriber (package outbound builds
// it; delivery assigns its status, as for every outbox row).
type Event struct {
	// ID is "ev:<lead key>:<subscriber>:<type>:<business key>": once per
	// business key and subscriber.
	ID       string
	Lead     string // the lead key it is about; "" for none (a digest job's dead letter)
	Channel  string // the lead's channel ("" for none)
	ConvID   string // the lead's conversation id
	EventKey string // the message it follows from, if any
	Provider string // "events:<subscriber>"
	To       string // what the pages show as its recipient
	Text     string // the JSON body, exactly as posted
	At       time.Time
	// JobID names the delivery job; MaxAttempts is its attempts.
	JobID       string
	MaxAttempts int
}

// CreateEventTx creates the event row e, pending, and its delivery job
// (EventArgs: the events' own pool) inside the caller's transaction (the
// business change that caused it), unless a row with its id exists: then
// nothing is written and created is false. The delivery job sends it with
// a reply's rules; a subscriber dedupes by webhook-id, so an unknown
// outcome is resent.
func CreateEventTx(tx *store.Tx, e Event) (created bool, err error) {
	// The jobs of a lead's events share its correlation (retention finds a
	// row's job by it); an event of no lead has its own.
	corr := "ev:" + e.Lead
	if e.Lead == "" {
		corr = e.ID
	}
	return createTeamTx(tx, store.Outbox{
		V: 1, ID: e.ID, Kind: store.OutboxEvent, EventKey: e.EventKey, Channel: e.Channel, CorrelationID: corr,
		ConversationID: e.ConvID, To: e.To, Text: e.Text, Provider: e.Provider, Status: store.OutboxPending,
		CreatedAt: e.At, UpdatedAt: e.At, ApprovedBy: "outbound event", Attempts: []store.OutboxAttempt{},
	}, e.JobID, e.MaxAttempts)
}
