package crm_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestStuckInMatchedOnBothSides: a lead left matched past its threshold is
// flagged stuck in handoff and, in the same transaction, gets one more
// write whose handoff_status reads "matched (stuck)", once per stay
// (the sweep again writes nothing), after the stay's own write, through
// a 503 and a 429; its next move writes its status without the marker.
func TestStuckInMatchedOnBothSides(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		Owners: map[string]string{"ana": "7001"}})
	text := corpus.Texts()[2] // Arabic
	ev := b.receiveText("m1", "c1", "+1 555 0100", text.From, text.Body)
	b.draft(ev, "") // matched: a contact, no owner
	lead := store.LeadKey("web", "c1")
	hs.add("upsert", "503", "429")
	b.run(2)
	b.settled("c1")

	// A threshold of 1 ns: the lead, matched before now, is past it (the
	// sweep's now is the real one, which the write's job runs at).
	after := map[store.HandoffStatus]time.Duration{leads.Matched: time.Nanosecond}
	for range 2 { // the second sweep finds the stay flagged: nothing new
		flagged, err := leads.FlagStuck(context.Background(), b.st, time.Now(), after, crm.StuckHook(b.cfg))
		if err != nil {
			t.Fatal(err)
		}
		if len(flagged) > 1 {
			t.Fatalf("flagged %d leads", len(flagged))
		}
		b.wake()
	}
	stuckID := crm.RowID(lead, 1, "matched") + ":stuck"
	waitRow(t, b, stuckID)
	h, _ := b.st.Handoff(lead)
	if !h.Stuck() || h.Status != "matched" {
		t.Errorf("lead = %s stuck %v, want matched and flagged", h.Status, h.Stuck())
	}
	if got := hs.contact(lead)["handoff_status"]; got != "matched (stuck)" {
		t.Errorf("the contact's handoff_status = %q, want %q", got, "matched (stuck)")
	}
	if k, ok := crm.ParseWriteKey(stuckID); !ok || !k.Stuck || k.Status != "matched" {
		t.Errorf("ParseWriteKey(%s) = %+v %v", stuckID, k, ok)
	}
	n := hs.upsertsOf(lead)

	// Its owner arrives: owned, written without the marker, after it.
	b.draft(b.receiveText("m2", "c1", "+1 555 0100", text.From, "and my number is +1 555 0100"), "ana")
	b.settled("c1")
	c := hs.contact(lead)
	if c["handoff_status"] != "owned" {
		t.Errorf("after the move, handoff_status = %q, want the new status without the marker", c["handoff_status"])
	}
	if hs.upsertsOf(lead) <= n {
		t.Errorf("no write after the stuck one")
	}
	rows := b.rows("c1")
	if _, ok := rows[stuckID]; ok {
		t.Errorf("RowIDs lists the stuck write %s: it is no move", stuckID)
	}
}

// waitRow waits until row id is sent, and fails if it ends otherwise.
func waitRow(t *testing.T, b *bed, id string) {
	t.Helper()
	var o store.Outbox
	testkit.Eventually(t, 20*time.Second, func() bool {
		var err error
		o, err = b.st.OutboxRow(id)
		b.wake()
		return err == nil && o.Status != store.OutboxPending && o.Status != store.OutboxEffectPending
	}, "row "+id+" to settle")
	if o.Status != store.OutboxSent {
		t.Fatalf("row %s ended %s: %s", id, o.Status, o.Note)
	}
}

// TestStuckWriteKeepsTheOrder: a lead flagged stuck in received, waiting
// for its record, then given routing's owner before any write went out:
// the stuck write goes after received's, and the record's moves (matched,
// owned, made when received's write is on it) after the stuck one, so the
// record ends owned, never "received (stuck)" over it. On Pipedrive, with the stuck write's answer lost (its outcome
// unknown), the lookup finds the person holding "matched (stuck)".
func TestStuckWriteKeepsTheOrder(t *testing.T) {
	t.Run("hubspot", func(t *testing.T) {
		hs := newHubSpot(t)
		b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
			Owners: map[string]string{"ana": "7001"}})
		text := corpus.Texts()[4]
		ev := b.receiveText("m1", "c1", "+1 555 0100", text.From, text.Body)
		b.draft(ev, "")
		if _, err := leads.FlagStuck(context.Background(), b.st, time.Now(), map[store.HandoffStatus]time.Duration{leads.Received: time.Nanosecond}, crm.StuckHook(b.cfg)); err != nil {
			t.Fatal(err)
		}
		b.draft(b.receiveText("m2", "c1", "+1 555 0100", text.From, corpus.Texts()[6].Body), "ana")
		hs.add("upsert", "503", "drop")
		b.run(3)
		waitRow(t, b, crm.RowID(store.LeadKey("web", "c1"), 1, "received")+":stuck")
		b.waitLead("c1", "owned")
		b.settled("c1")
		hs.mu.Lock()
		got := hs.statuses[store.LeadKey("web", "c1")]
		hs.mu.Unlock()
		var order []string
		for _, s := range got {
			if len(order) == 0 || order[len(order)-1] != s {
				order = append(order, s) // a resend repeats its status
			}
		}
		if want := []string{"received", "received (stuck)", "matched", "owned"}; !reflect.DeepEqual(order, want) {
			t.Errorf("the contact's handoff_status went %v (upserts %v), want %v", order, got, want)
		}
	})
	t.Run("pipedrive", func(t *testing.T) {
		pd := newPipedrive(t, 0)
		b := newBed(t, config.CRM{Kind: config.CRMPipedrive, APIBase: pd.srv.URL, Token: pd.token, ReferenceField: "ref_key", StatusField: "status_key",
			LookupSettle: 50 * time.Millisecond})
		text := corpus.Texts()[3]
		ev := b.receiveText("m1", "c1", "dana@example.com", text.From, text.Body)
		b.draft(ev, "")
		b.run(2)
		b.settled("c1")
		pd.add("PATCH "+crm.PipedrivePersons+"/{id}", "drop")
		if _, err := leads.FlagStuck(context.Background(), b.st, time.Now(), map[store.HandoffStatus]time.Duration{leads.Matched: time.Nanosecond}, crm.StuckHook(b.cfg)); err != nil {
			t.Fatal(err)
		}
		b.wake()
		id := crm.RowID(store.LeadKey("web", "c1"), 1, "matched") + ":stuck"
		waitRow(t, b, id)
		ps := pd.byRef("ref_key", crm.Reference(store.LeadKey("web", "c1")))
		if len(ps) != 1 || ps[0].CustomFields["status_key"] != "matched (stuck)" {
			t.Errorf("persons = %+v, want one holding matched (stuck)", ps)
		}
		if o, _ := b.st.OutboxRow(id); !strings.Contains(actions(o), "ambiguous") {
			t.Errorf("the stuck write's attempts = %q, want the lost answer among them", actions(o))
		}
	})
}

// TestStuckWriteReadsTheOwnerAgain: the portal's workflow assigns the
// owner only after the lead's writes went out (HubSpot's workflows run
// after the write): the lead sits matched without an owner until the stuck
// sweep's write, after which the owner is read back and the lead is owned.
func TestStuckWriteReadsTheOwnerAgain(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		Owners: map[string]string{"ana": "7001"}})
	text := corpus.Texts()[7]
	b.draft(b.receiveText("m1", "c1", "+1 555 0100", text.From, text.Body), "")
	b.run(2)
	b.settled("c1")
	if h, _ := b.st.Handoff(store.LeadKey("web", "c1")); h.Status != "matched" {
		t.Fatalf("lead is %s before the workflow ran, want matched", h.Status)
	}
	hs.mu.Lock()
	hs.assign = func(map[string]string) string { return "7001" } // the workflow, late
	hs.mu.Unlock()
	if _, err := leads.FlagStuck(context.Background(), b.st, time.Now(), map[store.HandoffStatus]time.Duration{leads.Matched: time.Nanosecond}, crm.StuckHook(b.cfg)); err != nil {
		t.Fatal(err)
	}
	b.wake()
	h := b.waitLead("c1", "owned")
	if h.Owner != "ana" {
		t.Errorf("owner = %q, want ana", h.Owner)
	}
	b.settled("c1")
	if got := hs.contact(store.LeadKey("web", "c1"))["handoff_status"]; got != "owned" {
		t.Errorf("handoff_status = %q, want owned", got)
	}
}
