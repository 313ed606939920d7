package delivery

import (
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// Alert announces a stuck lead to the team through a provider.
type Alert struct {
	Lead     store.Handoff // the lead as flagged: its stay names the row
	Provider string        // stuck.alert
	// Why, when set, says what the lead waits for, after the alert's
	// sentence (a CRM client's lead received waits for its CRM record).
	Why string
	At  time.Time
	// JobID names the delivery job; MaxAttempts is its attempts.
	JobID       string
	MaxAttempts int
}

// AlertID is the outbox id of the alert for the lead's stay that began at since.
func AlertID(lead string, since time.Time) string {
	return fmt.Sprintf("stuck:%s:%d", lead, since.Unix())
}

// CreateAlertTx creates the alert row "stuck:<lead>:<since>", pending, and
// its delivery job inside the caller's transaction (the flagging's), so an
// alert is sent once per stay, across restarts, with the delivery rules of
// a reply. A row that exists already is left alone: created is false.
func CreateAlertTx(tx *store.Tx, a Alert) (created bool, err error) {
	h := a.Lead
	text := fmt.Sprintf("Lead %s has been %s since %s (owner: %s).", h.Key, h.Status, h.Since.UTC().Format(time.RFC3339), orNone(h.Owner))
	if a.Why != "" {
		text += " " + a.Why
	}
	return createTeamTx(tx, store.Outbox{
		V: 1, ID: AlertID(h.Key, h.Since), Kind: store.OutboxAlert, EventKey: h.LastEventKey, Channel: h.Channel, CorrelationID: "alert:" + h.Key,
		ConversationID: h.ConversationID, To: "team", Text: text, Provider: a.Provider, Status: store.OutboxPending,
		CreatedAt: a.At, UpdatedAt: a.At, ApprovedBy: "stuck-lead alert", Attempts: []store.OutboxAttempt{},
	}, a.JobID, a.MaxAttempts)
}

// createTeamTx creates o, a message to the team (a stuck-lead alert, a
// digest), and its delivery job, due at o.CreatedAt, unless a row with
// o's id exists already: then nothing is written and created is false.
func createTeamTx(tx *store.Tx, o store.Outbox, jobID string, maxAttempts int) (created bool, err error) {
	switch _, err := tx.Outbox(o.ID); {
	case err == nil:
		return false, nil
	case !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	if err := tx.PutOutbox(nil, &o); err != nil {
		return false, err
	}
	if _, _, err := jobs.Enqueue(tx, argsFor(o), jobs.Opts{ID: jobID, MaxAttempts: maxAttempts, CorrelationID: o.CorrelationID, Now: o.CreatedAt}); err != nil {
		return false, err
	}
	return true, nil
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}
