package delivery

import (
	"time"

	"github.com/handoff/handoff/store"
)

// CRMWrite is one write of a lead's status to its client's CRM (package
// crm builds it; delivery assigns its status, as for every outbox row).
type CRMWrite struct {
	ID       string        // "crm:<lead key>:<cycle>:<status>": once per status of a cycle
	Lead     store.Handoff // the lead as moved
	Provider string        // the CRM's name, "crm:<client>"
	To       string        // what the page shows as its recipient: the CRM kind and the record's key
	Text     string        // the record written (crm.Record, encoded)
	At       time.Time
	// JobID names the delivery job; MaxAttempts is its attempts.
	JobID       string
	MaxAttempts int
}

// CreateCRMTx creates the CRM write w, pending, and its delivery job,
// inside the caller's transaction (the lead's move), unless a row with its
// id exists already: then nothing is written and created is false. The
// delivery job sends it with a reply's rules (resend where the CRM upserts
// by our key, look up where it can find the record, else reconcile).
func CreateCRMTx(tx *store.Tx, w CRMWrite) (created bool, err error) {
	h := w.Lead
	return createTeamTx(tx, store.Outbox{
		V: 1, ID: w.ID, Kind: store.OutboxCRM, EventKey: h.LastEventKey, Channel: h.Channel, CorrelationID: "crm:" + h.Key,
		ConversationID: h.ConversationID, To: w.To, Text: w.Text, Provider: w.Provider, Status: store.OutboxPending,
		CreatedAt: w.At, UpdatedAt: w.At, ApprovedBy: "lead " + string(h.Status), Attempts: []store.OutboxAttempt{},
	}, w.JobID, w.MaxAttempts)
}
