package delivery_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/workers"
)

// slowProvider is a provider in the test's clock: each send answers as its
// script says ("ambiguous" after accepting, "lost" without accepting but
// as ambiguously, "not_sent", "ok"), and a message it accepted only shows
// in lookups storeAfter later, as with a provider that answers before it
// has stored (or one still working when our timeout ran out).
type slowProvider struct {
	clock      *testkit.Clock
	caps       provider.Capabilities
	storeAfter time.Duration

	mu       sync.Mutex
	script   []string
	sends    int
	accepted map[string]time.Time // ref -> when it becomes visible
	lookups  int
}

func (p *slowProvider) Send(_ context.Context, m provider.Message) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sends++
	answer := p.script[min(p.sends, len(p.script))-1]
	switch answer {
	case "not_sent":
		return "", &provider.NotSent{Err: errors.New("connection refused")}
	case "lost":
		return "", &provider.Ambiguous{Err: errors.New("no answer")}
	}
	if _, ok := p.accepted[m.Ref]; !ok {
		p.accepted[m.Ref] = p.clock.Now().Add(p.storeAfter)
	}
	if answer == "ambiguous" {
		return "", &provider.Ambiguous{Err: errors.New("timeout awaiting the answer")}
	}
	return "slow-1", nil
}

func (p *slowProvider) Lookup(_ context.Context, ref, _ string) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups++
	at, ok := p.accepted[ref]
	if !ok || p.clock.Now().Before(at) {
		return "", false, nil
	}
	return "slow-1", true, nil
}

func (p *slowProvider) Capabilities() provider.Capabilities { return p.caps }

func (p *slowProvider) counts() (sends, lookups int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sends, p.lookups
}

// slowRig is one auto-approved event delivered through a slowProvider,
// with the runner and the delivery job on the same fake clock, so the
// test decides when retries and the settle window come due.
type slowRig struct {
	st       *store.Store
	clock    *testkit.Clock
	runner   *jobs.Runner
	outboxID string
	corr     string
}

func startSlow(t *testing.T, p *slowProvider, maxAttempts int) *slowRig {
	t.Helper()
	st := openStore(t)
	cfg := config.Default()
	cfg.Channels[0].AutoApprove = true
	cfg.Channels[0].Provider = "slow"
	cfg.Retry.MaxAttempts = maxAttempts
	d, err := drafter.NewTemplate(cfg.Drafter.Template, cfg.Drafter.PromptVersion, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds, _ := workers.Kinds(st, cfg, d, map[string]provider.Provider{"slow": p})
	kinds[delivery.Kind].(*delivery.Job).Now = p.clock.Now
	ev := store.Event{
		ID: ulid.Make().String(), Key: "demo:slow-1", Channel: "demo", MessageID: "slow-1", CorrelationID: ulid.Make().String(),
		ConversationID: deliverConv, Contact: deliverConv, Name: "Ada", Text: "Is Friday free?", ReceivedAt: p.clock.Now(),
	}
	if _, err := leads.RecordEvent(context.Background(), st, ev, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: ev.Key, MaxAttempts: maxAttempts}); err != nil {
		t.Fatal(err)
	}
	opt := testOptions()
	opt.Now = p.clock.Now
	r := startRunner(t, st, kinds, opt)
	return &slowRig{st: st, clock: p.clock, runner: r, outboxID: store.OutboxID(deliverConv, store.DraftID(ev.ID)), corr: ev.CorrelationID}
}

// waitAttempts waits until the row has n attempts and its delivery job is
// not running, and returns the row and that job.
func (g *slowRig) waitAttempts(t *testing.T, n int) (store.Outbox, store.Job) {
	t.Helper()
	var row store.Outbox
	var job store.Job
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		if row, err = g.st.OutboxRow(g.outboxID); err != nil || len(row.Attempts) < n {
			return false
		}
		var all []store.Job
		err = g.st.View(func(tx *store.Tx) (err error) { all, err = tx.JobsByCorrelation(g.corr); return err })
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range all {
			if j.Kind == delivery.Kind {
				job = j
			}
		}
		return job.State != store.JobRunning && job.State != ""
	}, "the row's attempts")
	if len(row.Attempts) != n {
		t.Fatalf("row has attempts %v, want %d", attemptSummary(row), n)
	}
	return row, job
}

// TestDeliverLookupWaitsForSettle is the slow provider of issue 11: it
// stores what it accepted 5s after the request, our timeout is 2s. A
// lookup 1ms after the unknown outcome finds nothing, and that must not
// count: the job waits until lookup_settle after the send, looks again,
// and finds the message. Counting the early "not found" would send twice.
func TestDeliverLookupWaitsForSettle(t *testing.T) {
	clock := testkit.NewClock(time.Now().UTC().Add(time.Minute)) // ahead of every wall-clock due time
	p := &slowProvider{
		clock: clock, storeAfter: 5 * time.Second, script: []string{"ambiguous"}, accepted: map[string]time.Time{},
		caps: provider.Capabilities{Lookup: true, Timeout: 2 * time.Second, LookupSettle: 10 * time.Second},
	}
	g := startSlow(t, p, 5)
	row, _ := g.waitAttempts(t, 1)
	sentAt := row.Attempts[0].At

	clock.Advance(time.Millisecond) // the first retry comes due
	g.runner.Wake()
	row, job := g.waitAttempts(t, 2)
	if got := attemptSummary(row); !slices.Equal(got, []string{"send:ambiguous", "lookup:not_found_yet"}) {
		t.Fatalf("attempts %v, want the early lookup recorded as not_found_yet", got)
	}
	if row.Status != store.OutboxEffectPending {
		t.Fatalf("row is %s after an early not-found, want effect_pending", row.Status)
	}
	if want := sentAt.Add(10 * time.Second); !job.RunAt.Equal(want) {
		t.Errorf("the job asks again at %s, want lookup_settle after the send: %s", job.RunAt, want)
	}

	clock.Advance(10 * time.Second)
	g.runner.Wake()
	row, _ = g.waitAttempts(t, 3)
	if row.Status != store.OutboxSent || row.ProviderID != "slow-1" {
		t.Errorf("row is %s as %q, want sent as slow-1 (found by the late lookup)", row.Status, row.ProviderID)
	}
	if sends, lookups := p.counts(); sends != 1 || lookups != 2 {
		t.Errorf("the provider got %d sends and %d lookups, want 1 send and 2 lookups", sends, lookups)
	}
}

// TestDeliverSettledNotFoundSends checks the other side: once the window
// has passed, "not found" is proof, recorded, and the reply is sent again.
func TestDeliverSettledNotFoundSends(t *testing.T) {
	clock := testkit.NewClock(time.Now().UTC().Add(time.Minute)) // ahead of every wall-clock due time
	p := &slowProvider{
		clock: clock, script: []string{"lost", "ok"}, accepted: map[string]time.Time{},
		caps: provider.Capabilities{Lookup: true, Timeout: 2 * time.Second, LookupSettle: 10 * time.Second},
	}
	g := startSlow(t, p, 5)
	g.waitAttempts(t, 1)
	clock.Advance(11 * time.Second)
	g.runner.Wake()
	row, _ := g.waitAttempts(t, 3)
	if got := attemptSummary(row); !slices.Equal(got, []string{"send:ambiguous", "lookup:not_found", "send:sent"}) {
		t.Errorf("attempts %v, want the settled lookup recorded before the second send", got)
	}
	if row.Status != store.OutboxSent {
		t.Errorf("row is %s, want sent", row.Status)
	}
}

// TestDeliverNotSent: a send that provably never left puts the row back to
// pending, and the retry is a plain send, not a lookup or a reconciliation;
// on the last attempt the row fails, safe to replay.
func TestDeliverNotSent(t *testing.T) {
	t.Run("then sent", func(t *testing.T) {
		clock := testkit.NewClock(time.Now().UTC().Add(time.Minute)) // ahead of every wall-clock due time
		p := &slowProvider{clock: clock, script: []string{"not_sent", "ok"}, accepted: map[string]time.Time{}}
		g := startSlow(t, p, 3)
		row, _ := g.waitAttempts(t, 1)
		if row.Status != store.OutboxPending {
			t.Fatalf("row is %s after a send that never left, want pending", row.Status)
		}
		clock.Advance(time.Second)
		g.runner.Wake()
		row, _ = g.waitAttempts(t, 2)
		if got := attemptSummary(row); !slices.Equal(got, []string{"send:not_sent", "send:sent"}) || row.Status != store.OutboxSent {
			t.Errorf("row %s with attempts %v, want sent after send:not_sent", row.Status, got)
		}
	})
	t.Run("every attempt", func(t *testing.T) {
		clock := testkit.NewClock(time.Now().UTC().Add(time.Minute)) // ahead of every wall-clock due time
		p := &slowProvider{clock: clock, script: []string{"not_sent"}, accepted: map[string]time.Time{}}
		g := startSlow(t, p, 2)
		g.waitAttempts(t, 1)
		clock.Advance(time.Second)
		g.runner.Wake()
		row, job := g.waitAttempts(t, 2)
		if row.Status != store.OutboxFailed || row.Note == "" {
			t.Errorf("row is %s (note %q), want failed with a note", row.Status, row.Note)
		}
		if job.State != store.JobCompleted {
			t.Errorf("delivery job ended %s, want completed: the row holds the outcome", job.State)
		}
		dl, err := delivery.NewForTest(g.st, 3, nil).DeadLetter(g.outboxID)
		if err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
		if !dl.Safe || !strings.Contains(dl.Why, "could not be reached") {
			t.Errorf("dead letter safe=%v (%q), want safe to replay: nothing left", dl.Safe, dl.Why)
		}
	})
}

func TestSettledAt(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	caps := provider.Capabilities{Lookup: true, Timeout: 2 * time.Second, LookupSettle: time.Minute}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name     string
		attempts []store.OutboxAttempt
		prev     delivery.Claim
		want     time.Time
	}{
		{
			name:     "an unknown send: settle after its end",
			attempts: []store.OutboxAttempt{{ExecutionID: "e1", Action: "send", Outcome: "ambiguous", At: at(2 * time.Second)}},
			prev:     delivery.Claim{Status: store.OutboxEffectPending, ExecutionID: "e1", At: t0},
			want:     at(2*time.Second + time.Minute),
		},
		{
			name: "lookups never move it",
			attempts: []store.OutboxAttempt{
				{ExecutionID: "e1", Action: "send", Outcome: "ambiguous", At: at(2 * time.Second)},
				{ExecutionID: "e2", Action: "lookup", Outcome: "not_found_yet", At: at(30 * time.Second)},
			},
			prev: delivery.Claim{Status: store.OutboxEffectPending, ExecutionID: "e2", At: at(29 * time.Second)},
			want: at(2*time.Second + time.Minute),
		},
		{
			name: "a process that died holding the row: its claim plus the timeout",
			prev: delivery.Claim{Status: store.OutboxEffectPending, ExecutionID: "e1", At: t0},
			want: at(2*time.Second + time.Minute),
		},
		{
			name: "a death after an earlier send counts from the later claim",
			attempts: []store.OutboxAttempt{
				{ExecutionID: "e1", Action: "resend", Outcome: "ambiguous", At: at(2 * time.Second)},
			},
			prev: delivery.Claim{Status: store.OutboxEffectPending, ExecutionID: "e2", At: at(10 * time.Second)},
			want: at(12*time.Second + time.Minute),
		},
		{
			name: "a send that never left is no send",
			attempts: []store.OutboxAttempt{
				{ExecutionID: "e1", Action: "send", Outcome: "ambiguous", At: at(2 * time.Second)},
				{ExecutionID: "e2", Action: "send", Outcome: "not_sent", At: at(20 * time.Second)},
			},
			prev: delivery.Claim{Status: store.OutboxEffectPending, ExecutionID: "e2", At: at(19 * time.Second)},
			want: at(2*time.Second + time.Minute),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := delivery.SettledAt(store.Outbox{Attempts: tt.attempts}, tt.prev, caps)
			if !got.Equal(tt.want) {
				t.Errorf("settledAt = %s, want %s", got, tt.want)
			}
		})
	}
}
