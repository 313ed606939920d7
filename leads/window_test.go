package leads_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// TestLastInbound: a lead's reply window opens at its latest message: each
// new message moves it, a duplicate does not, and a lead whose latest
// event cannot be found falls back to its history's latest move, which is
// no later.
func TestLastInbound(t *testing.T) {
	st := openStore(t, "")
	lead := store.LeadKey("web", "conv-w")
	at := func() time.Time {
		t.Helper()
		got, err := leads.LastInbound(st, lead)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	receive(t, st, "w1", "conv-w", "ada@example.com", t0)
	if got := at(); !got.Equal(t0) {
		t.Errorf("after the first message: %s, want %s", got, t0)
	}
	receive(t, st, "w2", "conv-w", "ada@example.com", t0.Add(3*time.Hour))
	if got := at(); !got.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("after the second message: %s, want %s", got, t0.Add(3*time.Hour))
	}
	rec, err := intake.Record(context.Background(), st, intake.Message{
		Channel: "web", MessageID: "w2", ConversationID: "conv-w", Contact: "ada@example.com", Text: "again", ReceivedAt: t0.Add(5 * time.Hour),
	}, 3)
	if err != nil || rec.Created {
		t.Fatalf("the duplicate: created %v, %v", rec.Created, err)
	}
	if got := at(); !got.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("after a duplicate: %s, want the second message's %s", got, t0.Add(3*time.Hour))
	}
	h, err := st.Handoff(lead)
	if err != nil {
		t.Fatal(err)
	}
	h.LastEventKey = "web:gone"
	err = st.View(func(tx *store.Tx) error {
		got, err := leads.LastInboundTx(tx, h)
		if !errors.Is(err, leads.ErrInboundUnknown) || !strings.Contains(err.Error(), "web:gone") || !got.IsZero() {
			t.Errorf("with the latest event missing: %s, %v; want it unknown, naming web:gone (a window that counts as closed)", got, err)
		}
		h.LastEventKey = ""
		got, err = leads.LastInboundTx(tx, h)
		if err != nil || !got.Equal(t0) {
			t.Errorf("a lead keeping no latest event: %s, %v; want its received move %s, no later than the message", got, err, t0)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
