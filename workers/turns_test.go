package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// leadGate is a drafter that counts, per lead, the calls in flight at
// once (and the most ever seen), and holds every call until open is
// closed or its context ends.
type leadGate struct {
	open chan struct{}

	mu       sync.Mutex
	inFlight map[string]int
	most     map[string]int
	calls    map[string]int
}

func newLeadGate() *leadGate {
	return &leadGate{open: make(chan struct{}), inFlight: map[string]int{}, most: map[string]int{}, calls: map[string]int{}}
}

func (g *leadGate) Draft(ctx context.Context, in drafter.Input) (drafter.Output, error) {
	lead := in.ConversationID
	g.mu.Lock()
	g.inFlight[lead]++
	g.calls[lead]++
	g.most[lead] = max(g.most[lead], g.inFlight[lead])
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight[lead]--
		g.mu.Unlock()
	}()
	select {
	case <-g.open:
	case <-ctx.Done():
		return drafter.Output{}, ctx.Err()
	}
	n := max(len(in.Messages), 1)
	return drafter.Output{Text: fmt.Sprintf("a reply to %d messages", n), Drafter: "gate", PromptVersion: "v1"}, nil
}

// state reads what the gate saw of lead: calls in flight now, the most at
// once, and calls in all.
func (g *leadGate) state(lead string) (now, most, calls int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight[lead], g.most[lead], g.calls[lead]
}

// burstLeads records messages for leads from many goroutines at once
// (behind a barrier), each with its draft job due at once (coalesce 0s);
// keys collects the event keys per lead.
type burstLeads struct {
	t  *testing.T
	st *store.Store
	r  *jobs.Runner // woken after each message, as the webhook does

	mu   sync.Mutex
	keys map[string][]string
}

func (b *burstLeads) send(lead, id string) {
	key := "web:" + lead + "-" + id
	rec, err := leads.RecordEvent(context.Background(), b.st, store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "web", MessageID: lead + "-" + id, CorrelationID: ulid.Make().String(),
		ConversationID: lead, Contact: lead + "@example.com", Name: "Ada", Text: "part " + id, ReceivedAt: time.Now(),
	}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: 3})
	if err != nil || !rec.Created {
		b.t.Errorf("RecordEvent(%s): created %v, %v", key, rec.Created, err)
		return
	}
	b.mu.Lock()
	b.keys[lead] = append(b.keys[lead], key)
	b.mu.Unlock()
	b.r.Wake()
}

// wave sends n messages to each lead at once, from one goroutine each.
func (b *burstLeads) wave(leads []string, prefix string, n int) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, lead := range leads {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				b.send(lead, fmt.Sprintf("%s%02d", prefix, i))
			}()
		}
	}
	close(start)
	wg.Wait()
}

func (b *burstLeads) keysOf(lead string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.keys[lead]...)
}

// drafting reads, in one read transaction, the live draft jobs of each
// lead's events, and counts the running ones.
func (b *burstLeads) drafting(leads []string) (map[string][]store.Job, map[string]int) {
	b.t.Helper()
	live, running := map[string][]store.Job{}, map[string]int{}
	keys := map[string][]string{}
	for _, lead := range leads {
		keys[lead] = b.keysOf(lead)
	}
	err := b.st.View(func(tx *store.Tx) error {
		clear(live)
		clear(running)
		for _, lead := range leads {
			for _, k := range keys[lead] {
				j, err := tx.LiveJob(review.KindDraft, k)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				live[lead] = append(live[lead], j)
				if j.State == store.JobRunning {
					running[lead]++
				}
			}
		}
		return nil
	})
	if err != nil {
		// Errorf, not Fatalf: the watcher calls this from its own goroutine.
		b.t.Errorf("read the draft jobs: %v", err)
	}
	return live, running
}

// TestOneDraftJobPerLead: two leads each write 40 messages at once while
// their first draft is being written (the model call held), then 20 more
// while the follow-up is drafted, with a draft pool of 16 and no quiet
// period. At no observation does a lead have two draft jobs running, nor
// the model two calls for one lead; the burst during the first call is
// one draft job held back behind it; and every lead's last turn gets one
// pending draft answering each of its messages once.
func TestOneDraftJobPerLead(t *testing.T) {
	st := openStore(t)
	gate := newLeadGate()
	opt := testOptions()
	opt.Concurrency = map[string]int{review.KindDraft: 16}
	r := startRunner(t, st, map[string]jobs.Kind{review.KindDraft: newDraftJob(st, gate)}, opt)
	b := &burstLeads{t: t, st: st, r: r, keys: map[string][]string{}}
	leads := []string{"lead-a", "lead-b"}

	// Watch from the first message to the last draft, in read transactions
	// of their own, as fast as they come.
	done := make(chan struct{})
	watched := make(chan struct{})
	var mostRunning map[string]int
	observations := 0
	go func() {
		defer close(watched)
		mostRunning = map[string]int{}
		for {
			select {
			case <-done:
				return
			default:
			}
			_, running := b.drafting(leads)
			observations++
			for lead, n := range running {
				mostRunning[lead] = max(mostRunning[lead], n)
			}
		}
	}()

	for _, lead := range leads {
		b.send(lead, "first")
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		a, _, _ := gate.state("lead-a")
		c, _, _ := gate.state("lead-b")
		return a == 1 && c == 1
	}, "each lead's first draft call")
	b.wave(leads, "w1-", 40)

	// The first job of each lead is still running, its model call held:
	// the 40 messages are one more draft job, held back behind it.
	live, running := b.drafting(leads)
	for _, lead := range leads {
		var held []store.Job
		for _, j := range live[lead] {
			if j.Waits != nil {
				held = append(held, j)
			}
		}
		if running[lead] != 1 || len(live[lead]) != 2 || len(held) != 1 {
			t.Errorf("%s during its first draft: %d live draft jobs, %d running, %d held back; want 2, 1 running, 1 held", lead, len(live[lead]), running[lead], len(held))
			continue
		}
		h, err := st.Handoff(store.LeadKey("web", lead))
		if err != nil || h.TurnDraft != held[0].Key || len(h.TurnEvents) != 41 {
			t.Errorf("%s: turn draft %q of %d messages, %v; want the held job's %q, of 41", lead, h.TurnDraft, len(h.TurnEvents), err, held[0].Key)
		}
	}

	close(gate.open)
	b.wave(leads, "w2-", 20)

	for _, lead := range leads {
		testkit.Eventually(t, 10*time.Second, func() bool {
			h, err := st.Handoff(store.LeadKey("web", lead))
			if err != nil || len(h.TurnEvents) != 61 {
				return false
			}
			d, err := st.DraftByEvent(h.TurnDraft)
			return err == nil && d.Status == store.DraftPending
		}, lead+"'s last turn drafted")
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		live, _ := b.drafting(leads)
		return len(live) == 0
	}, "no draft job left")
	close(done)
	<-watched

	for _, lead := range leads {
		if mostRunning[lead] != 1 {
			t.Errorf("%s had up to %d draft jobs running at once in %d observations; want 1", lead, mostRunning[lead], observations)
		}
		_, most, calls := gate.state(lead)
		if most != 1 {
			t.Errorf("%s had up to %d model calls in flight at once (%d in all); want 1", lead, most, calls)
		}
		h, err := st.Handoff(store.LeadKey("web", lead))
		if err != nil {
			t.Fatal(err)
		}
		d, err := st.DraftByEvent(h.TurnDraft)
		if err != nil {
			t.Fatal(err)
		}
		want := b.keysOf(lead)
		seen := map[string]bool{}
		for _, k := range d.Answers {
			seen[k] = true
		}
		if len(d.Answers) != len(want) || len(seen) != len(want) {
			t.Errorf("%s: the last draft answers %d events (%d distinct); want each of its %d once", lead, len(d.Answers), len(seen), len(want))
		}
		for _, k := range want {
			if !seen[k] {
				t.Errorf("%s: the last draft does not answer %s", lead, k)
			}
		}
	}
	counts, err := st.DraftCountsFor(store.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.DraftPending] != len(leads) {
		t.Errorf("%d drafts pending; want one per lead (%d): %v", counts[store.DraftPending], len(leads), counts)
	}
}
