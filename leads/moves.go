package leads

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/handoff/handoff/store"
)

// The lead's moves other concepts cause run here, each inside the caller's
// transaction that stores what justifies it: an inbound message (ReceiveTx,
// through RecordTx), a stored draft (DraftedTx, from review), a sent reply
// (ReplyTx, from delivery), a person's close (CloseTx, from review). The
// store keeps the record and its status index; it assigns no status.

// move puts h into status at now, recording the transition; old is the lead
// as stored (nil: a new one), so the store moves its index entries (the
// status's, and the search's when the contact or name changed).
func move(tx *store.Tx, old, h *store.Handoff, status store.HandoffStatus, now time.Time, eventKey, note string) error {
	h.Status, h.Since = status, now
	h.History = append(slices.Clip(h.History), store.Transition{Cycle: h.Cycle, Status: status, At: now, EventKey: eventKey, Note: note})
	if err := tx.PutHandoff(old, h); err != nil {
		return err
	}
	return tx.LeadMoved(*h, now)
}

// DraftedTx moves the lead of d, a draft just stored in tx for an event
// whose contact is contact, forward: matched when a contact is identified,
// owned when routing named an owner.
//
// viaCRM says the lead's client has a CRM (crm[]): there matched means the
// CRM holds the lead's record and only its write moves the lead
// (CRMRecordTx), so a lead still received stays received here, with the
// contact recorded and routing's owner kept on it (h.Owner, which the
// lead's next writes carry, and h.Assigned, which the move to owned takes
// once the record exists). A lead already matched (its record written)
// moves to owned with routing's owner, as without a CRM.
func DraftedTx(tx *store.Tx, d store.Draft, contact string, viaCRM bool, now time.Time) error {
	h, err := tx.Handoff(store.LeadKey(d.Channel, d.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of %s: %w", d.EventKey, err)
	}
	if contact == "" {
		contact = d.Fields["email"]
	}
	if contact == "" {
		contact = d.Fields["phone"]
	}
	routed := "routed to " + d.Owner + " by " + d.RuleVersion + " " + d.Rule
	if h.Status == Received && viaCRM {
		old := h
		if contact != "" {
			h.Contact = contact
		}
		if d.Owner != "" {
			h.Owner = d.Owner // routing's wins over the CRM's (CRMOwnerTx)
			h.Assigned = &store.Assignment{Cycle: h.Cycle, Owner: d.Owner, Routed: true, Note: routed, EventKey: d.EventKey}
		}
		if h.Contact == old.Contact && h.Owner == old.Owner && d.Owner == "" {
			return nil
		}
		return tx.PutHandoff(&old, &h)
	}
	if h.Status == Received && contact != "" {
		old := h
		h.Contact = contact
		if err := move(tx, &old, &h, Matched, now, d.EventKey, "contact identified"); err != nil {
			return err
		}
	}
	if h.Status == Matched && d.Owner != "" {
		old := h
		h.Owner = d.Owner
		return move(tx, &old, &h, Owned, now, d.EventKey, routed)
	}
	return nil
}

// ReplyTx moves the lead of o, a reply just sent in tx, to replied. An
// alert to the team or a CRM write is no reply, and a lead already replied,
// closed or with a newer message still unanswered does not move (it must
// not look done).
func ReplyTx(tx *store.Tx, o store.Outbox, now time.Time) error {
	if o.Kind != "" {
		return nil
	}
	h, err := tx.Handoff(store.LeadKey(o.Channel, o.ConversationID))
	if err != nil {
		return fmt.Errorf("lead of %s: %w", o.ID, err)
	}
	latest, err := answersLatest(tx, o, h)
	if err != nil || !Open(h.Status) || !latest {
		return err
	}
	old := h
	return move(tx, &old, &h, Replied, now, o.EventKey, "reply "+o.ID+" sent")
}

// answersLatest reports whether reply o answers h's latest message: its
// draft's turn (turns.go) holds it, a burst drafted under its first message
// included.
func answersLatest(tx *store.Tx, o store.Outbox, h store.Handoff) (bool, error) {
	if h.LastEventKey == o.EventKey || o.DraftID == "" {
		return h.LastEventKey == o.EventKey, nil
	}
	d, err := tx.Draft(o.DraftID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // retention took the draft; only its own event counts
	}
	if err != nil {
		return false, fmt.Errorf("draft %s of reply %s: %w", o.DraftID, o.ID, err)
	}
	return slices.Contains(d.AnsweredEvents(), h.LastEventKey), nil
}

// CloseTx ends the open turn of lead h (as read in tx) without a reply, as
// c says: the lead moves to closed, which no stuck alert watches, until a
// new message reopens it at received. Whether it may close is the caller's
// rule (review.CloseTx).
func CloseTx(tx *store.Tx, h store.Handoff, c store.Closure) (store.Handoff, error) {
	old := h
	c.TurnDraft, c.TurnEvents = h.TurnDraft, slices.Clone(h.TurnEvents) // what an undo puts back (ReopenTx)
	h.TurnDraft, h.TurnEvents, h.Closed = "", nil, &c
	note := "closed without a reply by " + c.By
	if c.Reason != "" {
		note += ": " + c.Reason
	}
	if err := move(tx, &old, &h, Closed, c.At, h.LastEventKey, note); err != nil {
		return store.Handoff{}, err
	}
	return h, nil
}
