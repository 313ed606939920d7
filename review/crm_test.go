package review_test

import (
	"context"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestDraftMovesByTheClientsCRM: review tells the lead's moves whether the
// lead's client has a CRM, per client: acme's lead (a CRM) keeps the
// contact and routing's owner and stays received, its record not written
// yet; beta's (none) is matched, then owned, by the draft as before.
func TestDraftMovesByTheClientsCRM(t *testing.T) {
	st := openStore(t)
	cfg := &config.Config{
		Channels: []config.Channel{{Name: "acme-web", Provider: "sandbox", Client: "acme"}, {Name: "beta-web", Provider: "sandbox", Client: "beta"}},
		Clients:  []config.Client{{ID: "acme"}, {ID: "beta"}},
		Retry:    config.Retry{MaxAttempts: 3},
		CRM:      []config.CRM{{Client: "acme", Kind: config.CRMWebhook, URL: "https://crm.example.com/hook"}},
	}
	rv := review.New(st, cfg)
	if !rv.ViaCRM("acme-web") || rv.ViaCRM("beta-web") {
		t.Fatalf("ViaCRM: acme %v, beta %v; want acme's only", rv.ViaCRM("acme-web"), rv.ViaCRM("beta-web"))
	}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for i, tc := range []struct {
		channel string
		want    store.HandoffStatus
	}{{"acme-web", leads.Received}, {"beta-web", leads.Owned}} {
		ev := record(t, st, tc.channel, tc.channel+":m1", at).Event
		d := draftFor(ev, corpus.Texts()[i].Body)
		d.Owner, d.RuleVersion, d.Rule = "ana", "r1", "default"
		if _, created, err := rv.Save(context.Background(), d, 1); err != nil || !created {
			t.Fatalf("Save(%s) = %v, %v", ev.Key, created, err)
		}
		h, err := st.Handoff(store.LeadKey(ev.Channel, ev.ConversationID))
		if err != nil {
			t.Fatal(err)
		}
		if h.Status != tc.want || h.Owner != "ana" || h.Contact != "ada@example.com" {
			t.Errorf("%s lead = %s owner %q contact %q, want %s with ana and the contact", tc.channel, h.Status, h.Owner, h.Contact, tc.want)
		}
		if kept := h.Assigned != nil && h.Assigned.Routed && h.Assigned.Owner == "ana"; kept != (tc.want == leads.Received) {
			t.Errorf("%s lead assigned %+v: the owner is kept only while the record is awaited", tc.channel, h.Assigned)
		}
	}
}
