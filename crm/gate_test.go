package crm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// customer is the channel's provider in the gate test: it fails the test
// if a reply reaches it before the lead's newest CRM write is on the record.
type customer struct {
	t    *testing.T
	st   *store.Store
	want string // the CRM row that must be sent first
	mu   sync.Mutex
	sent int
}

func (c *customer) Send(_ context.Context, m provider.Message) (string, error) {
	if o, err := c.st.OutboxRow(c.want); err != nil || o.Status != store.OutboxSent {
		c.t.Errorf("reply %s reached the customer while CRM write %s is %s", m.Ref, c.want, o.Status)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent++
	return "sb-1", nil
}
func (c *customer) Lookup(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}
func (c *customer) Capabilities() provider.Capabilities { return provider.Capabilities{} }

// TestRequiredHoldsTheReply: with crm[].required, an approved reply waits
// while the lead's newest CRM write is not on the record — here refused
// for good by HubSpot, a dead letter — saying why, and goes once a person
// replays that write and it lands.
func TestRequiredHoldsTheReply(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status", Required: true})
	hs.add("upsert", "ok", "ok", "400") // received and matched land; owned is refused
	lead := store.LeadKey("web", "c1")
	owned := crm.RowID(lead, 1, "owned")
	cust := &customer{t: t, st: b.st, want: owned}
	b.senders["sandbox"] = cust
	gate := crm.Gate(b.cfg, b.st)
	var mu sync.Mutex
	var held []string
	b.gate = func(o store.Outbox, now time.Time) (time.Duration, string) {
		wait, why := gate(o, now)
		if wait > 0 {
			mu.Lock()
			held = append(held, why)
			mu.Unlock()
			wait = 5 * time.Millisecond // ask again soon: the test waits on the outcome, not the clock
		}
		return wait, why
	}
	ev := b.receive("m1", "c1", "+1 555 0100", "Ada")
	d := b.draft(ev, "ana")
	b.run(2)
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(owned)
		return o.Status == store.OutboxFailed
	}, "HubSpot to refuse the owned write")
	ap, err := review.New(b.st, b.cfg).Approve(context.Background(), d.ID, store.Decision{By: "tester", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	b.wake()
	testkit.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) > 0 && strings.Contains(held[len(held)-1], owned+" is failed")
	}, "the reply to be held, naming the failed CRM write")
	if o, _ := b.st.OutboxRow(ap.Outbox.ID); o.Status != store.OutboxPending || len(o.Attempts) != 0 {
		t.Fatalf("held reply is %s with %d attempts, want pending and untouched", o.Status, len(o.Attempts))
	}
	// A person replays the CRM write; it lands; the reply goes.
	if _, err := delivery.New(b.st, b.cfg).Replay(context.Background(), owned, store.Replay{By: "admin", At: time.Now()}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	b.wake()
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(ap.Outbox.ID)
		return o.Status == store.OutboxSent
	}, "the reply to be sent once the record holds the lead")
	if hs.contact(lead)["handoff_status"] == "" {
		t.Errorf("the contact has no status")
	}
	b.settled("c1") // and the replied write follows
	if got := hs.contact(lead)["handoff_status"]; got != "replied" {
		t.Errorf("handoff_status = %q, want replied", got)
	}
}

// TestReplayOverNewerRefused: a replay of an old write after a newer one
// landed would set the record back; it is refused, permanently, saying so.
func TestReplayOverNewerRefused(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status"})
	ev := b.receive("m1", "c1", "+1 555 0100", "Ada")
	b.draft(ev, "ana")
	b.run(1)
	b.settled("c1")
	o, _ := b.st.OutboxRow(crm.RowID(store.LeadKey("web", "c1"), 1, "received"))
	_, err := b.senders["crm:default"].Send(context.Background(), provider.Message{Ref: o.ID, Text: o.Text})
	var perm *provider.Permanent
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "would set its status back") {
		t.Fatalf("Send of an older write = %v, want a permanent refusal saying why", err)
	}
	if got := hs.contact(store.LeadKey("web", "c1"))["handoff_status"]; got != "owned" {
		t.Errorf("handoff_status = %q, want owned (untouched)", got)
	}
}
