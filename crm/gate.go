package crm

import (
	"fmt"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// How long a held reply waits before the delivery job asks again: soon
// while the CRM write is on its way, longer while it waits for a person,
// growing with how long the write has been so (waitFor), so a write dead
// for days costs a few hundred snoozes a day, not thousands.
const (
	gateWaiting = 2 * time.Second
	gateStuck   = 30 * time.Second
	gateMax     = 10 * time.Minute
)

// Gate is the delivery job's hold for the clients whose CRM is required
// (crm[].required): a reply waits, before its first send, until the newest
// CRM write of its lead made before the reply was approved is on the
// record. A write in flight holds it briefly; one that failed or whose
// outcome is unknown holds it until a person replays, reconciles or
// dismisses that write in the dead letters (a dismissed write releases the
// reply: the person decided). A lead without CRM writes (moved before the
// CRM was configured) is not held: there is nothing to wait for.
func Gate(cfg *config.Config, st *store.Store) func(row store.Outbox, now time.Time) (time.Duration, string) {
	return func(row store.Outbox, _ time.Time) (time.Duration, string) {
		m, ok := cfg.CRMFor(row.Channel)
		if !ok || !m.Required {
			return 0, ""
		}
		h, err := st.Handoff(store.LeadKey(row.Channel, row.ConversationID))
		if err != nil {
			return 0, "" // the lead's own problem; the send says it
		}
		// The newest write made before the approval decides: the writes of
		// a lead go out in order, so once it is on the record the record
		// holds the lead as the approver saw it (an older write that failed
		// is moot); if it is not, the record lacks the latest status (an
		// owner, say), whatever older writes did.
		//
		// A lead of a client with a CRM is matched, then owned, by its
		// record's write (CRMRecordTx), often after the reply was approved:
		// those two moves of the cycle as approved only put on the record
		// what the approver saw (the contact, routing's owner), so their
		// writes count too, and the reply waits for the owner on the record.
		ids := RowIDs(h)
		approved := -1 // the lead's cycle when the reply was approved
		for i := len(h.History) - 1; i >= 0 && approved < 0; i-- {
			if !h.History[i].At.After(row.CreatedAt) {
				approved = h.History[i].Cycle
			}
		}
		for i := len(h.History) - 1; i >= 0; i-- {
			t := h.History[i]
			if t.At.After(row.CreatedAt) && (t.Cycle != approved || t.Status != leads.Matched && t.Status != leads.Owned) {
				continue
			}
			id := ids[i]
			o, err := st.OutboxRow(id)
			if err != nil {
				continue // moved before the CRM was configured
			}
			switch {
			case o.Status == store.OutboxSent || o.Dismissed != nil:
				return 0, ""
			case o.Status == store.OutboxPending || o.Status == store.OutboxEffectPending:
				return waitFor(o.CreatedAt, gateWaiting, time.Minute), fmt.Sprintf("reply held until the lead's CRM write %s is on the record (crm[].required): it is %s", id, o.Status)
			default:
				return waitFor(o.UpdatedAt, gateStuck, gateMax), fmt.Sprintf("reply held: the lead's CRM write %s is %s (%s); replay, reconcile or dismiss it in the dead letters and the reply goes (crm[].required)", id, o.Status, o.Note)
			}
		}
		return 0, ""
	}
}
