package crm_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/store"
)

// TestExportAndErase: a lead's CRM writes carry its contact, so the
// client's export lists them and an erasure blanks their record and
// address, as for the lead's alerts (a write still on its way is left to
// finish, as an alert is).
func TestExportAndErase(t *testing.T) {
	hs := newHubSpot(t)
	b := newBed(t, config.CRM{Kind: config.CRMHubSpot, APIBase: hs.srv.URL, Token: hs.token, IDProperty: "handoff_lead_key", StatusProperty: "handoff_status"})
	b.receive("m1", "c1", "ada@example.com", "Ada")
	b.receive("m2", "c1:x", "bob@example.com", "Bob") // a lead whose conversation id starts with c1's
	b.run(1)
	b.settled("c1", "c1:x")
	sub := store.Subject{Client: "default", Channels: []string{"web"}, Contact: "ada@example.com"}
	var out bytes.Buffer
	if _, err := b.st.Export(&out, sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	id := crm.RowID(store.LeadKey("web", "c1"), 1, "received")
	if !strings.Contains(out.String(), id) || strings.Contains(out.String(), "bob@example.com") {
		t.Errorf("export: want Ada's CRM write and nothing of Bob's:\n%s", out.String())
	}
	if _, err := b.st.Erase(context.Background(), sub, store.AuditEntry{V: 1, ID: ulid.Make().String(), At: time.Now(), Who: "admin", Action: "erase"}); err != nil {
		t.Fatal(err)
	}
	o, _ := b.st.OutboxRow(id)
	if strings.Contains(o.Text, "ada@example.com") || strings.Contains(o.To, "ada") {
		t.Errorf("after erasure the CRM write still holds the contact: to %q text %q", o.To, o.Text)
	}
	other, _ := b.st.OutboxRow(crm.RowID(store.LeadKey("web", "c1:x"), 1, "received"))
	if !strings.Contains(other.Text, "bob@example.com") {
		t.Errorf("the erasure touched another lead's CRM write: %q", other.Text)
	}
}
