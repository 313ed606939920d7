package crm_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestHubSpotOnce: a lead's four moves are four upserts of one contact,
// whatever HubSpot does to them: a connection cut after the write (the
// outcome unknown: the job resends, the same upsert), a 503, a 429. The
// contact ends with the last status and everything known of the lead.
func TestHubSpotOnce(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status",
		Owners: map[string]string{"ana": "7001"}})
	hs.add("upsert", "drop", "503", "429")
	ev := b.receive("m1", "c1", "+1 555 0100", "Ada Lovelace")
	d := b.draft(ev, "ana") // matched, then owned, in one transaction
	b.run(2)
	b.settled("c1")
	b.reply(d)
	b.settled("c1")

	lead := store.LeadKey("web", "c1")
	if got, want := statuses(b.rows("c1")), []string{"matched", "owned", "received", "replied"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("CRM rows of the lead = %v, want one per status %v", got, want)
	}
	if hs.count() != 1 {
		t.Errorf("HubSpot holds %d contacts, want 1", hs.count())
	}
	c := hs.contact(lead)
	want := map[string]string{"handoff_lead_key": lead, "handoff_status": "replied", "firstname": "Ada", "lastname": "Lovelace", "phone": "+1 555 0100",
		"hubspot_owner_id": "7001", crm.PropLastMessage: "Hi, I'd like a quote & a call <today>", crm.PropLink: "https://handoff.example.com/events/web:m1"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("contact =\n %v\nwant\n %v", c, want)
	}
	first := b.rows("c1")[crm.RowID(lead, 1, "received")]
	if a := actions(first); !strings.Contains(a, "send:ambiguous") || !strings.Contains(a, "resend:sent") {
		t.Errorf("the dropped write's attempts = %q, want an ambiguous send, then a resend (HubSpot's upsert is safe to resend)", a)
	}
	if first.ProviderID != "contact 1000" {
		t.Errorf("provider id = %q, want the contact's", first.ProviderID)
	}
}

// TestHubSpotConcurrent: many leads at once, the runner's workers racing,
// HubSpot cutting connections after writes: one contact per lead, each
// with its last status (the writes of a lead go out in order), one row
// per status, all sent.
func TestHubSpotConcurrent(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status"})
	for range 6 {
		hs.add("upsert", "drop", "503")
	}
	b.run(4)
	const n = 12
	convs := make([]string, n)
	testkit.Together(n, func(i int) {
		convs[i] = fmt.Sprintf("c%02d", i)
		ev := b.receive(fmt.Sprintf("m%02d", i), convs[i], fmt.Sprintf("lead%02d@example.com", i), "")
		b.draft(ev, "sales")
	})
	b.settled(convs...)
	if hs.count() != n {
		t.Errorf("HubSpot holds %d contacts, want %d", hs.count(), n)
	}
	for _, c := range convs {
		lead := store.LeadKey("web", c)
		if got := hs.contact(lead)["handoff_status"]; got != "owned" {
			t.Errorf("contact %s: handoff_status %q, want owned (its last move)", lead, got)
		}
		if got := statuses(b.rows(c)); !reflect.DeepEqual(got, []string{"matched", "owned", "received"}) {
			t.Errorf("rows of %s = %v", lead, got)
		}
	}
}

// TestPipedriveLooksUp: Pipedrive cannot dedupe, so after a write whose
// answer was lost the job never sends blind: it looks the person up by our
// reference, and a "not found" counts only lookup_settle after the write
// (the search index lags). One person and one lead per lead, whatever was
// cut; the later writes find the person by the id the first one learned.
func TestPipedriveLooksUp(t *testing.T) {
	pd := newPipedrive(t, 100*time.Millisecond)
	b := newBed(t, config.CRM{Kind: config.CRMPipedrive, APIBase: pd.srv.URL, Token: pd.token, ReferenceField: "ref_key", StatusField: "status_key",
		LookupSettle: 400 * time.Millisecond, Owners: map[string]string{"ana": "42"}})
	pd.add("POST "+crm.PipedrivePersons, "drop")                 // the person is created, the answer lost
	pd.add("GET "+crm.PipedriveSearch, "503")                    // the first search fails: nothing written, retried
	pd.add("POST "+crm.PipedriveLeads, "drop")                   // the lead is created, the answer lost
	pd.add("PATCH "+crm.PipedrivePersons+"/{id}", "503", "drop") // an update refused, then one whose answer is lost
	ev := b.receive("m1", "c1", "ada@example.com", "Ada Lovelace")
	d := b.draft(ev, "ana")
	b.run(2)
	b.settled("c1")
	b.reply(d)
	b.settled("c1")

	lead := store.LeadKey("web", "c1")
	ps := pd.byRef("ref_key", crm.Reference(lead))
	if len(ps) != 1 {
		t.Fatalf("Pipedrive holds %d persons for the lead, want 1 (%+v)", len(ps), ps)
	}
	p := ps[0]
	if p.CustomFields["status_key"] != "replied" || p.Name != "Ada Lovelace" || p.OwnerID != 42 || len(p.Emails) != 1 || p.Emails[0].Value != "ada@example.com" {
		t.Errorf("person = %+v, want replied, named, owned by 42, with the email", p)
	}
	if n := pd.leadsOf(p.ID); n != 1 {
		t.Errorf("the person has %d leads, want 1", n)
	}
	first := b.rows("c1")[crm.RowID(lead, 1, "received")]
	if a := actions(first); !strings.Contains(a, "lookup:") || strings.Contains(a, "resend") {
		t.Errorf("the first write's attempts = %q, want a lookup after the lost answer and no blind resend", a)
	}
}

// TestPipedriveUnknownToAPerson: a write whose outcome stays unknown on the
// job's last attempt waits for a person (needs_reconciliation), with the
// reason, and a person's lookup settles it from the CRM.
func TestPipedriveUnknownToAPerson(t *testing.T) {
	pd := newPipedrive(t, 0)
	b := newBed(t, config.CRM{Kind: config.CRMPipedrive, APIBase: pd.srv.URL, Token: pd.token, ReferenceField: "ref_key", StatusField: "status_key", LookupSettle: time.Hour})
	b.cfg.Retry.MaxAttempts = 2
	pd.add("POST "+crm.PipedrivePersons, "drop")
	b.receive("m1", "c1", "+44 20 7946 0000", "")
	b.run(1)
	id := crm.RowID(store.LeadKey("web", "c1"), 1, "received")
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(id)
		return o.Status == store.OutboxNeedsReconciliation
	}, "the write to wait for a person")
	o, _ := b.st.OutboxRow(id)
	if !strings.Contains(o.Note, "reconcile") {
		t.Errorf("note = %q, want it to say a person reconciles", o.Note)
	}
	// The person was created, its lead never was: the write is not on the
	// record, and a lookup once the answer counts says so.
	ob := delivery.New(b.st, b.cfg)
	looked, err := ob.LookUp(context.Background(), id, b.senders["crm:default"], "admin", "test", time.Now().Add(2*time.Hour))
	if err != nil || looked.Verdict != delivery.LookedFailed {
		t.Fatalf("LookUp = %+v, %v; want failed (the person has no lead: the write is not whole)", looked, err)
	}
	// The replay finds the person by our reference (search before create)
	// and completes it: still one person, now with its lead.
	if _, err := ob.Replay(context.Background(), id, store.Replay{By: "admin", At: time.Now()}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	b.wake()
	b.settled("c1")
	ps := pd.byRef("ref_key", crm.Reference(store.LeadKey("web", "c1")))
	if len(ps) != 1 || pd.leadsOf(ps[0].ID) != 1 {
		t.Fatalf("persons %+v, want one with one lead", ps)
	}
}

// TestWebhookOnce: every resend of a write carries the same webhook-id, so
// a receiver that dedupes by it (as Standard Webhooks asks) acts once per
// status; the signature verifies with the library handoff verifies with.
func TestWebhookOnce(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	rc := newReceiver(t, secret)
	b := newBed(t, config.CRM{Kind: config.CRMWebhook, URL: rc.srv.URL + "/hook", Secret: secret})
	rc.add("post", "drop", "503")
	ev := b.receive("m1", "c1", "+1 555 0100", "Ada")
	b.draft(ev, "ana")
	b.run(2)
	b.settled("c1")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.events) != 3 {
		t.Fatalf("the receiver acted on %d events, want 3 (received, matched, owned)", len(rc.events))
	}
	lead := store.LeadKey("web", "c1")
	recv := crm.MessageID(crm.RowID(lead, 1, "received"))
	if rc.got[recv] != 3 {
		t.Errorf("webhook-id %s was delivered %d times, want 3 (cut, 503, then accepted: one id)", recv, rc.got[recv])
	}
	if e := rc.events[recv]; e.Data.Status != "received" || e.Data.Lead != lead || e.Data.Phone != "+1 555 0100" {
		t.Errorf("event = %+v", e)
	}
}

// TestOutageNeverBlocks: with the CRM down, ingest and drafting go on; the
// lead waits received (no record holds it yet), the draft's contact and
// routing's owner kept on it, its write waiting in the queue, a pending row
// with its job; past its threshold it is stuck in received, and its stuck
// write waits behind the first.
func TestOutageNeverBlocks(t *testing.T) {
	hs := newHubSpot(t)
	hs.srv.Close() // nothing listens
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "k", StatusProperty: "s"})
	text := corpus.Texts()[5]
	ev := b.receiveText("m1", "c1", "+1 555 0100", text.From, text.Body)
	b.draft(ev, "ana")
	lead := store.LeadKey("web", "c1")
	if h, _ := b.st.Handoff(lead); h.Status != "received" || h.Owner != "ana" || h.Contact != "+1 555 0100" {
		t.Fatalf("lead %s owner %q contact %q, want received with ana kept: matched waits for the record", h.Status, h.Owner, h.Contact)
	}
	rows := b.rows("c1")
	if len(rows) != 1 {
		t.Fatalf("%d CRM rows, want 1 (received's)", len(rows))
	}
	flagged, err := leads.FlagStuck(context.Background(), b.st, time.Now(), map[store.HandoffStatus]time.Duration{leads.Received: time.Nanosecond}, crm.StuckHook(b.cfg))
	if err != nil || len(flagged) != 1 || !flagged[0].Stuck() || flagged[0].Status != "received" {
		t.Fatalf("FlagStuck = %d leads, %v; want the lead stuck in received", len(flagged), err)
	}
	stuck, err := b.st.OutboxRow(crm.RowID(lead, 1, "received") + ":stuck")
	if err != nil {
		t.Fatalf("the stuck write: %v", err)
	}
	if r, err := crm.Decode(stuck.Text); err != nil || crm.StatusValue(r) != "received (stuck)" || r.Owner != "ana" {
		t.Errorf("stuck record = %+v, %v; want received (stuck) with routing's owner", r, err)
	}
	rows[stuck.ID] = stuck
	for _, o := range rows {
		if o.Status != store.OutboxPending || o.Kind != store.OutboxCRM || o.Provider != "crm:default" {
			t.Errorf("row %s: %s kind %q provider %q, want pending crm rows of crm:default", o.ID, o.Status, o.Kind, o.Provider)
		}
		_, err := b.senders["crm:default"].Send(context.Background(), provider.Message{Ref: o.ID, Text: o.Text})
		var ns *provider.NotSent
		if !errors.As(err, &ns) {
			t.Errorf("Send to a CRM that is down = %v, want NotSent (nothing left this machine)", err)
		}
	}
	if h, _ := b.st.Handoff(lead); h.Status != "received" {
		t.Errorf("lead %s after failed writes, want received", h.Status)
	}
}

// TestDuplicateDeliveriesOneWrite: the provider delivers one message eight
// times at once: the ingest dedupes it, so one move, one CRM write.
func TestDuplicateDeliveriesOneWrite(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status"})
	b.run(2)
	var created atomic.Int32
	testkit.Together(8, func(int) {
		rec, err := intake.Record(context.Background(), b.st, intake.Message{Channel: "web", MessageID: "m1", ConversationID: "c1", Contact: "+1 555 0100", Text: "hi", ReceivedAt: time.Now()}, 3)
		if err != nil {
			t.Error(err)
		}
		if rec.Created {
			created.Add(1)
		}
		b.wake()
	})
	b.settled("c1")
	// One move, one write; its success matches the lead: one more.
	if created.Load() != 1 || len(b.rows("c1")) != 2 || hs.upsertsOf(store.LeadKey("web", "c1")) != 2 {
		t.Errorf("created %d, rows %d, upserts %d; want one event, and two writes (received, then matched once it was on the record)", created.Load(), len(b.rows("c1")), hs.upsertsOf(store.LeadKey("web", "c1")))
	}
}

// TestUndoneCloseReachesTheCRM: a close taken back puts the lead back to
// owned, a status its cycle already wrote; the reopen is a move like any
// other, so it gets its own row (…:owned:r1) and HubSpot's contact reads
// owned again, not closed. A second close and undo are two rows more.
func TestUndoneCloseReachesTheCRM(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status"})
	b.cfg.UndoWindow = time.Minute
	hs.add("upsert", "503", "drop")
	b.run(2)
	ev := b.receive("m1", "c1", "+1 555 0100", corpus.Texts()[1].From)
	b.draft(ev, "ana")
	b.settled("c1")
	lead := store.LeadKey("web", "c1")
	r := review.New(b.st, b.cfg)
	for round := 1; round <= 2; round++ {
		if _, err := r.Close(context.Background(), ev.Key, store.Decision{By: "tester", At: time.Now(), Reason: "spam"}); err != nil {
			t.Fatal(err)
		}
		b.wake()
		b.settled("c1")
		if got := hs.contact(lead)["handoff_status"]; got != "closed" {
			t.Fatalf("round %d: after the close, handoff_status = %q, want closed", round, got)
		}
		if _, err := r.UndoClose(context.Background(), lead, store.Decision{By: "tester", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		b.wake()
		b.settled("c1")
		if got := hs.contact(lead)["handoff_status"]; got != "owned" {
			t.Fatalf("round %d: after the undo, handoff_status = %q, want owned (the lead is open again)", round, got)
		}
	}
	var ids []string
	for id := range b.rows("c1") {
		ids = append(ids, strings.TrimPrefix(id, "crm:"+lead+":"))
	}
	slices.Sort(ids)
	if want := []string{"1:closed", "1:closed:r1", "1:matched", "1:owned", "1:owned:r1", "1:owned:r2", "1:received"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("CRM rows = %v, want %v", ids, want)
	}
	if hs.count() != 1 {
		t.Errorf("HubSpot holds %d contacts, want 1", hs.count())
	}
}
