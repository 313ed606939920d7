package workers

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// openStore opens a store on a real bbolt file, checked and closed at cleanup.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	return testkit.OpenStore(t, "")
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions are fast retries on the wall clock with no jitter.
func testOptions() jobs.Options {
	return jobs.Options{
		Workers: 2,
		Backoff: jobs.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond},
		Logger:  discardLogger(),
		Jitter:  func() float64 { return 0 },
	}
}

// startRunner starts a runner and stops it at the end of the test (before
// the store's cleanup, which was registered earlier).
func startRunner(t *testing.T, st *store.Store, kinds map[string]jobs.Kind, opt jobs.Options) *jobs.Runner {
	t.Helper()
	r := jobs.NewRunner(st, kinds, opt)
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return r
}
