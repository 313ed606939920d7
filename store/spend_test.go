package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestSpendReadsEveryDraft: a budget's sum walks every draft of the day
// (a bounded walk once under-counted a budget past 100,000 drafts a day),
// including a draft written that day for an event days older (within the
// week's look-back) and not one of an event older than that, nor one of
// yesterday, and counts only the channels asked for.
func TestSpendReadsEveryDraft(t *testing.T) {
	st := openTest(t)
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	add := func(key, channel string, received, created time.Time, cost float64) {
		t.Helper()
		ev := newEvent(key, received)
		ev.ID = ulid.MustNew(ulid.Timestamp(received), rand.Reader).String()
		ev.Channel = channel
		if _, err := st.RecordEvent(context.Background(), ev, draftJobFor(key, 3)); err != nil {
			t.Fatal(err)
		}
		d := draftFor(ev, "hi", "")
		d.CreatedAt, d.Cost, d.Currency = created, cost, "EUR"
		if _, _, err := st.SaveDraft(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	add("web:yesterday", "web", day.Add(-20*time.Hour), day.Add(-20*time.Hour), 100)
	add("web:late", "web", day.Add(-72*time.Hour), day.Add(2*time.Hour), 2)
	add("web:ancient", "web", day.Add(-10*24*time.Hour), day.Add(3*time.Hour), 100)
	add("sms:other", "sms", day.Add(time.Hour), day.Add(time.Hour), 100)
	const n = 30
	for i := range n {
		add(fmt.Sprintf("web:today-%02d", i), "web", day.Add(time.Hour), day.Add(time.Hour), 0.5)
	}
	var sp Spend
	if err := st.View(func(tx *Tx) error {
		var err error
		sp, err = tx.Spend(day, []string{"web"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := (Spend{Total: 2 + n*0.5, Largest: 2, Drafts: n + 1}); sp != want {
		t.Errorf("Spend(day, web) = %+v, want %+v: every draft of the day on web, the late one included", sp, want)
	}
}

// TestBudgetHolds: a hold counts until its lease ends, is released by its
// execution alone, and a new hold sweeps the client's expired ones.
func TestBudgetHolds(t *testing.T) {
	st := openTest(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	holds := func(at time.Time) []BudgetHold {
		t.Helper()
		var out []BudgetHold
		if err := st.View(func(tx *Tx) error {
			var err error
			out, err = tx.BudgetHolds("acme", at)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	put := func(h BudgetHold, at time.Time) {
		t.Helper()
		if err := st.Update(context.Background(), func(tx *Tx) error { return tx.HoldBudget(h, at) }); err != nil {
			t.Fatal(err)
		}
	}
	put(BudgetHold{Client: "acme", ExecutionID: "e1", Reserve: 1, Until: now.Add(time.Minute)}, now)
	put(BudgetHold{Client: "acme", ExecutionID: "e2", Reserve: 2, Until: now.Add(time.Hour)}, now)
	put(BudgetHold{Client: "other", ExecutionID: "e3", Reserve: 4, Until: now.Add(time.Hour)}, now)
	if got := holds(now); len(got) != 2 {
		t.Fatalf("holds of acme = %+v, want e1 and e2", got)
	}
	if got := holds(now.Add(2 * time.Minute)); len(got) != 1 || got[0].ExecutionID != "e2" {
		t.Errorf("holds of acme once e1's lease ended = %+v, want e2 alone", got)
	}
	if err := st.Update(context.Background(), func(tx *Tx) error { return tx.ReleaseBudget("acme", "e2") }); err != nil {
		t.Fatal(err)
	}
	if got := holds(now); len(got) != 1 || got[0].ExecutionID != "e1" {
		t.Errorf("holds of acme once e2 was released = %+v, want e1 alone: a release is its execution's", got)
	}
	put(BudgetHold{Client: "acme", ExecutionID: "e4", Reserve: 1, Until: now.Add(time.Hour)}, now.Add(2*time.Minute))
	if err := st.View(func(tx *Tx) error {
		n := 0
		c := tx.bucket(bucketMeta).Cursor()
		prefix := []byte("budget_hold:acme\x00")
		for k, _ := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, _ = c.Next() {
			n++
		}
		if n != 1 {
			return fmt.Errorf("%d holds of acme stored, want e4 alone: e1 expired and e2 was released", n)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := st.View(func(tx *Tx) error {
		got, err := tx.BudgetHolds("other", now)
		if err == nil && (len(got) != 1 || got[0].ExecutionID != "e3") {
			err = fmt.Errorf("holds of other = %+v, want e3: acme's sweep is acme's", got)
		}
		return err
	}); err != nil {
		t.Error(err)
	}
}
