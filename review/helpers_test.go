package review_test

import (
	"context"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// openStore opens a store on a real bbolt file, checked and closed at cleanup.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	return testkit.OpenStore(t, "")
}

// testConfig has the web channel sending through the sandbox, and the auto
// channel approving its own drafts; delivery jobs get 3 attempts.
func testConfig() *config.Config {
	return &config.Config{
		Channels: []config.Channel{
			{Name: "web", Provider: "sandbox"},
			{Name: "auto", Provider: "sandbox", AutoApprove: true},
		},
		Retry: config.Retry{MaxAttempts: 3},
	}
}

func newReview(st *store.Store) *review.Review { return review.New(st, testConfig()) }

// record stores an inbound event on channel with its draft job.
func record(t testing.TB, st *store.Store, channel, key string, at time.Time) store.Recorded {
	t.Helper()
	ev := store.Event{
		ID: ulid.Make().String(), Key: key, Channel: channel, MessageID: key,
		CorrelationID: ulid.Make().String(), ConversationID: "conv-" + key,
		Contact: "ada@example.com", Name: "Ada", Text: "hello from " + key, ReceivedAt: at,
	}
	rec, err := leads.RecordEvent(context.Background(), st, ev, store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = created %v, %v", key, rec.Created, err)
	}
	return rec
}

// draftFor is a draft of ev as the draft job stores it.
func draftFor(ev store.Event, text string) store.Draft {
	return store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel,
		ConversationID: ev.ConversationID, Text: text, Drafter: "template", CreatedAt: ev.ReceivedAt,
	}
}

// saved stores the first draft of ev.
func saved(t testing.TB, rv *review.Review, ev store.Event, text string) store.Draft {
	t.Helper()
	d, created, err := rv.Save(context.Background(), draftFor(ev, text), 1)
	if err != nil || !created {
		t.Fatalf("Save(%s) = created %v, %v", ev.Key, created, err)
	}
	return d
}

// together runs n goroutines released at once (testkit.Together).
func together(n int, fn func(i int)) { testkit.Together(n, fn) }

// claim leases the one due job.
func claim(t testing.TB, st *store.Store, now time.Time) store.Job {
	t.Helper()
	got, err := st.Claim(context.Background(), now, store.AnyJobs(1), time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim = %d jobs, %v; want 1", len(got), err)
	}
	return got[0]
}

// jobsOfKind returns the jobs of kind that followed from one event.
func jobsOfKind(t testing.TB, st *store.Store, corr, kind string) []store.Job {
	t.Helper()
	var all []store.Job
	err := st.View(func(tx *store.Tx) (err error) { all, err = tx.JobsByCorrelation(corr); return err })
	if err != nil {
		t.Fatalf("JobsByCorrelation(%s): %v", corr, err)
	}
	var out []store.Job
	for _, j := range all {
		if j.Kind == kind {
			out = append(out, j)
		}
	}
	return out
}
