package crm_test

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// waitLead waits until lead web:<conv> is in status, and returns it.
func (b *bed) waitLead(conv string, status store.HandoffStatus) store.Handoff {
	b.t.Helper()
	var h store.Handoff
	testkit.Eventually(b.t, 20*time.Second, func() bool {
		var err error
		h, err = b.st.Handoff(store.LeadKey("web", conv))
		return err == nil && h.Status == status
	}, "lead "+conv+" to be "+string(status))
	return h
}

// TestHubSpotAssignsTheOwner: no routing owner, the portal's workflow sets
// hubspot_owner_id on the contact: handoff reads it back after the write
// and the lead moves received → matched → owned with that owner (its
// routing name when crm[].owners maps the id), each move written back to
// the contact's handoff_status, once per status, under 503s and 429s.
func TestHubSpotAssignsTheOwner(t *testing.T) {
	hs := newHubSpot(t)
	hs.assign = func(c map[string]string) string {
		if strings.HasSuffix(c["handoff_lead_key"], "0") {
			return "7001" // mapped: ana
		}
		return "7999" // a HubSpot user routing does not know
	}
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		Owners: map[string]string{"ana": "7001"}})
	hs.add("upsert", "503", "429", "drop")
	hs.add("read", "503", "503") // owner reads fail: read again (a read is safe)
	texts := corpus.Texts()
	var convs []string
	for i, tx := range texts {
		conv := "c" + strconv.Itoa(i)
		convs = append(convs, conv)
		b.receiveText("m"+strconv.Itoa(i), conv, "+1 555 01"+fmt.Sprintf("%02d", i), tx.From, tx.Body)
	}
	b.run(3)
	for _, conv := range convs {
		h := b.waitLead(conv, "owned")
		want := "hubspot user 7999"
		if strings.HasSuffix(conv, "0") {
			want = "ana"
		}
		if h.Owner != want {
			t.Errorf("lead %s owner = %q, want %q", conv, h.Owner, want)
		}
		if n := h.History[len(h.History)-1].Note; !strings.Contains(n, "hubspot assigned the record to user") {
			t.Errorf("lead %s: owned's note = %q, want the CRM's assignment named", conv, n)
		}
	}
	b.settled(convs...)
	for i, conv := range convs {
		rows := b.rows(conv)
		got := statuses(rows)
		if want := []string{"matched", "owned", "received"}; !reflect.DeepEqual(got, want) {
			t.Errorf("lead %s: CRM rows %v, want %v", conv, got, want)
		}
		c := hs.contact(store.LeadKey("web", conv))
		if c["handoff_status"] != "owned" || c[crm.PropOwner] == "" || c[crm.PropLastMessage] != clipped(texts[i].Body) {
			t.Errorf("lead %s: contact %v, want handoff_status owned, its owner and its message", conv, c)
		}
		if n := hs.upsertsOf(store.LeadKey("web", conv)); n < 3 {
			t.Errorf("lead %s: %d upserts, want one per status (3) and resends", conv, n)
		}
	}
	if hs.count() != len(convs) {
		t.Errorf("HubSpot holds %d contacts, want %d", hs.count(), len(convs))
	}
}

// TestPipedriveAssignsTheOwner: a person created without an owner is the
// API token's user's in Pipedrive, which is no assignment: the lead, whose
// record the CRM holds, stays matched. An assignment rule's owner moves it
// on to owned.
func TestPipedriveAssignsTheOwner(t *testing.T) {
	pd := newPipedrive(t, 0)
	pd.assign = func(p crm.Person) int {
		if strings.Contains(p.Name, "Zo") { // the emoji text's sender, Zoë
			return 7002
		}
		return 0
	}
	b := newBed(t, config.CRM{Kind: config.CRMPipedrive, APIBase: pd.srv.URL, Token: pd.token, ReferenceField: "ref_key", StatusField: "status_key",
		Owners: map[string]string{"ben": "7002"}, LookupSettle: 50 * time.Millisecond})
	pd.add("GET "+crm.PipedriveMe, "503", "429")
	texts := corpus.Texts()
	b.receiveText("m1", "c1", "+1 555 0100", texts[1].From, texts[1].Body) // Zoë 🌸
	b.receiveText("m2", "c2", "ada@example.com", texts[0].From, texts[0].Body)
	b.run(2)
	h := b.waitLead("c1", "owned")
	if h.Owner != "ben" {
		t.Errorf("owner = %q, want ben (7002 in crm[].owners)", h.Owner)
	}
	b.settled("c1", "c2")
	// c2's person is the API user's: no owner. The CRM holds its record: matched.
	if h, _ := b.st.Handoff(store.LeadKey("web", "c2")); h.Status != "matched" || h.Owner != "" {
		t.Errorf("lead c2 = %s owner %q, want matched without owner (the API user owns what it creates)", h.Status, h.Owner)
	}
	ps := pd.byRef("ref_key", crm.Reference(store.LeadKey("web", "c1")))
	if len(ps) != 1 || ps[0].CustomFields["status_key"] != "owned" || ps[0].OwnerID != 7002 {
		t.Errorf("persons of c1 = %+v, want one, owned, owner 7002", ps)
	}
	if got := statuses(b.rows("c1")); !reflect.DeepEqual(got, []string{"matched", "owned", "received"}) {
		t.Errorf("c1's CRM rows = %v", got)
	}
}

// clipped is text as a record carries it: at most 1,000 characters.
func clipped(text string) string {
	if r := []rune(text); len(r) > 1000 {
		return string(r[:1000])
	}
	return text
}

// TestOwnerReadFailureIsLogged: when every read of the owner HubSpot gave
// the record fails (three 503s), the write stands, one warning names the
// CRM and the lead, and the lead's next write reads the owner again: the
// lead ends owned all the same.
func TestOwnerReadFailureIsLogged(t *testing.T) {
	hs := newHubSpot(t)
	hs.assign = func(map[string]string) string { return "7001" }
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		Owners: map[string]string{"ana": "7001"}})
	hs.add("read", "503", "503", "503")
	tx := corpus.TextNamed("fish")
	b.receiveText("m1", "c1", "+1 555 0100", tx.From, tx.Body)
	b.run(1)
	if h := b.waitLead("c1", "owned"); h.Owner != "ana" {
		t.Errorf("lead owner = %q, want ana (read again by its next write)", h.Owner)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "could not be read") || !strings.Contains(logs, "crm=crm:") || !strings.Contains(logs, store.LeadKey("web", "c1")) {
		t.Errorf("the sinks' log = %q, want one warning naming the CRM and the lead", logs)
	}
}
