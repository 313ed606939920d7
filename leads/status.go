package leads

import (
	"slices"
	"strings"

	"github.com/handoff/handoff/store"
)

// The statuses of a lead's cycle (docs/contract.md, "Lead states"), each
// one's moves in this package: a message moves a new, replied or closed
// lead to Received (ReceiveTx); a stored draft moves it on to Matched, then
// Owned (DraftedTx) — for a client with a CRM, its record's write does, once
// it is on the record (CRMRecordTx: matched, the CRM holds it; owned, it has
// an owner) —; a sent reply to Replied (ReplyTx); a person's close to
// Closed (CloseTx).
const (
	Received store.HandoffStatus = "received"
	Matched  store.HandoffStatus = "matched"
	Owned    store.HandoffStatus = "owned"
	Replied  store.HandoffStatus = "replied"
	// Closed ends a turn without a reply (a person closed it, with a
	// reason); a new message reopens the lead at Received.
	Closed store.HandoffStatus = "closed"
)

// Statuses are every status of a lead, in the order its cycle runs: the
// order the lists walk (List), the API's and the page's status filter.
var Statuses = []store.HandoffStatus{Received, Matched, Owned, Replied, Closed}

// OpenStatuses are the statuses of a lead whose customer waits for an
// answer: the ones a lead can be stuck in (FlagStuck), in order.
var OpenStatuses = []store.HandoffStatus{Received, Matched, Owned}

// Open reports whether a lead in status s waits for an answer (one of
// OpenStatuses); a replied or closed lead does not, until a new message
// reopens it.
func Open(s store.HandoffStatus) bool { return slices.Contains(OpenStatuses, s) }

// Valid reports whether s is one of Statuses.
func Valid(s store.HandoffStatus) bool { return slices.Contains(Statuses, s) }

// TurnOpen reports whether lead h has a turn waiting for a reply: a turn
// drafted or being drafted, or, on a lead recorded before turns were kept,
// a status that waits for an answer.
func TurnOpen(h store.Handoff) bool { return h.TurnDraft != "" || h.Turn == 0 && Open(h.Status) }

// Names lists ss for a sentence: "received, matched or owned" with or,
// "received, matched, owned" with "".
func Names(ss []store.HandoffStatus, or string) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	if or == "" || len(names) < 2 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + or + " " + names[len(names)-1]
}
