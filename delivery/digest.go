package delivery

import (
	"time"

	"github.com/handoff/handoff/store"
)

// Digest is one send of a digest of waiting drafts (jobs' digest kind
// writes the text).
type Digest struct {
	Name     string // the digest's name
	Period   string // which send of it this is: a scheduled minute or a crossing
	Provider string
	To       string
	Text     string
	At       time.Time
	// JobID names the delivery job; MaxAttempts is its attempts.
	JobID       string
	MaxAttempts int
}

// DigestID is the outbox id of the digest name's send for period.
func DigestID(name, period string) string { return "digest:" + name + ":" + period }

// CreateDigestTx creates the digest's row "digest:<name>:<period>",
// pending, and its delivery job inside the caller's transaction. The row
// is a message to the team as a stuck-lead alert is (store.OutboxAlert:
// no lead moves when it is sent, retention prunes it), and goes out with
// the delivery rules of a reply: claimed before the call, every attempt
// recorded, an unknown outcome resolved by the provider's key or lookup
// or parked for a person, never resent blindly. A row that exists already
// is left alone (created is false), so a period is sent at most once.
func CreateDigestTx(tx *store.Tx, dg Digest) (created bool, err error) {
	return createTeamTx(tx, store.Outbox{
		V: 1, ID: DigestID(dg.Name, dg.Period), Kind: store.OutboxAlert, CorrelationID: "digest:" + dg.Name,
		To: dg.To, Text: dg.Text, Provider: dg.Provider, Status: store.OutboxPending,
		CreatedAt: dg.At, UpdatedAt: dg.At, ApprovedBy: "digest " + dg.Name, Attempts: []store.OutboxAttempt{},
	}, dg.JobID, dg.MaxAttempts)
}
