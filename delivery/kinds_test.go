package delivery_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
)

// standinProvider is provider config for kind pointing at stand-in s.
func standinProvider(s *standin.Server, timeout time.Duration) config.Provider {
	p := config.Provider{Name: "out", Kind: s.Kind, Timeout: timeout}
	p.APIBase = s.URL
	switch s.Kind {
	case "twilio":
		p.AccountSID, p.AuthToken, p.From, p.StatusCallback = s.AccountSID, s.Token, "+15550001111", "https://handoff.example/hooks/demo"
	case "whatsapp":
		p.PhoneNumberID, p.Token = s.PhoneID, s.Token
	default:
		p.Token = s.Token
	}
	return p
}

var apiKinds = []string{"twilio", "whatsapp", "telegram", "slack"}

// receiptKinds report delivery with our reference.
var receiptKinds = map[string]bool{"twilio": true, "whatsapp": true}

// TestDeliverThroughEachKind runs the real delivery job against each
// kind's stand-in: every case ends with exactly the messages the stand-in
// accepted and a row that says so.
func TestDeliverThroughEachKind(t *testing.T) {
	for _, kind := range apiKinds {
		for _, tc := range []struct {
			name     string
			script   []standin.Mode
			status   store.OutboxStatus
			attempts []string
			accepted int
		}{
			{"success", []standin.Mode{standin.OK}, store.OutboxSent, []string{"send:sent"}, 1},
			{"refusal", []standin.Mode{standin.Refuse}, store.OutboxFailed, []string{"send:permanent"}, 0},
			// A rate-limit answer means not accepted: sent again later,
			// never parked for a person.
			{"rate limit", []standin.Mode{standin.RateLimit, standin.OK}, store.OutboxSent, []string{"send:not_sent", "send:sent"}, 1},
			// No key, no lookup: an accepted message whose answer is lost
			// waits for a receipt or a person, and is never sent twice.
			{"timeout after accept", []standin.Mode{standin.Stall}, store.OutboxNeedsReconciliation, []string{"send:ambiguous"}, 1},
			{"cut after accept", []standin.Mode{standin.Cut}, store.OutboxNeedsReconciliation, []string{"send:ambiguous"}, 1},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				st := openStore(t)
				s := standin.New(t, kind, tc.script...)
				timeout := 10 * time.Second
				if slices.Contains(tc.script, standin.Stall) {
					timeout = time.Second // the stall waits for it
				}
				g := startDelivery(t, st, standinProvider(s, timeout), 3)
				row, _ := g.settle(t)
				if row.Status == store.OutboxNeedsReconciliation && len(row.Attempts) == 2 {
					// The job's second attempt found the earlier outcome
					// unknown and parked it without sending: still one message.
					tc.attempts = append(tc.attempts, "check:ambiguous")
				}
				if row.Status != tc.status || !slices.Equal(attemptSummary(row), tc.attempts) {
					t.Fatalf("row %s %v (%s), want %s %v", row.Status, attemptSummary(row), row.Note, tc.status, tc.attempts)
				}
				acc := s.Accepted()
				if len(acc) != tc.accepted {
					t.Fatalf("the stand-in accepted %d messages, want %d", len(acc), tc.accepted)
				}
				if tc.status == store.OutboxSent && row.ProviderID != acc[0].ID {
					t.Errorf("provider id %q, want the stand-in's %q", row.ProviderID, acc[0].ID)
				}
				if receiptKinds[kind] && tc.accepted == 1 && acc[0].Ref != g.outboxID {
					t.Errorf("the request carried reference %q, want the outbox id %q", acc[0].Ref, g.outboxID)
				}
				if tc.status == store.OutboxNeedsReconciliation && receiptKinds[kind] {
					// The receipt after the attempt's own answer settles it.
					r := delivery.Receipt{Channel: "demo", ProviderID: acc[0].ID, Ref: acc[0].Ref, Status: "delivered", At: time.Now().UTC()}
					settleReceipt(t, st, r)
					row, _ = st.OutboxRow(g.outboxID)
					if row.Status != store.OutboxSent || row.ProviderID != acc[0].ID || row.Delivery != "delivered" {
						t.Fatalf("after the receipt: %s %q %q, want sent with %q, delivered", row.Status, row.ProviderID, row.Delivery, acc[0].ID)
					}
					if a := row.Attempts[len(row.Attempts)-1]; a.Action != "receipt" || a.Outcome != "sent" {
						t.Errorf("last attempt %+v, want receipt:sent", a)
					}
				}
				g.finish(t)
				if s.Posts() != len(tc.script) && tc.name != "timeout after accept" && tc.name != "cut after accept" {
					t.Errorf("%d posts, want %d", s.Posts(), len(tc.script))
				}
			})
		}
	}
}

func settleReceipt(t *testing.T, st *store.Store, r delivery.Receipt) {
	t.Helper()
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		_, err := tx.PutReceipt(r.Channel, r.ProviderID, r.Status, r.At)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := delivery.SettleReceipts(context.Background(), st, []delivery.Receipt{r}); err != nil {
		t.Fatal(err)
	}
}

// TestReceiptBeforeTheAnswer: the provider's status webhook arrives while
// the send is still waiting for its answer (which then times out). The
// receipt settles the row; the late answer is kept as an attempt and
// changes nothing; the job completes; one message.
func TestReceiptBeforeTheAnswer(t *testing.T) {
	for kind := range receiptKinds {
		for _, status := range []string{"sent", "failed"} {
			t.Run(kind+"/"+status, func(t *testing.T) {
				t.Parallel()
				st := openStore(t)
				s := standin.New(t, kind, standin.Stall)
				g := startDelivery(t, st, standinProvider(s, 2*time.Second), 3)
				testkit.Eventually(t, 10*time.Second, func() bool { return len(s.Accepted()) == 1 }, "the stand-in to accept the message")
				m := s.Accepted()[0]
				settleReceipt(t, st, delivery.Receipt{Channel: "demo", ProviderID: m.ID, Ref: m.Ref, Status: status, At: time.Now().UTC()})
				row, jobs := g.settle(t)
				want := store.OutboxSent
				if status == "failed" {
					want = store.OutboxFailed
				}
				testkit.Eventually(t, 10*time.Second, func() bool {
					row, _ = st.OutboxRow(g.outboxID)
					return len(row.Attempts) == 2
				}, "the late answer to be recorded")
				if row.Status != want || row.ProviderID != m.ID {
					t.Fatalf("row %s %q %v, want %s with %q", row.Status, row.ProviderID, attemptSummary(row), want, m.ID)
				}
				if got := attemptSummary(row); !slices.Equal(got, []string{"receipt:" + status, "send:ambiguous"}) {
					t.Errorf("attempts %v, want the receipt then the late answer", got)
				}
				for _, j := range g.deliverJobs(t) {
					if j.State != store.JobCompleted {
						t.Errorf("delivery job %s is %s, want completed", j.ID, j.State)
					}
				}
				_ = jobs
				if len(s.Accepted()) != 1 || s.Posts() != 1 {
					t.Errorf("%d accepted, %d posts; want exactly one message", len(s.Accepted()), s.Posts())
				}
				g.finish(t)
			})
		}
	}
}

// TestReceiptByProviderIDOnly: a receipt without our reference that came
// before the answer is joined when the answer names its id, and one that
// comes after is joined by the id the answer stored.
func TestReceiptByProviderIDOnly(t *testing.T) {
	st := openStore(t)
	s := standin.New(t, "twilio", standin.OK)
	g := startDelivery(t, st, standinProvider(s, time.Second), 3)
	row, _ := g.settle(t)
	if row.Status != store.OutboxSent {
		t.Fatalf("row %s, want sent", row.Status)
	}
	settleReceipt(t, st, delivery.Receipt{Channel: "demo", ProviderID: row.ProviderID, Status: "undelivered", At: time.Now().UTC()})
	row, _ = st.OutboxRow(g.outboxID)
	if row.Status != store.OutboxSent || row.Delivery != "undelivered" {
		t.Fatalf("row %s %q, want sent, reported undelivered", row.Status, row.Delivery)
	}
	// A receipt naming a row of another channel is not believed.
	settleReceipt(t, st, delivery.Receipt{Channel: "other", ProviderID: "SMx", Ref: g.outboxID, Status: "delivered", At: time.Now().UTC()})
	if again, _ := st.OutboxRow(g.outboxID); again.Delivery != "undelivered" {
		t.Errorf("a receipt on another channel changed the row: %q", again.Delivery)
	}
	g.finish(t)
}

// TestDeliverSMTPCutAfterDataResolvedByLookup: through the real job and a
// real SMTP server, a session cut right after DATA's final dot is an
// unknown outcome; the next attempt looks the Message-ID up, finds it and
// records sent: one message at the server, none sent twice.
func TestDeliverSMTPCutAfterDataResolvedByLookup(t *testing.T) {
	st := openStore(t)
	mp := testkit.StartMailpit(t)
	cut := testkit.StartSMTPCut(t, mp.SMTP)
	host, port, _ := net.SplitHostPort(cut.Addr)
	p := config.Provider{Name: "out", Kind: "smtp", Timeout: 2 * time.Second, LookupURL: mp.LookupURL(), LookupSettle: 300 * time.Millisecond}
	p.Host, p.TLS, p.From = host, "none", "Agency <hello@agency.example>"
	p.Port, _ = strconv.Atoi(port)
	g := startDeliveryTo(t, st, p, 4, "ada@lead.example")
	row, _ := g.settle(t)
	if row.Status != store.OutboxSent || cut.Cuts() != 1 {
		t.Fatalf("row %s %v after %d cuts, want sent after one cut", row.Status, attemptSummary(row), cut.Cuts())
	}
	got := attemptSummary(row)
	if got[0] != "send:ambiguous" || got[len(got)-1] != "lookup:sent" || slices.Contains(got, "resend:sent") {
		t.Errorf("attempts %v, want send:ambiguous … lookup:sent and no second send", got)
	}
	msgs := mp.Messages(t)
	if len(msgs) != 1 || msgs[0].MessageID != row.ProviderID {
		t.Fatalf("mailpit holds %d messages (%+v), want exactly one with Message-ID %s", len(msgs), msgs, row.ProviderID)
	}
	g.finish(t)
}

// TestReceiptWithoutReferenceBeforeTheAnswer: a receipt naming only the
// provider id arrives before the send's answer; it is stored unlinked,
// and the answer that names the same id applies it in its own
// transaction.
func TestReceiptWithoutReferenceBeforeTheAnswer(t *testing.T) {
	st := openStore(t)
	s := standin.New(t, "telegram") // numbering is known: the first id is 101
	s.SetHold(300 * time.Millisecond)
	g := startDelivery(t, st, standinProvider(s, 2*time.Second), 3)
	testkit.Eventually(t, 10*time.Second, func() bool { return s.Holding() == 1 }, "the stand-in to hold the send")
	id := s.Accepted()[0].ID
	settleReceipt(t, st, delivery.Receipt{Channel: "demo", ProviderID: id, Status: "read", At: time.Now().UTC()})
	if row, _ := st.OutboxRow(g.outboxID); row.Status != store.OutboxEffectPending || row.Delivery != "" {
		t.Fatalf("before the answer: %s %q; a receipt without our reference cannot be joined yet", row.Status, row.Delivery)
	}
	row, _ := g.settle(t)
	if row.Status != store.OutboxSent || row.ProviderID != id || row.Delivery != "read" {
		t.Fatalf("row %s %q %q, want sent as %s with delivery read", row.Status, row.ProviderID, row.Delivery, id)
	}
	var r store.Receipt
	if err := st.View(func(tx *store.Tx) (err error) { r, err = tx.Receipt("demo", id); return err }); err != nil || r.OutboxID != g.outboxID {
		t.Errorf("receipt %+v, %v: want it linked to %s", r, err, g.outboxID)
	}
	g.finish(t)
}

// heldSender is a provider held to a rate that records whether it was called.
type heldSender struct {
	wait  time.Duration
	calls int
}

func (h *heldSender) Hold(string, time.Time) time.Duration { return h.wait }
func (h *heldSender) Send(context.Context, provider.Message) (string, error) {
	h.calls++
	return "id-1", nil
}
func (h *heldSender) Lookup(context.Context, string, string) (string, bool, error) {
	return "", false, provider.ErrNoLookup
}
func (h *heldSender) Capabilities() provider.Capabilities {
	return provider.Capabilities{Rate: 1, Burst: 1}
}

// TestRateHoldBeforeClaim: a send held by its provider's rate comes back
// as *jobs.Snooze for the queue's due time, without touching the row or calling
// the provider; once its slot comes it is sent.
func TestRateHoldBeforeClaim(t *testing.T) {
	st := openStore(t)
	s := standin.New(t, "slack", standin.Refuse)
	g := startDelivery(t, st, standinProvider(s, time.Second), 3)
	g.settle(t)
	g.finish(t) // the runner is stopped: the test runs the job by hand
	// A person says it was not sent: the row is pending with a new job.
	if _, err := delivery.NewForTest(st, 3, func() string { return "j-held" }).Reconcile(context.Background(), g.outboxID,
		store.Reconciliation{By: "ada", At: time.Now().UTC(), Outcome: "not_sent"}); err != nil {
		t.Fatal(err)
	}
	held := g.outboxID
	before, err := st.OutboxRow(held)
	if err != nil {
		t.Fatal(err)
	}
	h := &heldSender{wait: 700 * time.Millisecond}
	job := &delivery.Job{Store: st, Providers: map[string]delivery.Sender{"out": h}}
	err = job.Run(context.Background(), store.Job{ID: "j-held", Kind: delivery.Kind, Key: held, ExecutionID: "e1", Attempt: 1, MaxAttempts: 3})
	var hold *jobs.Snooze
	if !errors.As(err, &hold) || hold.After != 700*time.Millisecond || h.calls != 0 {
		t.Fatalf("Run = %v, %d calls; want *jobs.Snooze after 700ms and no call", err, h.calls)
	}
	if o, _ := st.OutboxRow(held); o.Status != store.OutboxPending || len(o.Attempts) != len(before.Attempts) || len(o.Attempts) != 1 ||
		!o.UpdatedAt.Equal(before.UpdatedAt) || o.ExecutionID != before.ExecutionID {
		t.Fatalf("row %s %v after a hold, want pending and untouched", o.Status, attemptSummary(o))
	}
	h.wait = 0
	if err := job.Run(context.Background(), store.Job{ID: "j-held", Kind: delivery.Kind, Key: held, ExecutionID: "e2", Attempt: 2, MaxAttempts: 3}); err != nil {
		t.Fatalf("Run at the slot: %v", err)
	}
	if o, _ := st.OutboxRow(held); o.Status != store.OutboxSent || h.calls != 1 {
		t.Fatalf("row %s after %d calls, want sent after one", o.Status, h.calls)
	}
}
