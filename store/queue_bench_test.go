package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store/engine"
)

// BenchmarkQueuePage measures what the approval queue reads per page view —
// the counts of the navigation and one page of 50 drafts — with 100 and with
// 100,000 drafts waiting (both fill a page). The two must cost about the same.
func BenchmarkQueuePage(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprintf("drafts=%d", n), func(b *testing.B) {
			st := openTest(b)
			fillDrafts(b, st, n)
			stuck := map[HandoffStatus]time.Time{HandoffReceived: t0, HandoffMatched: t0, HandoffOwned: t0}
			b.ResetTimer()
			for b.Loop() {
				if _, err := st.Counts(stuck); err != nil {
					b.Fatal(err)
				}
				if page, _, err := st.Drafts(DraftFilter{Status: DraftPending, Limit: 50}); err != nil || len(page) != min(n, 50) {
					b.Fatalf("page of %d, %v", len(page), err)
				}
			}
		})
	}
}

// fillDrafts writes n pending drafts (and their events and leads) directly,
// a few thousand per transaction, so the setup stays quick.
func fillDrafts(b *testing.B, st *Store, n int) {
	b.Helper()
	const chunk = 5000
	for done := 0; done < n; done += chunk {
		err := st.raw(func(btx engine.Tx) error {
			tx := &Tx{tx: btx}
			for i := done; i < min(done+chunk, n); i++ {
				ev := newEvent(fmt.Sprintf("web:q-%07d", i), t0.Add(time.Duration(i)*time.Millisecond))
				if err := eventsTable.insert(tx, &ev); err != nil {
					return err
				}
				j := newJob(NewJob{ID: ulid.Make().String(), Kind: KindDraft, Key: ev.Key, MaxAttempts: 1}, ev.CorrelationID, ev.ReceivedAt)
				if _, err := receiveFixture(tx, ev, &j, nil); err != nil {
					return err
				}
				d := Draft{V: recordVersion, Version: 1, ID: DraftID(ev.ID), EventKey: ev.Key, Channel: ev.Channel, ConversationID: ev.ConversationID,
					CorrelationID: ev.CorrelationID, Status: DraftPending, Text: "hi", CreatedAt: ev.ReceivedAt}
				if err := insertDraft(tx, d, ev); err != nil {
					return err
				}
				if err := draftedFixture(tx, d, ev.Contact, d.CreatedAt); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
