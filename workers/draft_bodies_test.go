package workers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
)

// gatedDrafter holds every call until open is closed, counting the calls
// in flight and the most at once.
type gatedDrafter struct {
	next           Drafter
	open           chan struct{}
	inFlight, most atomic.Int64
	entered        chan struct{}
}

func (g *gatedDrafter) Draft(ctx context.Context, in drafter.Input) (drafter.Output, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return drafter.Output{}, ctx.Err()
	}
	return g.next.Draft(ctx, in)
}

// TestDraftBodiesBounded: with room for the stored bytes of two events,
// four drafts run two at a time; a fifth that finds no room within its
// wait is snoozed (no attempt spent), and every draft is stored once the
// first ones give their room back.
func TestDraftBodiesBounded(t *testing.T) {
	st := openStore(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	keys := []string{"web:b1", "web:b2", "web:b3", "web:b4", "web:b5"}
	var claimed []store.Job
	var most int
	for _, key := range keys {
		recordDraftEvent(t, st, key, now)
		n, err := st.EventSize(key)
		if err != nil || n <= 0 {
			t.Fatalf("EventSize(%s) = %d, %v", key, n, err)
		}
		most = max(most, n)
		claimed = append(claimed, claim(t, st, now))
	}
	if _, err := st.EventSize("web:none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EventSize of no event: %v, want ErrNotFound", err)
	}
	g := &gatedDrafter{next: newCountingTemplate(t), open: make(chan struct{}), entered: make(chan struct{}, len(keys))}
	k := newDraftJob(st, g)
	size := int64(2*most + most/2) // two fit, three do not
	k.Bodies, k.BodiesSize = semaphore.NewWeighted(size), size
	k.BodyWait = time.Hour // the four wait for room; the fifth's is set below

	errs := make([]error, len(claimed))
	var wg sync.WaitGroup
	for i, job := range claimed[:4] {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = k.Run(context.Background(), job) }()
	}
	<-g.entered
	<-g.entered
	// Two hold the room. A run with a wait that ends finds none.
	short := *k
	short.BodyWait = time.Millisecond
	var snooze *jobs.Snooze
	if err := short.Run(context.Background(), claimed[4]); !errors.As(err, &snooze) {
		t.Errorf("a run with no room within its wait: %v, want a *jobs.Snooze", err)
	}
	if n := g.inFlight.Load(); n != 2 {
		t.Errorf("%d drafts in flight with room for two", n)
	}
	close(g.open)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	if m := g.most.Load(); m != 2 {
		t.Errorf("at most %d drafts ran at once, want 2 (the room of two events)", m)
	}
	if err := k.Run(context.Background(), claimed[4]); err != nil {
		t.Errorf("the snoozed draft once there is room: %v", err)
	}
	for _, key := range keys {
		if _, err := st.DraftByEvent(key); err != nil {
			t.Errorf("draft of %s: %v", key, err)
		}
	}
}
