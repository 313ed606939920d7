package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// costingDrafter is the template drafter with a price: every call costs
// cost, and it counts the calls and the most that were in flight at once.
type costingDrafter struct {
	next             Drafter
	cost             float64
	calls            atomic.Int64
	mu               sync.Mutex
	inFlight, widest int
}

func (c *costingDrafter) Draft(ctx context.Context, in drafter.Input) (drafter.Output, error) {
	c.calls.Add(1)
	c.mu.Lock()
	c.inFlight++
	c.widest = max(c.widest, c.inFlight)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	out, err := c.next.Draft(ctx, in)
	out.Cost, out.Currency = c.cost, "EUR"
	return out, err
}

// TestDraftBudgetHoldsConcurrentCalls: eight workers draft forty messages
// of one client whose budget pays for five and a half calls. The budget
// check and the hold of the call's cost are one write transaction, and
// the hold is released in the commit that stores the cost, so the day's
// cost ends at most one call past the budget (the check before the call
// alone let all eight through at once), every call left a stored draft
// with its cost, and the messages past the budget wait for the next day
// with their attempts unspent.
func TestDraftBudgetHoldsConcurrentCalls(t *testing.T) {
	const (
		n     = 40
		cost  = 1.0
		limit = 5.5
	)
	st := openStore(t)
	tpl := newCountingTemplate(t)
	d := &costingDrafter{next: tpl.next, cost: cost}
	dj := newDraftJob(st, d)
	dj.Budget = func(string) (string, float64, []string) { return "acme", limit, []string{"web"} }
	dj.BudgetRecheck = time.Millisecond
	opt := testOptions()
	opt.Concurrency = map[string]int{review.KindDraft: 8}
	var ids []string
	for i := range n {
		ids = append(ids, recordDraftEvent(t, st, fmt.Sprintf("web:budget-%02d", i), time.Now()).Job.ID)
	}
	startRunner(t, st, map[string]jobs.Kind{review.KindDraft: dj}, opt)

	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	completed := 0
	testkit.Eventually(t, 10*time.Second, func() bool {
		completed = 0
		for _, id := range ids {
			j, err := st.Job(id)
			if err != nil {
				t.Fatalf("Job(%s): %v", id, err)
			}
			switch {
			case j.State == store.JobCompleted:
				completed++
			case j.State == store.JobRunning || j.RunAt.Before(midnight):
				return false
			}
		}
		return true
	}, "every job drafted or waiting for the next day")
	spent, err := spentSince(st, time.Now().UTC().Truncate(24*time.Hour), []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	calls := int(d.calls.Load())
	t.Logf("%d calls (at most %d at once), %d drafts completed, %.1f spent of %.1f", calls, d.widest, completed, spent, limit)
	if spent > limit+cost {
		t.Errorf("spent %.1f of a budget of %.1f: more than one call (%.1f) past it", spent, limit, cost)
	}
	if spent < limit {
		t.Errorf("spent %.1f of a budget of %.1f: drafting paused before the budget was spent", spent, limit)
	}
	if calls != completed || float64(calls)*cost != spent {
		t.Errorf("%d model calls, %d drafts completed, %.1f spent: every call must leave its draft and its cost", calls, completed, spent)
	}
	for _, id := range ids {
		j, err := st.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == store.JobCompleted {
			continue
		}
		if j.State != store.JobRetryable || j.Attempt != 0 {
			t.Errorf("job %s past the budget is %s with %d attempts counted, want retryable with none", id, j.State, j.Attempt)
		}
	}
	var holds []store.BudgetHold
	if err := st.View(func(tx *store.Tx) error {
		var err error
		holds, err = tx.BudgetHolds("acme", time.Now())
		return err
	}); err != nil || len(holds) != 0 {
		t.Errorf("budget holds left = %v, %v; want none once every call stored its cost", holds, err)
	}
}

// TestHoldBudgetConcurrentChecks: eight budget checks race for one
// client's budget, released at once. The check and the hold are one write
// transaction, so their answers are exactly those of the checks run one
// after the other: the first call of a day runs alone (nothing predicts
// its cost), and with one call's cost stored, the checks let through only
// the calls whose expected cost the budget still covers.
func TestHoldBudgetConcurrentChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored int // drafts of the day already stored, at 1.0 each
		limit  float64
		want   int // checks let through
	}{
		{"first call of the day runs alone", 0, 5.5, 1},
		// 1 spent: a call expected to cost 1.0 is let through while spent
		// + held + 1.0 stay within 5.5: four (1 + 3 + 1 = 5); a fifth
		// would reach 6.0.
		{"one cost stored", 1, 5.5, 4},
		{"budget spent", 6, 5.5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			dj := newDraftJob(st, newCountingTemplate(t))
			dj.Budget = func(string) (string, float64, []string) { return "acme", tc.limit, []string{"web"} }
			now := time.Now()
			for i := range tc.stored {
				key := fmt.Sprintf("web:paid-%02d", i)
				recordDraftEvent(t, st, key, now)
				j := claim(t, st, now)
				if _, err := dj.Review.Record(context.Background(), j, &store.Draft{EventKey: j.Key, Text: "Hi", Cost: 1, Currency: "EUR", CreatedAt: now}, 1, now, nil); err != nil {
					t.Fatalf("Record(%s): %v", key, err)
				}
			}
			const n = 8
			var claimed []store.Job
			for i := range n {
				recordDraftEvent(t, st, fmt.Sprintf("web:race-%02d", i), now)
				claimed = append(claimed, claim(t, st, now))
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			var held, spent, waiting atomic.Int64
			for _, j := range claimed {
				wg.Go(func() {
					<-start
					client, err := dj.holdBudget(context.Background(), j, "web")
					var snooze *jobs.Snooze
					var full *BudgetSpent
					var busy *BudgetHeld
					switch {
					case err == nil && client == "acme":
						held.Add(1)
					case errors.As(err, &snooze) && errors.As(err, &full):
						spent.Add(1)
					case errors.As(err, &snooze) && errors.As(err, &busy):
						waiting.Add(1)
					default:
						t.Errorf("holdBudget(%s) = %q, %v; want a hold or a snooze for the budget", j.Key, client, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if got := int(held.Load()); got != tc.want {
				t.Errorf("%d of %d concurrent checks held the budget, want %d (%d spent, %d waiting for calls in flight)", got, n, tc.want, spent.Load(), waiting.Load())
			}
			if float64(tc.stored) >= tc.limit && spent.Load() != n {
				t.Errorf("%d of %d checks saw the budget spent, want all", spent.Load(), n)
			}
			var holds []store.BudgetHold
			if err := st.View(func(tx *store.Tx) error {
				var err error
				holds, err = tx.BudgetHolds("acme", now)
				return err
			}); err != nil || len(holds) != tc.want {
				t.Errorf("stored holds = %d, %v; want %d", len(holds), err, tc.want)
			}
		})
	}
}

// spentSince is the cost of the drafts of channels created since t, as a
// budget reads it (store.Tx.Spend, the one source of what was spent).
func spentSince(st *store.Store, t time.Time, channels []string) (float64, error) {
	var sp store.Spend
	err := st.View(func(tx *store.Tx) error {
		var err error
		sp, err = tx.Spend(t, channels)
		return err
	})
	return sp.Total, err
}
