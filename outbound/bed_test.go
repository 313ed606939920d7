package outbound_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/outbound"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/webhook"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver is a subscriber: it verifies each request's Standard Webhooks
// signature with the verifier handoff's inbound hooks use (checked against
// the standard's own vectors and the standardwebhooks and svix packages'
// signatures, webhook_test.go and testdata/vectors.json), decodes the body
// strictly, and acts once per webhook-id, as the standard asks of a
// receiver. Told to, it fails the next requests of an event type: "500",
// "400", "drop" (reads the request, then cuts the connection: the sender
// cannot know) or "hang" (answers nothing until released).
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	v       *webhook.Verifier
	release chan struct{}
	mu      sync.Mutex
	plan    map[string][]string          // event type → what to do to its next requests
	got     map[string]int               // webhook-id → requests
	acted   map[string]outbound.Event    // webhook-id → the event, acted on once
	bodies  map[string]map[string]string // webhook-id → signature → body: a resend's body is the same bytes
	order   []string                     // webhook-ids in the order they were acted on
}

func newReceiver(t *testing.T) *receiver {
	v, err := webhook.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, v: v, release: make(chan struct{}), plan: map[string][]string{}, got: map[string]int{},
		acted: map[string]outbound.Event{}, bodies: map[string]map[string]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	t.Cleanup(rc.releaseAll) // before Close: a hung handler returns
	return rc
}

func (rc *receiver) releaseAll() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	select {
	case <-rc.release:
	default:
		close(rc.release)
	}
}

func (rc *receiver) add(typ string, what ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.plan[typ] = append(rc.plan[typ], what...)
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	t := rc.t
	body, _ := io.ReadAll(r.Body)
	if err := rc.v.Verify(r.Header, body, time.Now()); err != nil {
		t.Errorf("webhook signature: %v", err)
		w.WriteHeader(401)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("got %s with Content-Type %q, want a JSON POST", r.Method, r.Header.Get("Content-Type"))
	}
	var ev outbound.Event
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil || dec.More() {
		t.Errorf("body %s is not an event: %v", body, err)
		w.WriteHeader(400)
		return
	}
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	rc.got[id]++
	if rc.bodies[id] == nil {
		rc.bodies[id] = map[string]string{}
	}
	rc.bodies[id][r.Header.Get("webhook-timestamp")] = string(body)
	var what string
	if q := rc.plan[ev.Type]; len(q) > 0 {
		what, rc.plan[ev.Type] = q[0], q[1:]
	}
	rc.mu.Unlock()
	switch what {
	case "500":
		w.WriteHeader(500)
		return
	case "400":
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"unknown field"}`)
		return
	case "drop":
		rc.act(id, ev) // it acted, and the answer is lost
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
		return
	case "hang":
		select {
		case <-rc.release:
		case <-r.Context().Done():
			return
		}
	}
	rc.act(id, ev)
	w.WriteHeader(204)
}

// act acts on the event once per webhook-id.
func (rc *receiver) act(id string, ev outbound.Event) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, dup := rc.acted[id]; !dup {
		rc.acted[id] = ev
		rc.order = append(rc.order, id)
	}
}

// events are the events acted on, by webhook-id.
func (rc *receiver) events() map[string]outbound.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]outbound.Event, len(rc.acted))
	for k, v := range rc.acted {
		out[k] = v
	}
	return out
}

func (rc *receiver) requests(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[id]
}

// bed is one store with the outbound hooks of cfg's subscribers, the
// sandbox provider for replies, and the delivery job in its two pools.
type bed struct {
	t       *testing.T
	st      *store.Store
	cfg     *config.Config
	senders map[string]delivery.Sender
	runner  *jobs.Runner
}

func newBed(t *testing.T, subs ...config.Subscriber) *bed {
	t.Helper()
	st := testkit.OpenStore(t, "") // its Check runs last
	for i := range subs {
		if subs[i].Timeout == 0 {
			subs[i].Timeout = 2 * time.Second
		}
		subs[i].Secret = secret
	}
	cfg := &config.Config{
		BaseURL:  "https://handoff.example.com",
		Channels: []config.Channel{{Name: "web", Provider: "sandbox"}, {Name: "gone", Provider: "unconfigured"}},
		Retry:    config.Retry{MaxAttempts: 20},
		Events:   subs,
	}
	ps, err := provider.Open(nil, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatal(err)
	}
	senders := map[string]delivery.Sender{}
	for name, p := range ps {
		senders[name] = p
	}
	for name, s := range outbound.Open(cfg) {
		senders[name] = s
	}
	ev := outbound.New(cfg)
	st.HookLeadMoves(ev.LeadMoved)
	st.HookOutboxMoves(ev.OutboxMoved)
	st.HookJobDiscards(ev.JobDiscarded)
	return &bed{t: t, st: st, cfg: cfg, senders: senders}
}

// run starts the runner with workers per pool: the delivery job under its
// two kinds, as workers.Kinds registers it. The bed drafts by hand (draft),
// so the runner has no draft kind: each message's draft job is discarded
// ("no job kind"), a dead letter of a job like any other, whose
// dead_letter.added the tests count.
func (b *bed) run(workers int) {
	b.t.Helper()
	job := &delivery.Job{Store: b.st, Providers: b.senders}
	r := jobs.NewRunner(b.st, map[string]jobs.Kind{delivery.Kind: job, delivery.KindEvent: job}, jobs.Options{
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

func (b *bed) wake() {
	if b.runner != nil {
		b.runner.Wake()
	}
}

// receive records a message of lead <channel>:<conv> with text.
func (b *bed) receive(channel, msgID, conv, text, name string) store.Event {
	b.t.Helper()
	rec, err := intake.Record(context.Background(), b.st, intake.Message{
		Channel: channel, MessageID: msgID, ConversationID: conv, Contact: "+1 555 0100", Name: name, Text: text, ReceivedAt: time.Now(),
	}, 3)
	if err != nil || !rec.Created {
		b.t.Fatalf("intake.Record(%s) = created %v, %v", msgID, rec.Created, err)
	}
	b.wake()
	return rec.Event
}

// draft stores the draft text for ev, routed to owner (the lead: matched,
// then owned).
func (b *bed) draft(ev store.Event, owner, text string) store.Draft {
	b.t.Helper()
	d, created, err := review.New(b.st, b.cfg).Save(context.Background(), store.Draft{
		EventKey: ev.Key, CorrelationID: ev.CorrelationID, Channel: ev.Channel, ConversationID: ev.ConversationID,
		Text: text, Drafter: "template", PromptVersion: "v1", Owner: owner, RuleVersion: "r1", Rule: "default",
		ExecutionID: ulid.Make().String(), CreatedAt: time.Now(),
	}, 1)
	if err != nil || !created {
		b.t.Fatalf("Save(%s) = created %v, %v", ev.Key, created, err)
	}
	b.wake()
	return d
}

// approve approves d: its reply row and delivery job (draft.approved).
func (b *bed) approve(d store.Draft) review.Approved {
	b.t.Helper()
	ap, err := review.New(b.st, b.cfg).Approve(context.Background(), d.ID, store.Decision{By: "tester", At: time.Now()})
	if err != nil {
		b.t.Fatalf("Approve(%s): %v", d.ID, err)
	}
	b.wake()
	return ap
}

// rows are the event rows, by id.
func (b *bed) rows() map[string]store.Outbox {
	b.t.Helper()
	out := map[string]store.Outbox{}
	err := b.st.View(func(tx *store.Tx) error {
		for _, s := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending, store.OutboxSent, store.OutboxFailed, store.OutboxNeedsReconciliation} {
			err := tx.EachOutbox(s, func(o store.Outbox) error {
				if o.Kind == store.OutboxEvent {
					out[o.ID] = o
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return out
}

// settled waits until there are at least n event rows, none pending or
// effect_pending, and returns them.
func (b *bed) settled(n int) map[string]store.Outbox {
	b.t.Helper()
	var rows map[string]store.Outbox
	testkit.Eventually(b.t, 30*time.Second, func() bool {
		rows = b.rows()
		if len(rows) < n {
			return false
		}
		for _, o := range rows {
			if o.Status == store.OutboxPending || o.Status == store.OutboxEffectPending {
				return false
			}
		}
		return true
	}, "every event row to settle")
	return rows
}

func ids(rows map[string]store.Outbox) []string {
	var out []string
	for id, o := range rows {
		out = append(out, id+" "+string(o.Status))
	}
	return out
}

func actions(o store.Outbox) string {
	var a []string
	for _, at := range o.Attempts {
		a = append(a, at.Action+":"+at.Outcome)
	}
	return strings.Join(a, " ")
}

// liveEventJobs maps each row to the id of its live delivery job of
// events (a row without one is absent).
func (b *bed) liveEventJobs(rows map[string]store.Outbox) map[string]string {
	b.t.Helper()
	out := map[string]string{}
	if err := b.st.View(func(tx *store.Tx) error {
		for id := range rows {
			j, err := tx.LiveJob(delivery.KindEvent, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out[id] = j.ID
		}
		return nil
	}); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// jobCounts are the queue's counts in a stable order.
func (b *bed) jobCounts() ([]store.JobCount, error) {
	c, err := b.st.JobCounts()
	slices.SortFunc(c, func(x, y store.JobCount) int {
		return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.State, y.State))
	})
	return c, err
}
