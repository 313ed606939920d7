package provider

import (
	"sync"
	"time"
)

// gate holds one provider to its rate (GCRA): Burst sends may go at once,
// then one every 1/Rate. A send that would go too soon is given a slot
// and told to come back then: the queue waits (the job's due time), no
// goroutine sleeps, and the row keeps its slot, so a held message is not
// overtaken forever by new ones. A provider's own "slow down" (a
// Retry-After on a refusal) pushes every later slot back.
type gate struct {
	interval time.Duration
	tol      time.Duration // (burst-1) × interval

	mu    sync.Mutex
	tat   time.Time            // theoretical arrival time of the next send
	slots map[string]time.Time // reference → the slot it was given
}

func newGate(rate float64, burst int) *gate {
	if rate <= 0 {
		return nil
	}
	burst = max(burst, 1)
	iv := time.Duration(float64(time.Second) / rate)
	return &gate{interval: iv, tol: time.Duration(burst-1) * iv, slots: map[string]time.Time{}}
}

// hold returns 0 when ref may be sent now (taking its place), or how long
// to wait for the slot it holds.
func (g *gate) hold(ref string, now time.Time) time.Duration {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if slot, ok := g.slots[ref]; ok {
		if !now.Before(slot) {
			delete(g.slots, ref)
			return 0
		}
		return slot.Sub(now)
	}
	if len(g.slots) > 10000 {
		// Slots whose job never came back (the row was reconciled away):
		// an hour past their time they cannot be waited for.
		for r, s := range g.slots {
			if now.Sub(s) > time.Hour {
				delete(g.slots, r)
			}
		}
	}
	slot := g.tat.Add(-g.tol)
	if slot.Before(now) {
		slot = now
	}
	base := g.tat
	if base.Before(now) {
		base = now
	}
	g.tat = base.Add(g.interval)
	if !slot.After(now) {
		return 0
	}
	g.slots[ref] = slot
	return slot.Sub(now)
}

// pause pushes every slot not yet given out to until or later.
func (g *gate) pause(until time.Time) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := until.Add(g.tol); t.After(g.tat) {
		g.tat = t
	}
}

// Holder is a provider held to a rate: Hold says how long the send of ref
// must wait (0: send now).
type Holder interface {
	Hold(ref string, now time.Time) time.Duration
}
