package delivery_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
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
	"github.com/handoff/handoff/testkit/standin"
	"github.com/handoff/handoff/workers"
)

// newFakeCRM is the fake http provider (testkit/standin) honouring
// Idempotency-Key, answering POST number n as script[n-1] says, the last
// entry repeating.
func newFakeCRM(t *testing.T, script ...standin.Mode) *standin.Server {
	t.Helper()
	crm := standin.New(t, "http", script...)
	crm.Dedupe = true
	return crm
}

// crmSeen is what the fake received: every send, the messages it holds
// (client_ref -> its id) and the refs looked up.
func crmSeen(crm *standin.Server) (posts []standin.Send, held map[string]string, lookups []string) {
	held = map[string]string{}
	for _, m := range crm.Accepted() {
		held[m.Ref] = m.ID
	}
	return crm.Sends(), held, crm.Lookups()
}

// deliveryRig is one event on a channel that auto-approves to the provider
// under test, with the real job kinds running it end to end.
type deliveryRig struct {
	st       *store.Store
	runner   *jobs.Runner
	kinds    map[string]jobs.Kind
	ev       store.Event
	outboxID string
}

// deliverConv is the conversation every rig's event belongs to; the '+'
// and ':' of real ids go through the whole path.
const deliverConv = "+15550001234"

// startDelivery records one event on a channel that auto-approves to prov
// and runs the real job kinds over it (built by Kinds from the config, with
// providers from provider.Open), as serve does. The store must have been
// opened by the caller with openStore, before any fake server.
func startDelivery(t *testing.T, st *store.Store, prov config.Provider, maxAttempts int) *deliveryRig {
	t.Helper()
	return startDeliveryTo(t, st, prov, maxAttempts, deliverConv)
}

// startDeliveryTo is startDelivery with the lead's contact (the reply's to).
func startDeliveryTo(t *testing.T, st *store.Store, prov config.Provider, maxAttempts int, contact string) *deliveryRig {
	t.Helper()
	return startDeliveryLogged(t, st, prov, maxAttempts, contact, nil)
}

// startDeliveryLogged is startDeliveryTo with the delivery job's log.
func startDeliveryLogged(t *testing.T, st *store.Store, prov config.Provider, maxAttempts int, contact string, log *slog.Logger) *deliveryRig {
	t.Helper()
	cfg := config.Default()
	cfg.Channels[0].AutoApprove = true
	cfg.Channels[0].Provider = prov.Name
	cfg.Providers = []config.Provider{prov}
	cfg.Retry.MaxAttempts = maxAttempts
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatalf("provider.Open: %v", err)
	}
	d, err := drafter.NewTemplate(cfg.Drafter.Template, cfg.Drafter.PromptVersion, 0)
	if err != nil {
		t.Fatalf("NewTemplate: %v", err)
	}
	kinds, _ := workers.Kinds(st, cfg, d, providers)
	kinds[delivery.Kind].(*delivery.Job).Log = log
	key := "demo:msg-1"
	rec, err := leads.RecordEvent(context.Background(), st, store.Event{
		ID: ulid.Make().String(), Key: key, Channel: "demo", MessageID: "msg-1", CorrelationID: ulid.Make().String(),
		ConversationID: deliverConv, Contact: contact, Name: "Ada", Text: "Hello, do you ship to Lisbon?",
		ReceivedAt: time.Now().UTC(),
	}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatalf("RecordEvent: %v", err)
	}
	r := startRunner(t, st, kinds, testOptions())
	return &deliveryRig{st: st, runner: r, kinds: kinds, ev: rec.Event, outboxID: store.OutboxID(deliverConv, store.DraftID(rec.Event.ID))}
}

// settle waits until the outbox row exists, is out of pending and
// effect_pending, and its delivery jobs have all finished; it returns the
// row and those jobs.
func (g *deliveryRig) settle(t *testing.T) (store.Outbox, []store.Job) {
	t.Helper()
	var (
		row  store.Outbox
		jobs []store.Job
	)
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		if row, err = g.st.OutboxRow(g.outboxID); err != nil {
			return false
		}
		if row.Status == store.OutboxPending || row.Status == store.OutboxEffectPending {
			return false
		}
		jobs = g.deliverJobs(t)
		for _, j := range jobs {
			if !j.State.Final() {
				return false
			}
		}
		return len(jobs) > 0
	}, "the reply to settle")
	return row, jobs
}

func (g *deliveryRig) deliverJobs(t *testing.T) []store.Job {
	t.Helper()
	var all []store.Job
	err := g.st.View(func(tx *store.Tx) (err error) { all, err = tx.JobsByCorrelation(g.ev.CorrelationID); return err })
	if err != nil {
		t.Fatalf("JobsByCorrelation: %v", err)
	}
	var out []store.Job
	for _, j := range all {
		if j.Kind == delivery.Kind {
			out = append(out, j)
		}
	}
	return out
}

// checkConsistent checks that the lead is replied exactly when the reply
// was sent.
func (g *deliveryRig) checkConsistent(t *testing.T) {
	t.Helper()
	row, err := g.st.OutboxRow(g.outboxID)
	if err != nil {
		t.Fatalf("OutboxRow: %v", err)
	}
	h, err := g.st.Handoff(store.LeadKey(g.ev.Channel, g.ev.ConversationID))
	if err != nil {
		t.Fatalf("Handoff: %v", err)
	}
	if sent, replied := row.Status == store.OutboxSent, h.Status == leads.Replied; sent != replied {
		t.Errorf("outbox row is %s but the lead is %s: replied iff sent", row.Status, h.Status)
	}
}

// finish stops the runner and checks the file. bbolt's page check is not
// safe beside a writer (the runner's claims keep writing), so it runs once
// the runner has stopped; stopping again at cleanup is harmless.
func (g *deliveryRig) finish(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.runner.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	g.checkConsistent(t)
	if err := g.st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// attemptSummary is each attempt as "action:outcome".
func attemptSummary(row store.Outbox) []string {
	var out []string
	for _, a := range row.Attempts {
		out = append(out, a.Action+":"+a.Outcome)
	}
	return out
}

// checkAttemptsMatchJobs checks that each recorded provider call names an
// execution of a delivery job, in order.
func checkAttemptsMatchJobs(t *testing.T, row store.Outbox, jobs []store.Job) {
	t.Helper()
	var execs []string
	for _, j := range jobs {
		for _, a := range j.Attempts {
			execs = append(execs, a.ExecutionID)
		}
	}
	for i, a := range row.Attempts {
		if !slices.Contains(execs, a.ExecutionID) {
			t.Errorf("outbox attempt %d (%s) names execution %q, which no delivery job ran (%v)", i, a.Action, a.ExecutionID, execs)
		}
	}
}

func TestDeliverHTTPAmbiguousOutcomes(t *testing.T) {
	tests := []struct {
		name        string
		idemKey     bool
		lookup      bool
		script      []standin.Mode
		maxAttempts int

		wantStatus   store.OutboxStatus
		wantPosts    int
		wantLookups  bool
		wantAttempts []string
	}{
		{
			name: "accepted then stalled, resent with the same key", idemKey: true,
			script: []standin.Mode{standin.Stall, standin.OK}, maxAttempts: 5,
			wantStatus: store.OutboxSent, wantPosts: 2,
			wantAttempts: []string{"send:ambiguous", "resend:sent"},
		},
		{
			name: "accepted then stalled, found by lookup", lookup: true,
			script: []standin.Mode{standin.Stall, standin.OK}, maxAttempts: 5,
			wantStatus: store.OutboxSent, wantPosts: 1, wantLookups: true,
			wantAttempts: []string{"send:ambiguous", "lookup:sent"},
		},
		{
			name:   "accepted then stalled, neither key nor lookup",
			script: []standin.Mode{standin.Stall, standin.OK}, maxAttempts: 5,
			wantStatus: store.OutboxNeedsReconciliation, wantPosts: 1,
			wantAttempts: []string{"send:ambiguous"},
		},
		{
			name: "400 is permanent", idemKey: true, lookup: true,
			script: []standin.Mode{standin.Status(400), standin.OK}, maxAttempts: 5,
			wantStatus: store.OutboxFailed, wantPosts: 1,
			wantAttempts: []string{"send:permanent"},
		},
		{
			name: "429 then 200, resent with the same key", idemKey: true,
			script: []standin.Mode{standin.Status(429), standin.OK}, maxAttempts: 5,
			wantStatus: store.OutboxSent, wantPosts: 2,
			wantAttempts: []string{"send:ambiguous", "resend:sent"},
		},
		{
			name: "500 on every call until the last attempt", idemKey: true,
			script: []standin.Mode{standin.Status(500)}, maxAttempts: 3,
			wantStatus: store.OutboxNeedsReconciliation, wantPosts: 3,
			wantAttempts: []string{"send:ambiguous", "resend:ambiguous", "resend:ambiguous"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			crm := newFakeCRM(t, tt.script...)
			prov := config.Provider{
				Name: "crm", Kind: "http", URL: crm.SendURL(),
				SupportsIdempotencyKey: tt.idemKey, Timeout: 100 * time.Millisecond,
			}
			if tt.lookup {
				prov.LookupURL = crm.LookupURL()
			}
			g := startDelivery(t, st, prov, tt.maxAttempts)
			row, jobs := g.settle(t)

			if row.Status != tt.wantStatus {
				t.Errorf("row is %s (note %q), want %s", row.Status, row.Note, tt.wantStatus)
			}
			if got := attemptSummary(row); !slices.Equal(got, tt.wantAttempts) {
				t.Errorf("attempts %v, want %v", got, tt.wantAttempts)
			}
			checkAttemptsMatchJobs(t, row, jobs)
			for _, j := range jobs {
				if j.State != store.JobCompleted {
					t.Errorf("delivery job %s ended %s (%s), want completed: the row records the outcome", j.ID, j.State, j.LastError)
				}
			}

			posts, held, lookups := crmSeen(crm)
			if len(posts) != tt.wantPosts {
				t.Errorf("the provider got %d POSTs, want %d", len(posts), tt.wantPosts)
			}
			for i, p := range posts {
				if p.Key != g.outboxID || p.Ref != g.outboxID || p.Correlation != g.ev.CorrelationID || p.To != deliverConv {
					t.Errorf("POST %d: key %q client_ref %q correlation %q to %q; want the outbox id %q, correlation %q, to %q",
						i+1, p.Key, p.Ref, p.Correlation, p.To, g.outboxID, g.ev.CorrelationID, deliverConv)
				}
			}
			if tt.wantLookups != (len(lookups) > 0) {
				t.Errorf("lookups %v, want some: %v", lookups, tt.wantLookups)
			}
			for _, ref := range lookups {
				if ref != g.outboxID {
					t.Errorf("looked up %q, want the outbox id %q", ref, g.outboxID)
				}
			}
			switch row.Status {
			case store.OutboxSent:
				if len(held) != 1 || held[g.outboxID] == "" || row.ProviderID != held[g.outboxID] {
					t.Errorf("provider holds %v and the row was sent as %q; want one message whose id the row records", held, row.ProviderID)
				}
			case store.OutboxFailed:
				if len(held) != 0 || row.Note == "" {
					t.Errorf("provider holds %v, row note %q; want nothing held and the refusal noted", held, row.Note)
				}
			case store.OutboxNeedsReconciliation:
				if row.ProviderID != "" || row.Note == "" {
					t.Errorf("row provider id %q note %q; want no id and a note for the person", row.ProviderID, row.Note)
				}
			}
			g.checkConsistent(t)

			if row.Status == store.OutboxSent {
				g.finish(t)
				return
			}
			// Running the delivery again must never send it again.
			var again store.Job
			err := st.Update(context.Background(), func(tx *store.Tx) (err error) {
				again, _, err = tx.Enqueue(store.NewJob{ID: ulid.Make().String(), Kind: delivery.Kind, Key: g.outboxID, MaxAttempts: 3}, g.ev.CorrelationID, time.Now())
				return err
			})
			if err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			g.runner.Wake()
			testkit.WaitJob(t, st, again.ID, store.JobCompleted)
			if posts2, _, _ := crmSeen(crm); len(posts2) != len(posts) {
				t.Errorf("running the job again sent %d more POSTs", len(posts2)-len(posts))
			}
			if after, _ := st.OutboxRow(g.outboxID); after.Status != row.Status || len(after.Attempts) != len(row.Attempts) {
				t.Errorf("running the job again moved the row from %s (%d attempts) to %s (%d attempts)", row.Status, len(row.Attempts), after.Status, len(after.Attempts))
			}
			g.finish(t)
		})
	}
}

func TestDeliverSandboxTimeoutAfterAccept(t *testing.T) {
	tests := []struct {
		name         string
		prov         config.Provider
		wantStatus   store.OutboxStatus
		wantRepeats  int
		wantAttempts []string
	}{
		{
			name:       "idempotency key: the resend is deduplicated",
			prov:       config.Provider{SupportsIdempotencyKey: true},
			wantStatus: store.OutboxSent, wantRepeats: 1,
			wantAttempts: []string{"send:ambiguous", "resend:sent"},
		},
		{
			name:       "lookup: found without a resend",
			prov:       config.Provider{},
			wantStatus: store.OutboxSent, wantRepeats: 0,
			wantAttempts: []string{"send:ambiguous", "lookup:sent"},
		},
		{
			name:       "no lookup, no key: parked for a person",
			prov:       config.Provider{NoLookup: true},
			wantStatus: store.OutboxNeedsReconciliation, wantRepeats: 0,
			wantAttempts: []string{"send:ambiguous"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			prov := tt.prov
			prov.Name, prov.Kind, prov.TimeoutAfterAccept, prov.Timeout = "flaky", "sandbox", true, 10*time.Second
			g := startDelivery(t, st, prov, 5)
			row, jobs := g.settle(t)
			if row.Status != tt.wantStatus {
				t.Errorf("row is %s (note %q), want %s", row.Status, row.Note, tt.wantStatus)
			}
			if got := attemptSummary(row); !slices.Equal(got, tt.wantAttempts) {
				t.Errorf("attempts %v, want %v", got, tt.wantAttempts)
			}
			checkAttemptsMatchJobs(t, row, jobs)

			msgs, err := st.SandboxMessages(100)
			if err != nil {
				t.Fatalf("SandboxMessages: %v", err)
			}
			if len(msgs) != 1 || msgs[0].Ref != g.outboxID || msgs[0].Provider != "flaky" {
				t.Fatalf("sandbox messages %+v, want one for %s from flaky", msgs, g.outboxID)
			}
			m := msgs[0]
			if m.Repeats != tt.wantRepeats {
				t.Errorf("sandbox message repeated %d times, want %d", m.Repeats, tt.wantRepeats)
			}
			if row.Status == store.OutboxSent && row.ProviderID != m.ID {
				t.Errorf("row sent as %q, want the sandbox's id %q", row.ProviderID, m.ID)
			}
			g.finish(t)
		})
	}
}

// TestDeliverSandboxPermanentFailure checks a refusal through the sandbox
// too: it is final, nothing is held, and the lead is not replied.
func TestDeliverSandboxPermanentFailure(t *testing.T) {
	st := openStore(t)
	g := startDelivery(t, st, config.Provider{Name: "refuses", Kind: "sandbox", Fail: "permanent", Timeout: 10 * time.Second}, 5)
	row, _ := g.settle(t)
	if row.Status != store.OutboxFailed || !strings.Contains(row.Note, "refuse") {
		t.Errorf("row is %s (note %q), want failed with the refusal", row.Status, row.Note)
	}
	if got := attemptSummary(row); !slices.Equal(got, []string{"send:permanent"}) {
		t.Errorf("attempts %v, want one permanent send", got)
	}
	if msgs, _ := st.SandboxMessages(100); len(msgs) != 0 {
		t.Errorf("sandbox holds %d messages after a refusal, want 0", len(msgs))
	}
	g.finish(t)
}

// TestDeliverLogsWhatAPersonMustSee: a reply that fails for good and one
// whose outcome is unknown each write one log line naming the row and the
// event's correlation id; the job completes, so the runner logs nothing.
func TestDeliverLogsWhatAPersonMustSee(t *testing.T) {
	tests := []struct {
		name, msg, level string
		prov             config.Provider
		want             store.OutboxStatus
	}{
		{"permanent", "reply failed for good; it is in the dead letters", "ERROR",
			config.Provider{Name: "refuses", Kind: "sandbox", Fail: "permanent", Timeout: 10 * time.Second}, store.OutboxFailed},
		{"unknown", "reply outcome unknown; a person must reconcile it", "WARN",
			config.Provider{Name: "flaky", Kind: "sandbox", TimeoutAfterAccept: true, NoLookup: true, Timeout: 10 * time.Second}, store.OutboxNeedsReconciliation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf testkit.Log
			st := openStore(t)
			g := startDeliveryLogged(t, st, tt.prov, 5, deliverConv, slog.New(slog.NewJSONHandler(&buf, nil)))
			row, _ := g.settle(t)
			g.finish(t)
			if row.Status != tt.want {
				t.Fatalf("row is %s (note %q), want %s", row.Status, row.Note, tt.want)
			}
			var lines []map[string]any
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				if m["msg"] == tt.msg {
					lines = append(lines, m)
				}
			}
			if len(lines) != 1 {
				t.Fatalf("%d lines %q, want 1; the log:\n%s", len(lines), tt.msg, buf.String())
			}
			l := lines[0]
			if l["level"] != tt.level || l["outbox_id"] != g.outboxID || l["correlation_id"] != g.ev.CorrelationID || l["reason"] != row.Note {
				t.Errorf("log line %v, want level %s, outbox_id %s, correlation_id %s and the row's note %q", l, tt.level, g.outboxID, g.ev.CorrelationID, row.Note)
			}
		})
	}
}

// TestDeliverLastAttemptCutByShutdown: a send on the job's last attempt that
// shutdown cuts short is not parked for a person: the row stays
// effect_pending, the job is handed back, and the next runner resolves it
// by lookup without a second POST.
func TestDeliverLastAttemptCutByShutdown(t *testing.T) {
	st := openStore(t)
	crm := newFakeCRM(t, standin.Stall)
	prov := config.Provider{
		Name: "crm", Kind: "http", URL: crm.SendURL(),
		LookupURL: crm.LookupURL(), Timeout: time.Minute,
	}
	g := startDelivery(t, st, prov, 1)
	testkit.Eventually(t, 10*time.Second, func() bool {
		posts, _, _ := crmSeen(crm)
		return len(posts) == 1
	}, "the provider to hold the send")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := g.runner.Stop(ctx); err == nil {
		t.Fatal("Stop returned nil, want the error saying running jobs were released")
	}
	row, err := st.OutboxRow(g.outboxID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != store.OutboxEffectPending {
		t.Fatalf("after shutdown the row is %s (note %q), want effect_pending: shutdown is not the last word", row.Status, row.Note)
	}
	jobs := g.deliverJobs(t)
	if len(jobs) != 1 || jobs[0].State.Final() {
		t.Fatalf("delivery jobs %+v, want one handed back, not final", jobs)
	}

	startRunner(t, st, g.kinds, testOptions())
	row, jobs = g.settle(t)
	if row.Status != store.OutboxSent || row.ProviderID != "msg-1" {
		t.Errorf("row is %s with provider id %q, want sent as msg-1 (found by lookup)", row.Status, row.ProviderID)
	}
	if got := attemptSummary(row); !slices.Equal(got, []string{"send:ambiguous", "lookup:sent"}) {
		t.Errorf("attempts %v, want the cut send then the lookup", got)
	}
	if posts, _, lookups := crmSeen(crm); len(posts) != 1 || len(lookups) == 0 {
		t.Errorf("provider got %d POSTs and %d lookups, want 1 POST and a lookup", len(posts), len(lookups))
	}
	if len(jobs) != 1 || jobs[0].State != store.JobCompleted {
		t.Errorf("delivery jobs %+v, want the one job completed", jobs)
	}
	g.checkConsistent(t)
}
