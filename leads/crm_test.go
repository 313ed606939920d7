package leads_test

import (
	"context"
	"testing"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// TestCRMOwnerTx: the CRM's owner moves a lead without one forward
// (received → matched → owned, the history naming why); a lead routing gave
// an owner, one in another cycle, or one moved past matched stays.
func TestCRMOwnerTx(t *testing.T) {
	st := openStore(t, "")
	ctx := context.Background()
	ownerTx := func(conv string, cycle int) bool {
		t.Helper()
		var moved bool
		if err := st.Update(ctx, func(tx *store.Tx) error {
			var err error
			moved, err = leads.CRMOwnerTx(tx, store.LeadKey("web", conv), cycle, "hubspot user 7999", "hubspot assigned the record to user 7999", t0.Add(1))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return moved
	}

	receive(t, st, "m1", "c1", "", t0) // received, no contact
	if !ownerTx("c1", 1) {
		t.Fatal("a received lead did not move")
	}
	h := lead(t, st, "c1")
	if h.Status != leads.Owned || h.Owner != "hubspot user 7999" || len(h.History) != 3 ||
		h.History[1].Status != leads.Matched || h.History[1].Note != "the CRM holds its record" || h.History[2].Note != "hubspot assigned the record to user 7999" {
		t.Errorf("lead = %s %q %+v", h.Status, h.Owner, h.History)
	}
	if ownerTx("c1", 1) {
		t.Error("an owned lead moved again")
	}

	ev := receive(t, st, "m2", "c2", "+1 555 0100", t0)
	saveDraft(t, st, ev, "ana", nil, t0) // routing: matched, owned by ana
	if ownerTx("c2", 1) || lead(t, st, "c2").Owner != "ana" {
		t.Error("the CRM's owner replaced routing's")
	}

	receive(t, st, "m3", "c3", "", t0)
	if ownerTx("c3", 2) || lead(t, st, "c3").Status != leads.Received {
		t.Error("a write of another cycle moved the lead")
	}

	ev = receive(t, st, "m4", "c4", "+1 555 0101", t0)
	send(t, st, saveDraft(t, st, ev, "", nil, t0), t0) // matched, then replied
	if ownerTx("c4", 1) || lead(t, st, "c4").Status != leads.Replied {
		t.Error("a replied lead moved")
	}
}
