package crm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
)

// TestDiedBetweenAcceptAndRecord: an execution claimed the write, the CRM
// accepted it, and the process died before recording anything (the row
// stays effect_pending with the dead execution's claim). The next attempt
// never writes blind: HubSpot's is resent (the same upsert: one contact),
// Pipedrive's is looked up and found (one person, one lead, no second write).
func TestDiedBetweenAcceptAndRecord(t *testing.T) {
	for _, name := range []string{config.CRMHubSpot, "hubspot with a deal", config.CRMPipedrive} {
		t.Run(name, func(t *testing.T) {
			kind, deal := name, ""
			if name == "hubspot with a deal" {
				kind, deal = config.CRMHubSpot, "handoff_deal_key"
			}
			hs, pd := newHubSpot(t), newPipedrive(t, 0)
			m := config.CRM{Kind: kind, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
				DealIDProperty: deal, DealPipeline: "default", DealStage: "appointmentscheduled"}
			if kind == config.CRMPipedrive {
				m = config.CRM{Kind: kind, APIBase: pd.srv.URL, Token: pd.token, ReferenceField: "ref_key", StatusField: "status_key", LookupSettle: time.Hour}
			}
			b := newBed(t, m)
			b.receive("m1", "c1", "ada@example.com", "Ada")
			lead := store.LeadKey("web", "c1")
			id := crm.RowID(lead, 1, "received")
			// The execution that died: its claim, and the CRM's accept.
			ob := delivery.New(b.st, b.cfg)
			row, _, err := ob.Claim(context.Background(), id, ulid.Make().String(), time.Now())
			if err != nil || row.Status != store.OutboxEffectPending {
				t.Fatalf("Claim = %s, %v", row.Status, err)
			}
			if _, err := b.senders["crm:default"].Send(context.Background(), provider.Message{Ref: id, Text: row.Text}); err != nil {
				t.Fatalf("the accepted write: %v", err)
			}
			b.run(1) // the next process
			b.settled("c1")
			if h, _ := b.st.Handoff(lead); h.Status != "matched" {
				t.Errorf("lead = %s, want matched: the CRM holds its record", h.Status)
			}
			o, _ := b.st.OutboxRow(id)
			a := actions(o)
			switch kind {
			case config.CRMHubSpot:
				// The accept, its resend, then the matched write the
				// recorded write's move makes (the CRM holds the record).
				if hs.count() != 1 || hs.upsertsOf(lead) != 3 || !strings.HasPrefix(a, "resend:sent") {
					t.Errorf("contacts %d, upserts %d, attempts %q; want one contact, the upsert resent once, then matched's", hs.count(), hs.upsertsOf(lead), a)
				}
				if deal != "" {
					hs.mu.Lock()
					contact, dealID := hs.ids[lead], hs.dealIDs[lead]
					deals, upserts, assoc := len(hs.deals), hs.dealUpserts[lead], hs.associated[[2]string{contact, dealID}]
					hs.mu.Unlock()
					if deals != 1 || upserts != 2 || assoc != 2 || // the deal: once per lead, not per write
						o.ProviderID != "contact "+contact+" deal "+dealID {
						t.Errorf("deals %d, deal upserts %d, associations %d, provider id %q; want one deal, its upsert and association resent once", deals, upserts, assoc, o.ProviderID)
					}
				}
			case config.CRMPipedrive:
				ps := pd.byRef("ref_key", crm.Reference(lead))
				if pd.created() != 1 || len(ps) != 1 || pd.leadsOf(ps[0].ID) != 1 || a != "lookup:sent" {
					t.Errorf("persons created %d, leads %d, attempts %q; want the write found by its lookup, nothing written again", pd.created(), pd.leadsOf(ps[0].ID), a)
				}
			}
		})
	}
}
