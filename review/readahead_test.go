package review_test

import (
	"context"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/testkit/corpus"
)

// On PostgreSQL a draft's save reads ahead every key it reads: the draft
// and event indexes, the event, the lead, the job, the counts it moves.
// Each key read alone is a round trip made under the writers' lock, while
// every other write of the database waits; there were 15.
func TestRecordReadsAhead(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenURL(ctx, pgtest.URL(t)+" search_path="+pgtest.Schema(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rv := newReview(st)
	for i, tx := range corpus.Texts() {
		key := "web:ra-" + tx.Name
		ev := store.Event{
			ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: key,
			CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
			Contact: "ada@example.com", Name: tx.From, Text: tx.Body, ReceivedAt: t0.Add(time.Duration(i) * time.Second),
		}
		if _, err := leads.RecordEvent(ctx, st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: key, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		job := claim(t, st, t0.Add(time.Hour))
		if job.Key != key {
			t.Fatalf("claimed the job of %s; want %s's", job.Key, key)
		}
		d := draftFor(ev, "Thanks — "+tx.Body)
		d.ID = store.DraftVersionID(ev.ID, 1)
		before := st.RoundTrips()
		got, err := rv.Record(ctx, job, &d, 1, t0.Add(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The begin; every key read ahead, with the first Get; the writes
		// with the COMMIT.
		if n := st.RoundTrips() - before; n != 3 {
			t.Errorf("%s: saving the draft took %d round trips; want 3", tx.Name, n)
		}
		if got.Status != store.DraftPending || got.Text != d.Text {
			t.Errorf("%s: saved %s %q; want pending %q", tx.Name, got.Status, got.Text, d.Text)
		}
	}
}
