package outbound_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/outbound"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestConcurrentOnce: many leads at once, from first message to reply,
// the runner's workers racing in both pools and the subscriber failing
// and cutting requests: every event is one row, sent, acted on once.
func TestConcurrentOnce(t *testing.T) {
	rc := newReceiver(t)
	b := newBed(t, config.Subscriber{Name: "n8n", URL: rc.srv.URL})
	for range 4 {
		rc.add(config.EventLeadStatusChanged, "500", "drop")
		rc.add(config.EventDraftApproved, "drop", "500")
		rc.add(config.EventReplySent, "500")
	}
	b.run(4)
	texts := corpus.Texts()
	const n = 12
	testkit.Together(n, func(i int) {
		text := texts[i%len(texts)]
		conv := fmt.Sprintf("c%02d", i)
		ev := b.receive("web", "m"+conv, conv, text.Body, text.From)
		b.approve(b.draft(ev, "ana", text.Body))
	})
	// Per lead: four status changes, an approval, a sent reply, and the
	// draft job's dead letter (see run).
	rows := b.settled(7 * n)
	if len(rows) != 7*n {
		t.Errorf("%d event rows, want %d", len(rows), 7*n)
	}
	for id, o := range rows {
		if o.Status != store.OutboxSent {
			t.Errorf("row %s ended %s (%s)", id, o.Status, o.Note)
		}
	}
	evs := rc.events()
	if len(evs) != 7*n {
		t.Errorf("the receiver acted on %d events, want %d", len(evs), 7*n)
	}
	if got := typesOf(evs); got[config.EventLeadStatusChanged] != 4*n || got[config.EventDraftApproved] != n || got[config.EventReplySent] != n || got[config.EventDeadLetterAdded] != n {
		t.Errorf("acted on %v, want %d status changes and %d of each other", got, 4*n, n)
	}
	for id := range rows {
		if _, ok := evs[outbound.MessageID(id)]; !ok {
			t.Errorf("row %s was sent, and the receiver never acted on it", id)
		}
	}
}

// TestSubscriberDownHoldsNoReply: a subscriber that accepts the requests
// and never answers holds the events' one worker for as long as their
// timeout allows — and the reply goes at once, from its own pool, while
// every event of the lead is still unsent.
func TestSubscriberDownHoldsNoReply(t *testing.T) {
	rc := newReceiver(t)
	b := newBed(t, config.Subscriber{Name: "slow", URL: rc.srv.URL, Timeout: 30 * time.Second})
	for _, typ := range config.EventTypes {
		rc.add(typ, "hang", "hang", "hang", "hang", "hang", "hang", "hang", "hang")
	}
	b.run(1)
	text := corpus.Texts()[5]
	ev := b.receive("web", "m1", "c1", text.Body, text.From)
	ap := b.approve(b.draft(ev, "ana", text.Body))
	testkit.Eventually(t, 20*time.Second, func() bool {
		o, _ := b.st.OutboxRow(ap.Outbox.ID)
		return o.Status == store.OutboxSent
	}, "the reply to be sent while the subscriber hangs")
	if h, _ := b.st.Handoff(store.LeadKey("web", "c1")); h.Status != "replied" {
		t.Errorf("lead %s, want replied", h.Status)
	}
	for id, o := range b.rows() {
		if o.Status == store.OutboxSent {
			t.Errorf("event %s was sent: the subscriber never answered", id)
		}
	}
	if n := len(rc.events()); n != 0 {
		t.Errorf("the hung subscriber acted on %d events", n)
	}
	// Released, it gets every event, each once.
	rc.releaseAll()
	b.wake()
	rows := b.settled(7)
	for id, o := range rows {
		if o.Status != store.OutboxSent {
			t.Errorf("row %s ended %s", id, o.Status)
		}
	}
}
