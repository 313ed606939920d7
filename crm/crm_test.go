package crm_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// bed is one store with a client whose CRM is m, crm's hooks on the leads'
// moves and on the writes recorded sent (as app sets them), and the
// delivery job over the CRM's sink.
type bed struct {
	t       *testing.T
	st      *store.Store
	cfg     *config.Config
	senders map[string]delivery.Sender
	runner  *jobs.Runner // nil until run
	// gate, when set, is the delivery job's Gate (crm[].required).
	gate func(store.Outbox, time.Time) (time.Duration, string)
	logs *testkit.Log // the sinks' log
}

func newBed(t *testing.T, m config.CRM) *bed {
	t.Helper()
	st := testkit.OpenStore(t, "") // its Check runs last
	m.Client = config.DefaultClient.ID
	if m.Timeout == 0 {
		m.Timeout = 2 * time.Second
	}
	cfg := &config.Config{
		BaseURL:  "https://handoff.example.com",
		Channels: []config.Channel{{Name: "web", Provider: "sandbox"}},
		Retry:    config.Retry{MaxAttempts: 20},
		CRM:      []config.CRM{m},
	}
	logs := &testkit.Log{}
	senders, err := crm.Open(cfg, st, crm.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	senders["sandbox"] = sandbox{} // the web channel's replies, when the runner sends them
	st.HookLeadMoves(crm.Hook(cfg))
	st.HookOutboxMoves(crm.Written()) // a write on the record moves its lead: matched, owned
	return &bed{t: t, st: st, cfg: cfg, senders: senders, logs: logs}
}

// run starts the delivery job's runner (stopped at the end of the test).
func (b *bed) run(workers int) {
	b.t.Helper()
	r := jobs.NewRunner(b.st, map[string]jobs.Kind{delivery.Kind: &delivery.Job{Store: b.st, Providers: b.senders, Gate: b.gate}}, jobs.Options{
		Workers: workers,
		Backoff: jobs.Backoff{Base: time.Millisecond, Max: 20 * time.Millisecond},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Jitter:  func() float64 { return 0 },
	})
	if err := r.Start(context.Background()); err != nil {
		b.t.Fatal(err)
	}
	b.runner = r
	b.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			b.t.Errorf("Stop: %v", err)
		}
	})
}

// receive records a message of lead web:<conv> (its move: received).
func (b *bed) receive(msgID, conv, contact, name string) store.Event {
	b.t.Helper()
	return b.receiveText(msgID, conv, contact, name, "Hi, I'd like a quote & a call <today>")
}

// receiveText is receive with the message's text.
func (b *bed) receiveText(msgID, conv, contact, name, text string) store.Event {
	b.t.Helper()
	rec, err := intake.Record(context.Background(), b.st, intake.Message{
		Channel: "web", MessageID: msgID, ConversationID: conv, Contact: contact, Name: name, Text: text, ReceivedAt: time.Now(),
	}, 3)
	if err != nil || !rec.Created {
		b.t.Fatalf("intake.Record(%s) = created %v, %v", msgID, rec.Created, err)
	}
	b.wake()
	return rec.Event
}

// draft stores a draft for ev routed to owner and returns it: the lead
// keeps the contact and owner, still received until its record's write is
// on the CRM (then matched, then owned, in that write's transaction); one
// already matched moves to owned at once.
func (b *bed) draft(ev store.Event, owner string) store.Draft {
	b.t.Helper()
	d, created, err := review.New(b.st, b.cfg).Save(context.Background(), store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Text: "reply to " + ev.Key, Drafter: "template", PromptVersion: "v1", Owner: owner, RuleVersion: "r1", Rule: "default",
		ExecutionID: ulid.Make().String(), CreatedAt: time.Now(),
	}, 1)
	if err != nil || !created {
		b.t.Fatalf("Save(%s) = created %v, %v", ev.Key, created, err)
	}
	b.wake()
	return d
}

// reply approves d and records its reply as sent (the lead: replied):
// by the runner when it runs (its delivery job is due at the approval's
// commit, so a send of the bed's own beside it would race it for the row),
// else by the bed, as a delivery job would.
func (b *bed) reply(d store.Draft) {
	b.t.Helper()
	ctx, now := context.Background(), time.Now()
	ap, err := review.New(b.st, b.cfg).Approve(ctx, d.ID, store.Decision{By: "tester", At: now})
	if err != nil {
		b.t.Fatalf("Approve(%s): %v", d.ID, err)
	}
	if b.runner != nil {
		testkit.Eventually(b.t, 30*time.Second, func() bool {
			o, err := b.st.OutboxRow(ap.Outbox.ID)
			return err == nil && o.Status == store.OutboxSent
		}, "the reply to be sent")
		return
	}
	ob, exec := delivery.New(b.st, b.cfg), ulid.Make().String()
	if _, _, err := ob.Claim(ctx, ap.Outbox.ID, exec, now); err != nil {
		b.t.Fatal(err)
	}
	if _, err := ob.Finish(ctx, ap.Outbox.ID, exec, now, delivery.Result{Status: store.OutboxSent, ProviderID: "sandbox-1"}); err != nil {
		b.t.Fatal(err)
	}
	b.wake()
}

// sandbox is the web channel's provider in the bed: every reply sent.
type sandbox struct{}

func (sandbox) Send(context.Context, provider.Message) (string, error) { return "sandbox-1", nil }
func (sandbox) Lookup(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}
func (sandbox) Capabilities() provider.Capabilities { return provider.Capabilities{} }

// wake wakes the runner, as web does after a commit that queues work.
func (b *bed) wake() {
	if b.runner != nil {
		b.runner.Wake()
	}
}

// rows are the CRM rows of lead web:<conv>, by id.
//
// One read: a write recorded as sent moves its lead in the same
// transaction (matched once the CRM holds the record), which makes the
// next move's row; reading the lead and then each row apart could see the
// lead before that move and its row after it, and call the lead settled
// while the new row is still pending.
func (b *bed) rows(conv string) map[string]store.Outbox {
	b.t.Helper()
	out := map[string]store.Outbox{}
	err := b.st.View(func(tx *store.Tx) error {
		h, err := tx.Handoff(store.LeadKey("web", conv))
		if err != nil {
			return err
		}
		for _, id := range crm.RowIDs(h) {
			if o, err := tx.Outbox(id); err == nil {
				out[id] = o
			}
		}
		return nil
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return out
}

// settled waits until every CRM row of each lead is out of pending and
// effect_pending, and fails unless each is sent.
func (b *bed) settled(convs ...string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	testkit.Eventually(b.t, 31*time.Second, func() bool {
		for _, c := range convs {
			for id, o := range b.rows(c) {
				if o.Status == store.OutboxPending || o.Status == store.OutboxEffectPending {
					if time.Now().After(deadline) {
						b.t.Errorf("row %s still %s: %s", id, o.Status, actions(o))
						return true
					}
					return false
				}
			}
		}
		return true
	}, "every CRM write to settle")
	for _, c := range convs {
		for id, o := range b.rows(c) {
			if o.Status != store.OutboxSent {
				b.t.Errorf("row %s ended %s (%s), want sent", id, o.Status, o.Note)
			}
		}
	}
}

func statuses(rows map[string]store.Outbox) []string {
	var out []string
	for id := range rows {
		_, _, s, _ := crm.ParseRowID(id)
		out = append(out, string(s))
	}
	slices.Sort(out)
	return out
}

func actions(o store.Outbox) string {
	var a []string
	for _, at := range o.Attempts {
		a = append(a, at.Action+":"+at.Outcome)
	}
	return strings.Join(a, " ")
}
