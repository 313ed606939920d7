package outbound_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/outbound"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestExportAndErase: a lead's events carry its words (an approved reply's
// text), so the client's export lists them and an erasure blanks their
// body and address once sent, as for the lead's CRM writes and alerts.
func TestExportAndErase(t *testing.T) {
	rc := newReceiver(t)
	b := newBed(t, config.Subscriber{Name: "n8n", URL: rc.srv.URL})
	b.run(1)
	ada := corpus.Texts()[0].Body
	ev := b.receive("web", "m1", "c1", ada, "Ada")
	d := b.draft(ev, "ana", "Dear Ada: "+ada)
	b.approve(d)
	b.settled(7)
	sub := store.Subject{Client: "default", Channels: []string{"web"}, Contact: "+1 555 0100"}
	var out bytes.Buffer
	if _, err := b.st.Export(&out, sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	id := outbound.RowID(store.LeadKey("web", "c1"), "n8n", config.EventDraftApproved, d.ID)
	if !strings.Contains(out.String(), id) {
		t.Errorf("export: want Ada's draft.approved event %s", id)
	}
	if _, err := b.st.Erase(context.Background(), sub, store.AuditEntry{V: 1, ID: ulid.Make().String(), At: time.Now(), Who: "admin", Action: "erase"}); err != nil {
		t.Fatal(err)
	}
	o, _ := b.st.OutboxRow(id)
	if strings.Contains(o.Text, "Dear Ada") {
		t.Errorf("after erasure the event still holds the reply: %q", o.Text)
	}
}

// TestRetention: sent events go with retention, as alerts and CRM writes
// do; an unsent one stays.
func TestRetention(t *testing.T) {
	rc := newReceiver(t)
	rc.add(config.EventDraftApproved, "400") // refused: failed, not dismissed, kept
	b := newBed(t, config.Subscriber{Name: "n8n", URL: rc.srv.URL})
	b.run(1)
	ev := b.receive("web", "m1", "c1", corpus.Texts()[3].Body, "")
	d := b.draft(ev, "ana", "ok")
	b.approve(d)
	rows := b.settled(7)
	if _, err := b.st.PruneOutside(context.Background(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	left := b.rows()
	kept := outbound.RowID(store.LeadKey("web", "c1"), "n8n", config.EventDraftApproved, d.ID)
	if len(left) != 1 || left[kept].ID != kept {
		t.Errorf("after retention %d of %d event rows are left (%v), want the failed one alone", len(left), len(rows), ids(left))
	}
}

// TestEraseBeforeTheEventGoes: an outbound event's body is the customer's
// words, so an erasure blanks it even while the row still waits to be
// posted (unlike an alert's, which names only the lead), and the sink
// refuses an erased body for good without a request.
func TestEraseBeforeTheEventGoes(t *testing.T) {
	rc := newReceiver(t)
	b := newBed(t, config.Subscriber{Name: "n8n", URL: rc.srv.URL})
	b.run(1)
	words := corpus.Texts()[2].Body
	ev := b.receive("web", "m1", "c1", words, "Ada")
	d := b.draft(ev, "ana", "Dear Ada: "+words)
	b.approve(d)
	b.settled(7)
	id := outbound.RowID(store.LeadKey("web", "c1"), "n8n", config.EventDraftApproved, d.ID)
	// The state an erasure can meet: the reply sent, its event waiting for
	// its next try (the subscriber refused it, and its retry is due later).
	err := b.st.Update(context.Background(), func(tx *store.Tx) error {
		old, err := tx.Outbox(id)
		if err != nil {
			return err
		}
		o := old
		o.Status = store.OutboxPending
		return tx.PutOutbox(&old, &o)
	})
	if err != nil {
		t.Fatal(err)
	}
	sub := store.Subject{Client: "default", Channels: []string{"web"}, Contact: "+1 555 0100"}
	res, err := b.st.Erase(context.Background(), sub, store.AuditEntry{V: 1, ID: ulid.Make().String(), At: time.Now(), Who: "admin", Action: "erase"})
	if err != nil || len(res.Busy) > 0 {
		t.Fatalf("Erase = %+v, %v", res, err)
	}
	o, _ := b.st.OutboxRow(id)
	if o.Text != store.Erased || strings.Contains(o.Text, "Dear Ada") {
		t.Errorf("the waiting event after the erasure holds %q, want it erased", o.Text)
	}
	before := len(rc.got)
	_, err = outbound.Open(&config.Config{Events: []config.Subscriber{{Name: "n8n", URL: rc.srv.URL, Secret: secret}}})["events:n8n"].Send(context.Background(), provider.Message{Ref: id, Text: o.Text})
	var perm *provider.Permanent
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "erased") {
		t.Errorf("posting an erased event: %v; want a permanent refusal saying the lead was erased", err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.got) != before {
		t.Errorf("the erased event reached the subscriber")
	}
}
