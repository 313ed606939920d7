package leads

import (
	"errors"
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// CRMOwnerTx moves lead key forward after its CRM, by its own rules (a
// HubSpot workflow setting hubspot_owner_id, a Pipedrive owner other than
// the API token's user), gave the record owner, read back right after a
// write of cycle answered: a lead of cycle still matched and without an
// owner moves to owned with owner, the note naming the CRM's assignment.
// A lead of cycle still received (the write that answered is not recorded
// as on the record yet: that transaction follows, CRMRecordTx) keeps the
// owner (h.Owner and h.Assigned) for the move to owned that follows its
// move to matched. A lead moved on meanwhile (another cycle, an owner from
// routing, a reply, a close) stays: routing's owner and a later status
// win. moved is false when nothing moved (a kept owner moves nothing yet).
func CRMOwnerTx(tx *store.Tx, key string, cycle int, owner, note string, now time.Time) (moved bool, err error) {
	h, err := tx.Handoff(key)
	if err != nil {
		return false, fmt.Errorf("lead %s: %w", key, err)
	}
	if h.Cycle != cycle || h.Owner != "" || owner == "" {
		return false, nil
	}
	old := h
	h.Owner = owner
	switch h.Status {
	case Received:
		h.Assigned = &store.Assignment{Cycle: cycle, Owner: owner, Note: note, EventKey: h.LastEventKey}
		return false, tx.PutHandoff(&old, &h)
	case Matched:
		if err := move(tx, &old, &h, Owned, now, h.LastEventKey, note); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// CRMRecordTx moves lead key forward once a CRM write of its cycle is on
// the record (the write's row just recorded sent in tx: the CRM holds the
// lead's record, found or created): a lead of cycle still received moves
// to matched, then to owned when an owner was kept for the cycle while it
// waited (h.Assigned: routing's, else the CRM's read back). A lead moved on
// meanwhile (another cycle, a reply, a close, matched already) stays, and
// so does an erased one (not found). moved is false when nothing moved.
func CRMRecordTx(tx *store.Tx, key string, cycle int, now time.Time) (moved bool, err error) {
	h, err := tx.Handoff(key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lead %s: %w", key, err)
	}
	if h.Cycle != cycle || h.Status != Received {
		return false, nil
	}
	old := h
	a := h.Assigned
	h.Assigned = nil
	if err := move(tx, &old, &h, Matched, now, h.LastEventKey, "the CRM holds its record"); err != nil {
		return false, err
	}
	if a == nil || a.Cycle != h.Cycle || a.Owner == "" {
		return true, nil
	}
	old = h
	h.Owner = a.Owner
	if err := move(tx, &old, &h, Owned, now, a.EventKey, a.Note); err != nil {
		return false, err
	}
	return true, nil
}
