package store

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestDraftCosts: the walk returns the drafts created since the day asked,
// including a draft written that day for an event days older (within the
// week's look-back), and stops at its bound saying so.
func TestDraftCosts(t *testing.T) {
	st := openTest(t)
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	add := func(key string, received, created time.Time, cost float64) {
		t.Helper()
		ev := newEvent(key, received)
		ev.ID = ulid.MustNew(ulid.Timestamp(received), rand.Reader).String()
		if _, err := st.RecordEvent(context.Background(), ev, draftJobFor(key, 3)); err != nil {
			t.Fatal(err)
		}
		d := draftFor(ev, "hi", "")
		d.CreatedAt, d.Cost, d.Currency, d.PromptVersion = created, cost, "EUR", "p1"
		if _, _, err := st.SaveDraft(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	add("web:yesterday", day.Add(-20*time.Hour), day.Add(-20*time.Hour), 1)
	add("web:late", day.Add(-72*time.Hour), day.Add(2*time.Hour), 2)
	add("web:today", day.Add(time.Hour), day.Add(time.Hour), 4)
	add("web:ancient", day.Add(-10*24*time.Hour), day.Add(3*time.Hour), 8)

	got, more, err := st.DraftCosts(day, 100)
	if err != nil || more {
		t.Fatalf("DraftCosts = more %v, %v", more, err)
	}
	var sum float64
	var ids []string
	for _, c := range got {
		sum += c.Cost
		ids = append(ids, c.ID)
	}
	if len(got) != 2 || sum != 6 {
		t.Errorf("DraftCosts(day) = %v (sum %v), want the late and today's drafts (6)", ids, sum)
	}
	if _, more, err := st.DraftCosts(day, 1); err != nil || !more {
		t.Errorf("DraftCosts with a bound of 1 = more %v, %v; want more", more, err)
	}
	if !slices.ContainsFunc(got, func(c DraftCost) bool { return c.PromptVersion == "p1" && c.Currency == "EUR" }) {
		t.Errorf("DraftCosts lost the prompt version or currency: %+v", got)
	}
}
