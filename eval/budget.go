package eval

import (
	"context"
	"sync"
)

// budget is the run's cost cap, kept by the daily budget's rule
// (workers.DraftJob.holdBudget): a call is let through while what the
// finished calls cost, the holds of the calls in flight and this call's
// expected cost (the costliest call so far) stay within the limit, or
// while no other call is in flight and the spend is below it. So the cap
// is overshot by at most one call, and the first call, whose cost nothing
// predicts yet, runs alone. The cost of a call is the drafter's:
// drafter.price × the tokens the server reported.
type budget struct {
	mu      sync.Mutex
	cond    *sync.Cond
	limit   float64 // 0: no cap
	spent   float64 // the finished calls' cost
	largest float64 // the costliest finished call's
	calls   int     // finished calls
	held    float64 // the holds of the calls in flight
	flying  int     // calls in flight
}

func newBudget(limit float64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take waits until one more call may go and holds its expected cost
// (returned, for done); errBudget when the budget is spent, ctx's error
// when it ends first.
func (b *budget) take(ctx context.Context) (float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		switch {
		case b.limit <= 0:
			b.flying++
			return 0, nil
		case b.spent >= b.limit:
			return 0, errBudget
		case b.flying == 0 || b.calls > 0 && b.spent+b.held+b.largest <= b.limit:
			b.flying++
			b.held += b.largest
			return b.largest, nil
		}
		b.cond.Wait() // for a call in flight to store its cost, or ctx to end (wake)
	}
}

// done ends a call that held reserve and cost cost.
func (b *budget) done(reserve, cost float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flying--
	b.held -= reserve
	b.spent += cost
	b.largest = max(b.largest, cost)
	b.calls++
	b.cond.Broadcast()
}

// wake ends every wait once the run's context has ended: each waiter
// wakes, finds ctx's error and returns it. It takes the lock so that no
// waiter is between its check of ctx and its Wait.
func (b *budget) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cond.Broadcast()
}
