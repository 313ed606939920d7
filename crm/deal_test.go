package crm_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestHubSpotDealOncePerLead: with deal_id_property each lead gets one
// deal, upserted by the lead key and associated with its contact by the
// lead's first write to reach the record, whatever HubSpot does to those
// calls (503, 429, an answer lost after the write: the job resends the
// whole write, each call the same again); its later writes leave the deal
// alone. Several leads at once, on three workers.
func TestHubSpotDealOncePerLead(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		DealIDProperty: "handoff_deal_key", DealPipeline: "default", DealStage: "appointmentscheduled", Owners: map[string]string{"ana": "7001"}})
	hs.add("deal", "503", "drop", "429")
	hs.add("associate", "503", "drop", "429")
	texts := corpus.Texts()
	var convs []string
	for i, tx := range texts {
		conv := "c" + strconv.Itoa(i)
		convs = append(convs, conv)
		ev := b.receiveText("m"+strconv.Itoa(i), conv, "+1 555 02"+strconv.Itoa(10+i), tx.From, tx.Body)
		b.draft(ev, "ana")
	}
	b.run(3)
	b.settled(convs...)

	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.deals) != len(convs) {
		t.Errorf("HubSpot holds %d deals, want one per lead (%d)", len(hs.deals), len(convs))
	}
	for _, conv := range convs {
		lead := store.LeadKey("web", conv)
		d, contact, deal := hs.deals[lead], hs.ids[lead], hs.dealIDs[lead]
		if d["handoff_deal_key"] != lead || d["pipeline"] != "default" || d["dealstage"] != "appointmentscheduled" || !strings.HasSuffix(d["dealname"], " (handoff)") {
			t.Errorf("lead %s: deal %v", conv, d)
		}
		if hs.associated[[2]string{contact, deal}] == 0 {
			t.Errorf("lead %s: deal %s is not associated with contact %s", conv, deal, contact)
		}
		for pair := range hs.associated {
			if pair[0] == contact && pair[1] != deal || pair[1] == deal && pair[0] != contact {
				t.Errorf("lead %s: association %v crosses leads", conv, pair)
			}
		}
		if n := hs.dealUpserts[lead]; n < 1 || n > 4 {
			t.Errorf("lead %s: %d deal upserts, want the first write's (and its resends after the 3 failures at most)", conv, n)
		}
		rows := b.rows(conv)
		first := rows[crm.RowID(lead, 1, "received")]
		if first.ProviderID != "contact "+contact+" deal "+deal {
			t.Errorf("lead %s: the first write's provider id = %q, want its contact and deal", conv, first.ProviderID)
		}
		for id, o := range rows {
			if id != first.ID && strings.Contains(o.ProviderID, "deal") {
				t.Errorf("lead %s: write %s touched the deal again (%s)", conv, id, o.ProviderID)
			}
		}
		if c := hs.contacts[lead]; c["handoff_status"] != "owned" || c[crm.PropOwner] != "7001" {
			t.Errorf("lead %s: contact %v", conv, c)
		}
	}
}
