package leads

import (
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// CRMOwnerTx moves lead key forward after its CRM, by its own rules (a
// HubSpot workflow setting hubspot_owner_id, a Pipedrive owner other than
// the API token's user), gave the record owner: a lead of cycle still
// received moves to matched (the CRM holds its record, just written), then
// one still matched and without an owner moves to owned with owner, the
// note naming the CRM's assignment. A lead moved on meanwhile (another
// cycle, an owner from routing, a reply, a close) stays: routing's owner
// and a later status win. moved is false when nothing moved.
func CRMOwnerTx(tx *store.Tx, key string, cycle int, owner, note string, now time.Time) (moved bool, err error) {
	h, err := tx.Handoff(key)
	if err != nil {
		return false, fmt.Errorf("lead %s: %w", key, err)
	}
	if h.Cycle != cycle || h.Owner != "" || owner == "" {
		return false, nil
	}
	if h.Status == Received {
		old := h
		if err := move(tx, &old, &h, Matched, now, h.LastEventKey, "the CRM holds its record"); err != nil {
			return false, err
		}
	}
	if h.Status != Matched {
		return false, nil
	}
	old := h
	h.Owner = owner
	if err := move(tx, &old, &h, Owned, now, h.LastEventKey, note); err != nil {
		return false, err
	}
	return true, nil
}
