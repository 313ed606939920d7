package leads_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// hoT0 is the fixed clock of the lead tests; every time is passed explicitly.
var hoT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// hoReceive records one inbound message of lead web:<conv> at at.
func hoReceive(t *testing.T, st *store.Store, key, conv, contact string, at time.Time) store.Event {
	t.Helper()
	ev := store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key, CorrelationID: ulid.Make().String(),
		ConversationID: conv, Contact: contact, Text: "message " + key, ReceivedAt: at,
	}
	rec, err := leads.RecordEvent(context.Background(), st, ev, store.NewJob{ID: ulid.Make().String(), Kind: "draft", Key: key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = created %v, %v", key, rec.Created, err)
	}
	return rec.Event
}

// The lead's part of a stored draft, an approval and a sent reply, each
// in a transaction of its own: the tests below hold the lead's moves
// (DraftedTx, AnswerTx, ReplyTx) to what those steps leave, without the
// review and delivery rules around them (proved in their own packages, and
// end to end in helpers_test.go's saveDraft and send).

// hoSaveDraft stores a draft for ev routed to owner, with fields, at at.
func hoSaveDraft(t *testing.T, st *store.Store, ev store.Event, owner string, fields map[string]string, at time.Time) store.Draft {
	t.Helper()
	d := store.Draft{
		ID: store.DraftID(ev.ID), EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Text: "reply to " + ev.Key, Drafter: "template", PromptVersion: "v1", Fields: fields, Status: store.DraftPending,
		Owner: owner, RuleVersion: "r1", Rule: "default", ExecutionID: ulid.Make().String(), CreatedAt: at,
	}
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		if err := tx.InsertDraft(&d, ev); err != nil {
			return err
		}
		return leads.DraftedTx(tx, d, ev.Contact, false, d.CreatedAt)
	})
	if err != nil {
		t.Fatalf("store draft %s: %v", d.ID, err)
	}
	return d
}

// hoApprove is the lead's part of d's approval: its turn ends.
func hoApprove(t *testing.T, st *store.Store, d store.Draft) {
	t.Helper()
	if err := st.Update(context.Background(), func(tx *store.Tx) error { return leads.AnswerTx(tx, d) }); err != nil {
		t.Fatalf("AnswerTx(%s): %v", d.ID, err)
	}
}

// hoSend approves d and records its reply as sent a minute after at.
func hoSend(t *testing.T, st *store.Store, d store.Draft, at time.Time) store.Outbox {
	t.Helper()
	hoApprove(t, st, d)
	sentAt := at.Add(time.Minute)
	o := store.Outbox{
		ID: d.ConversationID + ":" + d.ID, Channel: d.Channel, ConversationID: d.ConversationID,
		EventKey: d.EventKey, DraftID: d.ID, Status: store.OutboxSent, ProviderID: "prov-" + d.ID, SentAt: &sentAt,
	}
	if err := st.Update(context.Background(), func(tx *store.Tx) error { return leads.ReplyTx(tx, o, sentAt) }); err != nil {
		t.Fatalf("ReplyTx(%s): %v", o.ID, err)
	}
	return o
}

func hoLead(t *testing.T, st *store.Store, conv string) store.Handoff {
	t.Helper()
	h, err := st.Handoff(store.LeadKey("web", conv))
	if err != nil {
		t.Fatalf("Handoff(%s): %v", store.LeadKey("web", conv), err)
	}
	return h
}

// hoSteps is a history as (cycle, status, event key) triples.
type hoStep struct {
	Cycle    int
	Status   store.HandoffStatus
	EventKey string
}

func hoSteps(h store.Handoff) []hoStep {
	out := []hoStep{}
	for _, tr := range h.History {
		out = append(out, hoStep{tr.Cycle, tr.Status, tr.EventKey})
	}
	return out
}

func hoCheckLead(t *testing.T, h store.Handoff, status store.HandoffStatus, cycle int, since time.Time, steps []hoStep) {
	t.Helper()
	if h.Status != status || h.Cycle != cycle || !h.Since.Equal(since) {
		t.Errorf("lead %s = %s cycle %d since %s, want %s cycle %d since %s", h.Key, h.Status, h.Cycle, h.Since, status, cycle, since)
	}
	if got := hoSteps(h); !reflect.DeepEqual(got, steps) {
		t.Errorf("lead %s history =\n %v\nwant\n %v", h.Key, got, steps)
	}
	if n := len(h.History); n > 0 && (h.History[n-1].Status != h.Status || !h.History[n-1].At.Equal(h.Since)) {
		t.Errorf("lead %s: last transition %+v does not match its status %s since %s", h.Key, h.History[n-1], h.Status, h.Since)
	}
}

// TestHandoffLifecycle follows one lead through two cycles.
func TestHandoffLifecycle(t *testing.T) {
	st := openTest(t)
	const conv = "conv-life"

	ev1 := hoReceive(t, st, "web:life-1", conv, "+15550001234", hoT0)
	h := hoLead(t, st, conv)
	hoCheckLead(t, h, leads.Received, 1, hoT0, []hoStep{{1, leads.Received, ev1.Key}})
	if h.Key != "web:"+conv || h.Channel != "web" || h.ConversationID != conv || h.LastEventKey != ev1.Key || h.Contact != "+15550001234" {
		t.Errorf("new lead = %+v", h)
	}

	// The draft identifies the contact and routing names an owner: matched
	// then owned, both justified by the draft's event, at the draft's time.
	drafted := hoT0.Add(time.Minute)
	d1 := hoSaveDraft(t, st, ev1, "support", map[string]string{"intent": "support"}, drafted)
	h = hoLead(t, st, conv)
	hoCheckLead(t, h, leads.Owned, 1, drafted, []hoStep{
		{1, leads.Received, ev1.Key}, {1, leads.Matched, ev1.Key}, {1, leads.Owned, ev1.Key},
	})
	if h.Owner != "support" || !h.History[1].At.Equal(drafted) || !h.History[2].At.Equal(drafted) {
		t.Errorf("after the draft: owner %q, transitions %+v; want support, both at %s", h.Owner, h.History, drafted)
	}
	// Saving the same event's draft again changes nothing.
	if _, created, err := review.New(st, testConfig()).Save(context.Background(), store.Draft{EventKey: ev1.Key, Channel: "web", ConversationID: conv, Owner: "billing", CreatedAt: drafted.Add(time.Hour)}, 1); err != nil || created {
		t.Fatalf("second SaveDraft = created %v, %v; want the first draft back", created, err)
	}
	if again := hoLead(t, st, conv); !reflect.DeepEqual(again, h) {
		t.Errorf("a repeated SaveDraft moved the lead:\n got %+v\nwant %+v", again, h)
	}

	// A second message while the lead is in progress keeps its status.
	ev2 := hoReceive(t, st, "web:life-2", conv, "+15550001234", hoT0.Add(2*time.Minute))
	h = hoLead(t, st, conv)
	hoCheckLead(t, h, leads.Owned, 1, drafted, []hoStep{
		{1, leads.Received, ev1.Key}, {1, leads.Matched, ev1.Key}, {1, leads.Owned, ev1.Key},
	})
	if h.LastEventKey != ev2.Key {
		t.Errorf("LastEventKey = %q, want the newest message %q", h.LastEventKey, ev2.Key)
	}

	// Approval alone is not a reply; the recorded send is. The reply to
	// the first message leaves the lead owned: the second is unanswered.
	hoApprove(t, st, d1)
	if h := hoLead(t, st, conv); h.Status != leads.Owned {
		t.Errorf("after approval the lead is %s, want still owned until the reply is sent", h.Status)
	}
	hoSend(t, st, d1, hoT0.Add(3*time.Minute)) // the approval above is reused
	h = hoLead(t, st, conv)
	hoCheckLead(t, h, leads.Owned, 1, drafted, []hoStep{
		{1, leads.Received, ev1.Key}, {1, leads.Matched, ev1.Key}, {1, leads.Owned, ev1.Key},
	})

	// The second message's draft changes nothing (the lead is already
	// owned); its reply, to the newest message, makes the lead replied.
	d2 := hoSaveDraft(t, st, ev2, "billing", nil, hoT0.Add(5*time.Minute))
	if h := hoLead(t, st, conv); h.Status != leads.Owned || h.Owner != "support" || len(h.History) != 3 {
		t.Errorf("after the second draft the lead is %s owned by %q with %d transitions, want unchanged", h.Status, h.Owner, len(h.History))
	}
	o := hoSend(t, st, d2, hoT0.Add(6*time.Minute))
	sentAt := hoT0.Add(7 * time.Minute)
	h = hoLead(t, st, conv)
	hoCheckLead(t, h, leads.Replied, 1, sentAt, []hoStep{
		{1, leads.Received, ev1.Key}, {1, leads.Matched, ev1.Key}, {1, leads.Owned, ev1.Key}, {1, leads.Replied, ev2.Key},
	})
	if o.SentAt == nil || !o.SentAt.Equal(sentAt) {
		t.Errorf("outbox sent at %v, want %s", o.SentAt, sentAt)
	}

	// A new message on a replied lead starts cycle 2 at received; history stays.
	ev3 := hoReceive(t, st, "web:life-3", conv, "+15550001234", hoT0.Add(10*time.Minute))
	h = hoLead(t, st, conv)
	hoCheckLead(t, h, leads.Received, 2, hoT0.Add(10*time.Minute), []hoStep{
		{1, leads.Received, ev1.Key}, {1, leads.Matched, ev1.Key}, {1, leads.Owned, ev1.Key}, {1, leads.Replied, ev2.Key},
		{2, leads.Received, ev3.Key},
	})
	if h.LastEventKey != ev3.Key {
		t.Errorf("LastEventKey = %q, want %q", h.LastEventKey, ev3.Key)
	}
	// Cycle 2 goes the same way.
	hoSaveDraft(t, st, ev3, "sales", nil, hoT0.Add(11*time.Minute))
	h = hoLead(t, st, conv)
	hoCheckLead(t, h, leads.Owned, 2, hoT0.Add(11*time.Minute), []hoStep{
		{1, leads.Received, ev1.Key}, {1, leads.Matched, ev1.Key}, {1, leads.Owned, ev1.Key}, {1, leads.Replied, ev2.Key},
		{2, leads.Received, ev3.Key}, {2, leads.Matched, ev3.Key}, {2, leads.Owned, ev3.Key},
	})
	if h.Owner != "sales" {
		t.Errorf("cycle 2 owner = %q, want sales", h.Owner)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestHandoffAdvanceOnDraft: what a stored draft does to a received lead.
func TestHandoffAdvanceOnDraft(t *testing.T) {
	tests := []struct {
		name        string
		contact     string // the event's contact
		fields      map[string]string
		owner       string
		want        store.HandoffStatus
		wantContact string
	}{
		{"contact and owner: owned", "+15550001234", nil, "sales", leads.Owned, "+15550001234"},
		{"contact, no owner: matched", "+15550001234", nil, "", leads.Matched, "+15550001234"},
		{"no contact, email found by the drafter", "", map[string]string{"email": "ada@example.com"}, "sales", leads.Owned, "ada@example.com"},
		{"no contact, phone found by the drafter", "", map[string]string{"phone": "+442079460958"}, "sales", leads.Owned, "+442079460958"},
		{"no contact at all: stays received", "", map[string]string{"intent": "sales", "name": "Ada"}, "sales", leads.Received, ""},
		{"no contact, no fields: stays received", "", nil, "sales", leads.Received, ""},
		// The lead's contact is one address to reach them by, not two glued together.
		{"no contact, email and phone found", "", map[string]string{"email": "ada@example.com", "phone": "+442079460958"}, "sales", leads.Owned, "ada@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openTest(t)
			ev := hoReceive(t, st, "web:adv", "conv-adv", tt.contact, hoT0)
			at := hoT0.Add(time.Minute)
			hoSaveDraft(t, st, ev, tt.owner, tt.fields, at)
			h := hoLead(t, st, "conv-adv")
			steps := []hoStep{{1, leads.Received, ev.Key}}
			since := hoT0
			if tt.want == leads.Matched || tt.want == leads.Owned {
				steps = append(steps, hoStep{1, leads.Matched, ev.Key})
				since = at
			}
			if tt.want == leads.Owned {
				steps = append(steps, hoStep{1, leads.Owned, ev.Key})
			}
			hoCheckLead(t, h, tt.want, 1, since, steps)
			if h.Contact != tt.wantContact {
				t.Errorf("lead contact = %q, want %q", h.Contact, tt.wantContact)
			}
			wantOwner := ""
			if tt.want == leads.Owned {
				wantOwner = tt.owner
			}
			if h.Owner != wantOwner {
				t.Errorf("lead owner = %q, want %q", h.Owner, wantOwner)
			}
		})
	}
}

// TestHandoffReplyToOlderMessageHidesNewer: a reply to the first message is
// sent after a second message arrived. The second message is still
// unanswered, so the lead must not read "replied" (which is never stuck and
// never alerts): a half-done handoff must stay visible.
func TestHandoffReplyToOlderMessageHidesNewer(t *testing.T) {
	st := openTest(t)
	const conv = "conv-late"
	ev1 := hoReceive(t, st, "web:late-1", conv, "+15550001234", hoT0)
	d1 := hoSaveDraft(t, st, ev1, "sales", nil, hoT0.Add(time.Minute))
	ev2 := hoReceive(t, st, "web:late-2", conv, "+15550001234", hoT0.Add(2*time.Minute))
	owned := hoStep{1, leads.Owned, ev1.Key}
	if steps := hoSteps(hoLead(t, st, conv)); steps[len(steps)-1] != owned {
		t.Fatalf("before the reply the lead's history is %v; want it to end %v", steps, owned)
	}
	hoSend(t, st, d1, hoT0.Add(3*time.Minute))

	h := hoLead(t, st, conv)
	if steps := hoSteps(h); h.Status != leads.Owned || steps[len(steps)-1] != owned {
		t.Errorf("lead is %s after the reply to %s, although %s (its newest message, LastEventKey %s) has no reply; history %v; want still %s, ending %v",
			h.Status, ev1.Key, ev2.Key, h.LastEventKey, steps, leads.Owned, owned)
	}
}

// TestHandoffsList: filtering by status and by time in status (stuck leads).
func TestHandoffsList(t *testing.T) {
	st := openTest(t)
	// A: received at t0. B: received at t0+10m. C: owned since t0+5m.
	// D: replied (sent at t0+7m). E: matched (no owner) since t0+6m.
	hoReceive(t, st, "web:a", "a", "+1", hoT0)
	hoReceive(t, st, "web:b", "b", "+2", hoT0.Add(10*time.Minute))
	evC := hoReceive(t, st, "web:c", "c", "+3", hoT0.Add(time.Minute))
	hoSaveDraft(t, st, evC, "sales", nil, hoT0.Add(5*time.Minute))
	evD := hoReceive(t, st, "web:d", "d", "+4", hoT0.Add(2*time.Minute))
	dD := hoSaveDraft(t, st, evD, "sales", nil, hoT0.Add(3*time.Minute))
	hoSend(t, st, dD, hoT0.Add(6*time.Minute))
	evE := hoReceive(t, st, "web:e", "e", "+5", hoT0.Add(4*time.Minute))
	hoSaveDraft(t, st, evE, "", nil, hoT0.Add(6*time.Minute))

	tests := []struct {
		name string
		f    leads.Filter
		want []string
	}{
		{"every lead, by status then longest waiting", leads.Filter{}, []string{"web:a", "web:b", "web:e", "web:c", "web:d"}},
		{"received, longest first", leads.Filter{Status: leads.Received}, []string{"web:a", "web:b"}},
		{"matched", leads.Filter{Status: leads.Matched}, []string{"web:e"}},
		{"owned", leads.Filter{Status: leads.Owned}, []string{"web:c"}},
		{"replied", leads.Filter{Status: leads.Replied}, []string{"web:d"}},
		{"received before t0+5m", leads.Filter{Status: leads.Received, SinceBefore: hoT0.Add(5 * time.Minute)}, []string{"web:a"}},
		{"received before t0 exactly: none", leads.Filter{Status: leads.Received, SinceBefore: hoT0}, []string{}},
		{"received before t0+1ns", leads.Filter{Status: leads.Received, SinceBefore: hoT0.Add(1)}, []string{"web:a"}},
		{"owned before t0+5m: none (it entered at t0+5m)", leads.Filter{Status: leads.Owned, SinceBefore: hoT0.Add(5 * time.Minute)}, []string{}},
		{"owned before t0+6m", leads.Filter{Status: leads.Owned, SinceBefore: hoT0.Add(6 * time.Minute)}, []string{"web:c"}},
		{"any status before t0+6m", leads.Filter{SinceBefore: hoT0.Add(6 * time.Minute)}, []string{"web:a", "web:c"}},
		{"limit 1", leads.Filter{Limit: 1}, []string{"web:a"}},
		{"limit 3 across statuses", leads.Filter{Limit: 3}, []string{"web:a", "web:b", "web:e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs, err := leads.List(st, tt.f)
			if err != nil {
				t.Fatalf("Handoffs(%+v): %v", tt.f, err)
			}
			got := []string{}
			for _, h := range hs {
				got = append(got, h.Key)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Handoffs(%+v) = %v, want %v", tt.f, got, tt.want)
			}
			for _, h := range hs {
				if tt.f.Status != "" && h.Status != tt.f.Status {
					t.Errorf("lead %s is %s, asked for %s", h.Key, h.Status, tt.f.Status)
				}
				if !tt.f.SinceBefore.IsZero() && !h.Since.Before(tt.f.SinceBefore) {
					t.Errorf("lead %s since %s, asked for before %s", h.Key, h.Since, tt.f.SinceBefore)
				}
			}
		})
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}
