package leads_test

import (
	"context"
	"slices"
	"testing"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// crmLead is a bed for the moves of a lead whose client has a CRM.
type crmLead struct {
	t  *testing.T
	st *store.Store
}

func (c crmLead) update(fn func(tx *store.Tx) error) {
	c.t.Helper()
	if err := c.st.Update(context.Background(), fn); err != nil {
		c.t.Fatal(err)
	}
}

// owner is the CRM's owner read back after a write of cycle answered.
func (c crmLead) owner(conv string, cycle int) (moved bool) {
	c.t.Helper()
	c.update(func(tx *store.Tx) (err error) {
		moved, err = leads.CRMOwnerTx(tx, store.LeadKey("web", conv), cycle, "hubspot user 7999", "hubspot assigned the record to user 7999", t0.Add(2))
		return err
	})
	return moved
}

// record is a write of cycle recorded on the CRM's record.
func (c crmLead) record(conv string, cycle int) (moved bool) {
	c.t.Helper()
	c.update(func(tx *store.Tx) (err error) {
		moved, err = leads.CRMRecordTx(tx, store.LeadKey("web", conv), cycle, t0.Add(3))
		return err
	})
	return moved
}

// drafted is DraftedTx of a draft of ev routed to owner, for a client with
// a CRM (viaCRM).
func (c crmLead) drafted(ev store.Event, owner string, viaCRM bool) {
	c.t.Helper()
	c.update(func(tx *store.Tx) error {
		d := store.Draft{EventKey: ev.Key, Channel: ev.Channel, ConversationID: ev.ConversationID, Owner: owner, RuleVersion: "r1", Rule: "default"}
		return leads.DraftedTx(tx, d, ev.Contact, viaCRM, t0.Add(1))
	})
}

func notes(h store.Handoff) []string {
	var out []string
	for _, tr := range h.History {
		out = append(out, string(tr.Status)+": "+tr.Note)
	}
	return out
}

// TestCRMRecordTx: a CRM client's lead stays received when drafted (the
// contact and routing's owner kept on it) until a write of its cycle is on
// the record: then matched, then owned with routing's owner.
func TestCRMRecordTx(t *testing.T) {
	c := crmLead{t, openStore(t, "")}
	ev := receive(t, c.st, "m1", "c1", "+1 555 0100", t0)
	c.drafted(ev, "ana", true)
	h := lead(t, c.st, "c1")
	if h.Status != leads.Received || h.Owner != "ana" || h.Contact != "+1 555 0100" || h.Assigned == nil || !h.Assigned.Routed || h.Assigned.Cycle != 1 {
		t.Fatalf("drafted lead of a CRM client = %s owner %q contact %q assigned %+v, want received with ana kept", h.Status, h.Owner, h.Contact, h.Assigned)
	}
	if c.record("c1", 2) || lead(t, c.st, "c1").Status != leads.Received {
		t.Error("a write of another cycle moved the lead")
	}
	if !c.record("c1", 1) {
		t.Fatal("the write on the record did not move the lead")
	}
	h = lead(t, c.st, "c1")
	want := []string{"received: message received", "matched: the CRM holds its record", "owned: routed to ana by r1 default"}
	if h.Status != leads.Owned || h.Owner != "ana" || h.Assigned != nil || !slices.Equal(notes(h), want) {
		t.Errorf("lead = %s %q assigned %+v %q, want owned by ana: %q", h.Status, h.Owner, h.Assigned, notes(h), want)
	}
	if c.record("c1", 1) {
		t.Error("a second write on the record moved an owned lead")
	}

	// Without an owner the record only matches it; a later draft's owner
	// then owns it at once (the record exists).
	ev = receive(t, c.st, "m2", "c2", "", t0)
	if !c.record("c2", 1) || lead(t, c.st, "c2").Status != leads.Matched {
		t.Fatalf("lead c2 = %s, want matched", lead(t, c.st, "c2").Status)
	}
	c.drafted(ev, "bo", true)
	if h := lead(t, c.st, "c2"); h.Status != leads.Owned || h.Owner != "bo" {
		t.Errorf("lead c2 = %s %q, want owned by bo", h.Status, h.Owner)
	}

	// A lead replied while it waited is not moved back.
	ev = receive(t, c.st, "m3", "c3", "+1 555 0101", t0)
	send(t, c.st, saveDraft(t, c.st, ev, "", nil, t0), t0) // testConfig has no CRM: matched, replied
	if c.record("c3", 1) || lead(t, c.st, "c3").Status != leads.Replied {
		t.Error("a replied lead moved")
	}

	// Without a CRM, a draft moves the lead as it always did.
	ev = receive(t, c.st, "m4", "c4", "+1 555 0102", t0)
	c.drafted(ev, "ana", false)
	if h := lead(t, c.st, "c4"); h.Status != leads.Owned || h.Assigned != nil || !slices.Equal(notes(h), []string{"received: message received", "matched: contact identified", "owned: routed to ana by r1 default"}) {
		t.Errorf("lead without a CRM = %s %q, want matched then owned by the draft", h.Status, notes(h))
	}
}

// TestCRMOwnerTx: the CRM's owner, read back after a write, is kept on a
// lead still received (it moves when the write is recorded: matched, then
// owned by the CRM's owner) and owns a matched one at once; routing's owner
// wins, and a lead of another cycle or moved past matched stays.
func TestCRMOwnerTx(t *testing.T) {
	c := crmLead{t, openStore(t, "")}
	receive(t, c.st, "m1", "c1", "", t0) // received, no contact
	if c.owner("c1", 1) {
		t.Fatal("a received lead moved before its write was recorded")
	}
	if h := lead(t, c.st, "c1"); h.Status != leads.Received || h.Owner != "hubspot user 7999" || h.Assigned == nil || h.Assigned.Routed {
		t.Fatalf("lead = %s %q %+v, want received with the CRM's owner kept", h.Status, h.Owner, h.Assigned)
	}
	if !c.record("c1", 1) {
		t.Fatal("the recorded write did not move the lead")
	}
	h := lead(t, c.st, "c1")
	if want := []string{"received: message received", "matched: the CRM holds its record", "owned: hubspot assigned the record to user 7999"}; h.Status != leads.Owned || h.Owner != "hubspot user 7999" || !slices.Equal(notes(h), want) {
		t.Errorf("lead = %s %q %q, want %q", h.Status, h.Owner, notes(h), want)
	}
	if c.owner("c1", 1) {
		t.Error("an owned lead moved again")
	}

	// Routing's owner wins, before the CRM's read or after it.
	ev := receive(t, c.st, "m2", "c2", "+1 555 0100", t0)
	c.drafted(ev, "ana", true)
	if c.owner("c2", 1) || lead(t, c.st, "c2").Owner != "ana" {
		t.Error("the CRM's owner replaced routing's")
	}
	ev = receive(t, c.st, "m5", "c5", "+1 555 0105", t0)
	c.owner("c5", 1)
	c.drafted(ev, "ana", true)
	c.record("c5", 1)
	if h := lead(t, c.st, "c5"); h.Status != leads.Owned || h.Owner != "ana" {
		t.Errorf("lead c5 = %s %q, want owned by routing's ana over the CRM's", h.Status, h.Owner)
	}

	receive(t, c.st, "m3", "c3", "", t0)
	if c.owner("c3", 2) || lead(t, c.st, "c3").Status != leads.Received || lead(t, c.st, "c3").Owner != "" {
		t.Error("a read of another cycle changed the lead")
	}

	// Matched already (its record written): the CRM's owner owns it.
	receive(t, c.st, "m6", "c6", "", t0)
	c.record("c6", 1)
	if !c.owner("c6", 1) || lead(t, c.st, "c6").Status != leads.Owned {
		t.Errorf("matched lead c6 = %s, want owned by the CRM's owner", lead(t, c.st, "c6").Status)
	}

	ev = receive(t, c.st, "m4", "c4", "+1 555 0101", t0)
	send(t, c.st, saveDraft(t, c.st, ev, "", nil, t0), t0) // matched, then replied
	if c.owner("c4", 1) || lead(t, c.st, "c4").Status != leads.Replied {
		t.Error("a replied lead moved")
	}
}
