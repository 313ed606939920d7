package delivery_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"

	"github.com/handoff/handoff/testkit"
)

// parked is a reply whose one send ended unknown on its last attempt
// (needs_reconciliation) through a slowProvider with lookup.
func parked(t *testing.T, script string) (*slowRig, *slowProvider) {
	t.Helper()
	clock := testkit.NewClock(time.Now().UTC().Add(time.Minute))
	p := &slowProvider{
		clock: clock, script: []string{script}, accepted: map[string]time.Time{},
		caps: provider.Capabilities{Lookup: true, Timeout: 2 * time.Second, LookupSettle: 10 * time.Second},
	}
	g := startSlow(t, p, 1)
	row, job := g.waitAttempts(t, 1)
	if row.Status != store.OutboxNeedsReconciliation || job.State != store.JobCompleted {
		t.Fatalf("row %s, job %s; want needs_reconciliation after the one attempt", row.Status, job.State)
	}
	return g, p
}

// TestLookUpSettles: a person's lookup settles a reply that needs
// reconciliation by the provider's answer: found → sent (the lead
// replied); not found too soon after the send → unchanged, saying so; not
// found once it counts → failed, and then a replay is safe.
func TestLookUpSettles(t *testing.T) {
	t.Run("found", func(t *testing.T) {
		g, p := parked(t, "ambiguous")
		ob := delivery.NewForTest(g.st, 3, func() string { return "job-x" })
		got, err := ob.LookUp(context.Background(), g.outboxID, p, "boss", "127.0.0.1", g.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != delivery.LookedSent || got.Row.Status != store.OutboxSent || got.Row.ProviderID != "slow-1" {
			t.Fatalf("verdict %q, row %s as %q; want sent as slow-1", got.Verdict, got.Row.Status, got.Row.ProviderID)
		}
		row, _ := g.st.OutboxRow(g.outboxID)
		if s := attemptSummary(row); !slices.Equal(s, []string{"send:ambiguous", "lookup:sent"}) || row.Status != store.OutboxSent {
			t.Errorf("stored row %s with attempts %v, want sent after send:ambiguous, lookup:sent", row.Status, s)
		}
		if h, err := g.st.Handoff(store.LeadKey("demo", deliverConv)); err != nil || h.Status != leads.Replied {
			t.Errorf("lead %s (%v), want replied", h.Status, err)
		}
		wantAudit(t, g.st, "boss", "look up", "sent slow-1")
		if sends, lookups := p.counts(); sends != 1 || lookups != 1 {
			t.Errorf("the provider got %d sends and %d lookups, want 1 and 1", sends, lookups)
		}
		// Settled: a second lookup is refused and asks nothing.
		if _, err := ob.LookUp(context.Background(), g.outboxID, p, "boss", "", g.clock.Now()); !isState(err) {
			t.Errorf("a lookup of a sent row: %v, want a StateError", err)
		}
		if _, lookups := p.counts(); lookups != 1 {
			t.Errorf("%d lookups, want the refused one not to ask", lookups)
		}
	})

	t.Run("not found", func(t *testing.T) {
		g, p := parked(t, "lost") // the provider never took it
		ob := delivery.NewForTest(g.st, 3, func() string { return "job-y" })
		got, err := ob.LookUp(context.Background(), g.outboxID, p, "boss", "", g.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != delivery.LookedUnknown || got.Row.Status != store.OutboxNeedsReconciliation || !strings.Contains(got.Why, "could not tell") {
			t.Fatalf("too soon: verdict %q, row %s, why %q; want unchanged and why", got.Verdict, got.Row.Status, got.Why)
		}
		g.clock.Advance(11 * time.Second)
		got, err = ob.LookUp(context.Background(), g.outboxID, p, "boss", "", g.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != delivery.LookedFailed || got.Row.Status != store.OutboxFailed {
			t.Fatalf("settled: verdict %q, row %s; want failed", got.Verdict, got.Row.Status)
		}
		if s := attemptSummary(got.Row); !slices.Equal(s, []string{"send:ambiguous", "lookup:not_found_yet", "lookup:not_found"}) {
			t.Errorf("attempts %v", s)
		}
		if safe, why, _ := delivery.Safety(got.Row); !safe {
			t.Errorf("a row the provider proved it never got is unsafe to replay: %s", why)
		}
		if _, err := ob.Replay(context.Background(), g.outboxID, store.Replay{By: "boss", At: g.clock.Now()}); err != nil {
			t.Errorf("replay without a confirmation after the lookup: %v", err)
		}
	})

	t.Run("provider without lookup", func(t *testing.T) {
		g, p := parked(t, "ambiguous")
		none := &slowProvider{clock: g.clock, caps: provider.Capabilities{}, accepted: map[string]time.Time{}}
		ob := delivery.NewForTest(g.st, 3, func() string { return "job-z" })
		for _, lk := range []delivery.Looker{none, nil} {
			if _, err := ob.LookUp(context.Background(), g.outboxID, lk, "boss", "", g.clock.Now()); !isState(err) || !strings.Contains(err.Error(), "unable to look a message up") {
				t.Errorf("no lookup: %v, want a StateError saying so", err)
			}
		}
		if _, lookups := p.counts(); lookups != 0 {
			t.Errorf("%d lookups", lookups)
		}
		if row, _ := g.st.OutboxRow(g.outboxID); len(row.Attempts) != 1 || row.Status != store.OutboxNeedsReconciliation {
			t.Errorf("the row changed: %s %v", row.Status, attemptSummary(row))
		}
	})
}

// gated holds every lookup until released, so a test can act while the
// provider is being asked.
type gated struct {
	delivery.Looker
	asked   chan struct{}
	release chan struct{}
}

func (g *gated) Lookup(ctx context.Context, ref, corr string) (string, bool, error) {
	g.asked <- struct{}{}
	<-g.release
	return g.Looker.Lookup(ctx, ref, corr)
}

// TestLookUpRaces: the lookup's write checks the row in its own
// transaction. A person's verdict that lands while the provider is asked
// wins, and the lookup writes nothing; and of many lookups at once exactly
// one settles the row.
func TestLookUpRaces(t *testing.T) {
	t.Run("a verdict meanwhile", func(t *testing.T) {
		g, p := parked(t, "ambiguous")
		gp := &gated{Looker: p, asked: make(chan struct{}), release: make(chan struct{})}
		ob := delivery.NewForTest(g.st, 3, func() string { return "job-a" })
		done := make(chan error, 1)
		go func() {
			_, err := ob.LookUp(context.Background(), g.outboxID, gp, "boss", "", g.clock.Now())
			done <- err
		}()
		<-gp.asked
		if _, err := ob.Reconcile(context.Background(), g.outboxID, store.Reconciliation{By: "dana", At: g.clock.Now(), Outcome: "sent", ProviderID: "found-by-dana"}); err != nil {
			t.Fatal(err)
		}
		close(gp.release)
		if err := <-done; !isState(err) || !strings.Contains(err.Error(), "changed while it was looked up") {
			t.Fatalf("the lookup after a verdict: %v, want a StateError", err)
		}
		row, _ := g.st.OutboxRow(g.outboxID)
		if row.ProviderID != "found-by-dana" || slices.Contains(attemptSummary(row), "lookup:sent") {
			t.Errorf("row %s as %q with %v: the person's verdict must stand alone", row.Status, row.ProviderID, attemptSummary(row))
		}
	})

	t.Run("many at once", func(t *testing.T) {
		g, p := parked(t, "ambiguous")
		ob := delivery.NewForTest(g.st, 3, func() string { return "job-b" })
		const n = 8
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = ob.LookUp(context.Background(), g.outboxID, p, "boss", "", g.clock.Now())
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !isState(err):
				t.Errorf("a losing lookup: %v, want a StateError", err)
			}
		}
		row, _ := g.st.OutboxRow(g.outboxID)
		if won != 1 || row.Status != store.OutboxSent || strings.Count(strings.Join(attemptSummary(row), " "), "lookup:") != 1 {
			t.Errorf("%d lookups settled the row (%s, %v); want exactly one", won, row.Status, attemptSummary(row))
		}
	})
}

func isState(err error) bool {
	var st *store.StateError
	return errors.As(err, &st)
}

// wantAudit checks that the last audit entry is who's action, its detail holding detail.
func wantAudit(t *testing.T, st *store.Store, who, action, detail string) {
	t.Helper()
	log, err := st.AuditLog(10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		if e.Who == who && e.Action == action && strings.Contains(e.Detail, detail) {
			return
		}
	}
	t.Errorf("no audit entry %s by %s with %q in %+v", action, who, detail, log)
}
