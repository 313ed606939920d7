package store

import (
	"context"
	"testing"

	"github.com/oklog/ulid/v2"
)

func TestFindEvent(t *testing.T) {
	st := openTest(t)
	rec := record(t, st, "web:find-1", t0)
	ev := rec.Event
	d, _, err := st.SaveDraft(context.Background(), Draft{EventKey: ev.Key, Text: "hi", CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.ApproveDraft(context.Background(), d.ID, Approval{Decision: Decision{By: "x", At: t0}, Provider: "sandbox", JobID: ulid.Make().String(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	record(t, st, "web:other", t0) // another event, which no query below may find
	tests := []struct{ name, q, want string }{
		{"event key", ev.Key, ev.Key},
		{"draft id", d.ID, ev.Key},
		{"outbox id", a.Outbox.ID, ev.Key},
		{"lead key", LeadKey(ev.Channel, ev.ConversationID), ev.Key},
		{"correlation id", ev.CorrelationID, ev.Key},
		{"conversation id", ev.ConversationID, ev.Key},
		{"unknown", "nothing-like-this", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.FindEvent(Everything(), tt.q)
			if err != nil || got != tt.want {
				t.Errorf("FindEvent(%q) = %q, %v; want %q", tt.q, got, err, tt.want)
			}
		})
	}
}
