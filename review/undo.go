package review

import (
	"context"
	"fmt"
	"slices"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// Undone is the answer to Undo.
type Undone struct {
	Draft  store.Draft  // the draft, waiting for approval again
	Outbox store.Outbox // the reply taken back, as it was before it was deleted
}

// UndoTx takes back the approval of draft id, by dec.By at dec.At, in the
// caller's write transaction: the reply's outbox row and its delivery job
// are deleted (delivery.UndoTx: only while the row is pending, its job
// never claimed and the undo window open), the draft waits for approval
// again, the lead's turn is open again with the draft's messages, and the
// lead's history and the audit say who undid it. Refusals are
// *delivery.UndoError: a draft that is not approved, a reply already being
// sent, or a lead whose customer wrote again after the approval (the next
// turn has begun: the approved reply still answers the earlier one).
func UndoTx(tx *store.Tx, id string, dec store.Decision) (Undone, error) {
	d, err := tx.Draft(id)
	if err != nil {
		return Undone{}, err
	}
	if d.Status != store.DraftApproved || d.OutboxID == "" {
		return Undone{}, &delivery.UndoError{Why: fmt.Sprintf("draft %s is %s, not approved; there is no approval to undo", d.ID, d.Status)}
	}
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return Undone{}, fmt.Errorf("lead of draft %s: %w", d.ID, err)
	}
	if h.TurnDraft != "" || h.Status == leads.Closed || !slices.Contains(d.AnsweredEvents(), h.LastEventKey) {
		return Undone{}, &delivery.UndoError{OutboxID: d.OutboxID, Why: "the customer wrote again after the approval, so a new turn has begun; the reply can no longer be undone"}
	}
	o, err := delivery.UndoTx(tx, d.OutboxID, dec.At)
	if err != nil {
		return Undone{}, err
	}
	approved := d.Decision
	old := d
	d.Status, d.Decision, d.OutboxID = store.DraftPending, nil, ""
	if err := tx.PutDraft(&old, &d); err != nil {
		return Undone{}, err
	}
	oldLead := h
	if h.Turn > 0 { // a lead from before turns were kept has no turn to reopen
		h.TurnDraft, h.TurnEvents = d.EventKey, slices.Clone(d.AnsweredEvents())
	}
	note := "approval of " + d.ID + " undone by " + dec.By + "; the draft waits for approval again"
	h.History = append(slices.Clip(h.History), store.Transition{Cycle: h.Cycle, Status: h.Status, At: dec.At, EventKey: d.EventKey, Note: note})
	if err := tx.PutHandoff(&oldLead, &h); err != nil {
		return Undone{}, err
	}
	detail := "approval undone by " + dec.By + " before the reply was sent; outbox " + o.ID + " deleted"
	if approved != nil {
		detail += " (approved by " + approved.By + " at " + approved.At.UTC().Format("15:04:05 UTC")
		if approved.Edited {
			detail += ", with edited text, which is discarded"
		}
		detail += ")"
	}
	if err := tx.Audit(store.AuditEntry{At: dec.At, Who: dec.By, From: dec.From, Action: "undo approval", Target: d.ID, Detail: detail}); err != nil {
		return Undone{}, err
	}
	return Undone{Draft: d, Outbox: o}, nil
}

// Undo is UndoTx in a transaction of its own.
func (r *Review) Undo(ctx context.Context, id string, dec store.Decision) (Undone, error) {
	var out Undone
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = UndoTx(tx, id, dec)
		return err
	})
	if err != nil {
		return Undone{}, fmt.Errorf("review: undo the approval of draft %s: %w", id, err)
	}
	return out, nil
}
