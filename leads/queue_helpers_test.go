package leads_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// The queue helpers of the turn tests (turns_test.go), which came from the
// store's tests with them: a turn's draft jobs are claimed and ended
// through the store's queue, as the runner does.

// openTest opens a store on a real bbolt file in a fresh temporary folder,
// checked and closed at cleanup.
func openTest(t testing.TB) *store.Store {
	t.Helper()
	return testkit.OpenStore(t, t.TempDir())
}

// draftJobFor is the draft job an event is recorded with.
func draftJobFor(key string, maxAttempts int) store.NewJob {
	return store.NewJob{ID: ulid.Make().String(), Kind: store.KindDraft, Key: key, MaxAttempts: maxAttempts}
}

// claimOne claims exactly one job at now, failing the test otherwise.
func claimOne(t testing.TB, st *store.Store, now time.Time, lease time.Duration) store.Job {
	t.Helper()
	got, err := st.Claim(context.Background(), now, store.AnyJobs(1), lease)
	if err != nil {
		t.Fatalf("Claim(%s): %v", now, err)
	}
	if len(got) != 1 {
		t.Fatalf("Claim(%s) claimed %d jobs, want 1", now, len(got))
	}
	return got[0]
}

// mustJob reads a job back.
func mustJob(t testing.TB, st *store.Store, id string) store.Job {
	t.Helper()
	j, err := st.Job(id)
	if err != nil {
		t.Fatalf("Job(%s): %v", id, err)
	}
	return j
}

// together runs n goroutines that all start at the same moment (a closed
// channel releases them) and waits for every one of them.
func together(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}
