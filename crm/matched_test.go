package crm_test

import (
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestMatchedOnceTheRecordExists: a CRM client's leads, drafted and routed
// to ana while the CRM answers 503 and 429, stay received (contact and
// owner kept) until HubSpot accepts their first write; the transaction
// that records it moves each to matched ("the CRM holds its record"), then
// owned by routing's ana, and those moves reach the contact in order, its
// owner ana's HubSpot user. At the first upsert HubSpot applies, the lead
// is still received.
func TestMatchedOnceTheRecordExists(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		Owners: map[string]string{"ana": "7001"}})
	var mu sync.Mutex
	atFirst := map[string]store.HandoffStatus{} // the lead's status as HubSpot applied its first upsert
	hs.assign = func(c map[string]string) string {
		lead := c["handoff_lead_key"]
		h, err := b.st.Handoff(lead)
		mu.Lock()
		defer mu.Unlock()
		if _, seen := atFirst[lead]; !seen && err == nil {
			atFirst[lead] = h.Status
		}
		return ""
	}
	hs.add("upsert", "503", "429", "503")
	var convs []string
	for i, text := range corpus.Texts() {
		conv := "c" + strconv.Itoa(i)
		convs = append(convs, conv)
		ev := b.receiveText("m"+strconv.Itoa(i), conv, "+1 555 02"+strconv.Itoa(10+i), text.From, text.Body)
		b.draft(ev, "ana")
		h, _ := b.st.Handoff(store.LeadKey("web", conv))
		if h.Status != leads.Received || h.Owner != "ana" || h.Assigned == nil || len(b.rows(conv)) != 1 {
			t.Fatalf("lead %s drafted before its record exists = %s owner %q assigned %+v rows %d, want received, ana kept, one write", conv, h.Status, h.Owner, h.Assigned, len(b.rows(conv)))
		}
	}
	b.run(3)
	for _, conv := range convs {
		b.waitLead(conv, leads.Owned)
	}
	b.settled(convs...)
	for _, conv := range convs {
		lead := store.LeadKey("web", conv)
		h, _ := b.st.Handoff(lead)
		if got, want := notes(h), []string{"received: message received", "matched: the CRM holds its record", "owned: routed to ana by r1 default"}; !reflect.DeepEqual(got, want) {
			t.Errorf("lead %s history %q, want %q", conv, got, want)
		}
		if h.Owner != "ana" || h.Assigned != nil {
			t.Errorf("lead %s owner %q assigned %+v, want ana and nothing left kept", conv, h.Owner, h.Assigned)
		}
		mu.Lock()
		first := atFirst[lead]
		mu.Unlock()
		if first != leads.Received {
			t.Errorf("lead %s was %q when HubSpot applied its first write, want received", conv, first)
		}
		hs.mu.Lock()
		got := hs.statuses[lead]
		hs.mu.Unlock()
		if order := dedupe(got); !reflect.DeepEqual(order, []string{"received", "matched", "owned"}) {
			t.Errorf("lead %s: the contact's handoff_status went %v, want received, matched, owned", conv, order)
		}
		if c := hs.contact(lead); c["handoff_status"] != "owned" || c[crm.PropOwner] != "7001" {
			t.Errorf("lead %s: contact %v, want owned by 7001", conv, c)
		}
	}
}

// TestRequiredWaitsForTheRecordsMoves: with crm[].required, a reply
// approved while its lead still waits, received, for its record is held
// until the moves the record's write makes (matched, then owned by
// routing's owner) are on the record too: the customer hears nothing
// before the contact is owned, its owner on it.
func TestRequiredWaitsForTheRecordsMoves(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		Owners: map[string]string{"ana": "7001"}, Required: true})
	hs.add("upsert", "ok", "ok", "503", "429") // received and matched land; owned only on its third try
	lead := store.LeadKey("web", "c1")
	owned := crm.RowID(lead, 1, "owned")
	cust := &customer{t: t, st: b.st, want: owned}
	b.senders["sandbox"] = cust
	gate := crm.Gate(b.cfg, b.st)
	b.gate = func(o store.Outbox, now time.Time) (time.Duration, string) {
		wait, why := gate(o, now)
		if wait > 0 {
			wait = 5 * time.Millisecond // ask again soon: the test waits on the outcome, not the clock
		}
		return wait, why
	}
	text := corpus.Texts()[1]
	d := b.draft(b.receiveText("m1", "c1", "+1 555 0100", text.From, text.Body), "ana")
	if _, err := review.New(b.st, b.cfg).Approve(t.Context(), d.ID, store.Decision{By: "tester", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.st.Handoff(lead); h.Status != leads.Received {
		t.Fatalf("lead %s at approval, want received (no write went out)", h.Status)
	}
	b.run(2)
	testkit.Eventually(t, 20*time.Second, func() bool {
		cust.mu.Lock()
		defer cust.mu.Unlock()
		return cust.sent == 1
	}, "the reply to reach the customer")
	if c := hs.contact(lead); c[crm.PropOwner] != "7001" {
		t.Errorf("contact %v when the reply went, want its owner 7001", c)
	}
	// The customer has the reply before its send is recorded; the lead's
	// replied write is made in that record's transaction, so wait for it
	// before asking every write to settle (else it may not exist yet).
	testkit.Eventually(t, 20*time.Second, func() bool {
		h, err := b.st.Handoff(lead)
		return err == nil && h.Status == leads.Replied
	}, "the lead to be replied")
	b.settled("c1")
}

// dedupe drops repeats in a row (a resend repeats its status).
func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// notes are lead h's history as "<status>: <note>".
func notes(h store.Handoff) []string {
	var out []string
	for _, tr := range h.History {
		out = append(out, string(tr.Status)+": "+tr.Note)
	}
	return out
}
