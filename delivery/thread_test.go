package delivery_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/workers"
)

// TestEmailReplyAnswersTheSubject: the delivery job gives an smtp reply
// the subject of the event it answers ("Re: " added once) and, where the
// event's message id is an email Message-ID, In-Reply-To and References;
// the real mail server holds exactly that message.
func TestEmailReplyAnswersTheSubject(t *testing.T) {
	mp := testkit.StartMailpit(t)
	host, port, _ := net.SplitHostPort(mp.SMTP)
	for i, tc := range []struct {
		name, subject, messageID string
		wantSubject, wantReplyTo string
	}{
		{"subject and Message-ID", "Refund?", "<CAB9-0001@mail.example.com>", "Re: Refund?", "<CAB9-0001@mail.example.com>"},
		{"already a reply", "RE: Refund?", "73e6d360-66eb-11e1-8e72-a8904824019b", "RE: Refund?", ""},
		{"no subject", "", "msg-1", "Re: your message", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			p := config.Provider{Name: "out", Kind: "smtp", Timeout: 5 * time.Second}
			p.Host, p.TLS, p.From = host, "none", "Agency <hello@agency.example>"
			p.Port, _ = strconv.Atoi(port)
			to := "lead" + strconv.Itoa(i) + "@lead.example"
			rowID := startEmailDelivery(t, st, p, 3, store.Event{
				Channel: "demo", MessageID: tc.messageID, ConversationID: to, Contact: to, Name: "Ada",
				Text: "Can I have my money back?", Subject: tc.subject,
			})
			var row store.Outbox
			testkit.Eventually(t, 10*time.Second, func() bool {
				var err error
				row, err = st.OutboxRow(rowID)
				return err == nil && row.Status == store.OutboxSent
			}, "the reply to be sent")
			got := mp.Search(t, "to:"+to)
			if len(got) != 1 || got[0].MessageID != row.ProviderID {
				t.Fatalf("mailpit holds %d messages to %s (%+v), want one with Message-ID %s", len(got), to, got, row.ProviderID)
			}
			if got[0].Subject != tc.wantSubject {
				t.Errorf("Subject %q, want %q", got[0].Subject, tc.wantSubject)
			}
			h := mp.Headers(t, got[0].ID)
			if g := first(h["In-Reply-To"]); g != tc.wantReplyTo {
				t.Errorf("In-Reply-To %q, want %q", g, tc.wantReplyTo)
			}
			if g := first(h["References"]); g != tc.wantReplyTo {
				t.Errorf("References %q, want %q", g, tc.wantReplyTo)
			}
		})
	}
}

// TestThreadsOnlyWhereTheProviderDoes: only a provider that threads
// (email) is handed the event's subject and Message-ID.
func TestThreadsOnlyWhereTheProviderDoes(t *testing.T) {
	for _, threads := range []bool{false, true} {
		t.Run("threads="+strconv.FormatBool(threads), func(t *testing.T) {
			st := openStore(t)
			rec := &recordingSender{threads: threads, msgs: make(chan provider.Message, 4)}
			rowID := startEmailDelivery(t, st, config.Provider{Name: "out", Kind: "sandbox"}, 3, store.Event{
				Channel: "demo", MessageID: "<a@b.example>", ConversationID: "c1", Contact: "ada@lead.example", Text: "hi", Subject: "Refund?",
			}, rec)
			testkit.Eventually(t, 10*time.Second, func() bool {
				row, err := st.OutboxRow(rowID)
				return err == nil && row.Status == store.OutboxSent
			}, "the reply to be sent")
			m := rec.last()
			want := provider.Message{Subject: "Refund?", InReplyTo: "<a@b.example>"}
			if !threads {
				want = provider.Message{}
			}
			if m.Text == "" || m.Subject != want.Subject || m.InReplyTo != want.InReplyTo {
				t.Fatalf("Threads %v: got text %q, subject %q, in-reply-to %q; want subject %q, in-reply-to %q",
					threads, m.Text, m.Subject, m.InReplyTo, want.Subject, want.InReplyTo)
			}
		})
	}
}

// recordingSender accepts every message and keeps the last one.
type recordingSender struct {
	threads bool
	msgs    chan provider.Message
}

func (r *recordingSender) Send(_ context.Context, m provider.Message) (string, error) {
	r.msgs <- m
	return "id-" + m.Ref, nil
}
func (r *recordingSender) Lookup(context.Context, string, string) (string, bool, error) {
	return "", false, provider.ErrNoLookup
}
func (r *recordingSender) Capabilities() provider.Capabilities {
	return provider.Capabilities{Threads: r.threads}
}
func (r *recordingSender) last() provider.Message {
	select {
	case m := <-r.msgs:
		return m
	default:
		return provider.Message{}
	}
}

// startEmailDelivery records ev on the demo channel, which auto-approves
// to prov, runs the real job kinds over it and returns the reply's outbox
// id; its jobs have attempts attempts. With stand, it stands in for the provider prov names.
func startEmailDelivery(t *testing.T, st *store.Store, prov config.Provider, attempts int, ev store.Event, stand ...provider.Provider) string {
	t.Helper()
	cfg := config.Default()
	cfg.Retry.MaxAttempts = attempts
	cfg.Channels[0].AutoApprove = true
	cfg.Channels[0].Provider = prov.Name
	if prov.Kind != "sandbox" {
		cfg.Providers = []config.Provider{prov}
	}
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatalf("provider.Open: %v", err)
	}
	if len(stand) > 0 {
		providers[prov.Name] = stand[0]
	}
	d, err := drafter.NewTemplate(cfg.Drafter.Template, cfg.Drafter.PromptVersion, 0)
	if err != nil {
		t.Fatalf("NewTemplate: %v", err)
	}
	kinds, _ := workers.Kinds(st, cfg, d, providers)
	ev.ID, ev.CorrelationID, ev.ReceivedAt = ulid.Make().String(), ulid.Make().String(), time.Now().UTC()
	ev.Key = ev.Channel + ":" + ev.MessageID
	rec, err := leads.RecordEvent(context.Background(), st, ev, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: ev.Key, MaxAttempts: attempts})
	if err != nil {
		t.Fatalf("RecordEvent: %v", err)
	}
	if rec.Event.Subject != ev.Subject {
		t.Fatalf("the stored event's subject is %q, want %q", rec.Event.Subject, ev.Subject)
	}
	startRunner(t, st, kinds, testOptions())
	return store.OutboxID(ev.ConversationID, store.DraftID(rec.Event.ID))
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// holdOnce is a provider whose rate holds its first send for a moment.
type holdOnce struct {
	recordingSender
	mu    sync.Mutex
	holds int
}

func (h *holdOnce) Hold(string, time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds++
	if h.holds == 1 {
		return 50 * time.Millisecond
	}
	return 0
}

// TestRateHoldCostsNoAttempt: a job with a single attempt whose send is
// held to its provider's rate still has that attempt when its slot comes:
// the reply is sent, the job completed as attempt 1, and the held attempt
// is on its record without a number of its own.
func TestRateHoldCostsNoAttempt(t *testing.T) {
	st := openStore(t)
	h := &holdOnce{recordingSender: recordingSender{msgs: make(chan provider.Message, 4)}}
	rowID := startEmailDelivery(t, st, config.Provider{Name: "out", Kind: "sandbox"}, 1, store.Event{
		Channel: "demo", MessageID: "m-held", ConversationID: "c-held", Contact: "+15550001234", Text: "hi",
	}, h)
	var row store.Outbox
	var j store.Job
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		if row, err = st.OutboxRow(rowID); err != nil {
			return false
		}
		var all []store.Job
		err = st.View(func(tx *store.Tx) (err error) { all, err = tx.JobsByCorrelation(row.CorrelationID); return err })
		if err != nil {
			return false
		}
		for _, x := range all {
			if x.Kind == delivery.Kind && x.State.Final() {
				// The job ends in the commit that settles the row: read
				// the row again, as it stands once the job has ended.
				j = x
				row, err = st.OutboxRow(rowID)
				return err == nil
			}
		}
		return false
	}, "the reply's delivery job to end")
	if row.Status != store.OutboxSent {
		t.Fatalf("row %s %v, want sent: the hold must not use the only attempt", row.Status, attemptSummary(row))
	}
	if j.State != store.JobCompleted || j.Attempt != 1 || len(j.Attempts) != 2 {
		t.Fatalf("job %s at attempt %d with %d attempt records, want completed at attempt 1 after one held attempt", j.State, j.Attempt, len(j.Attempts))
	}
	if a := j.Attempts[0]; a.Outcome != store.OutcomeRetry || !strings.Contains(a.Error, "held") || a.Number != 1 || j.Attempts[1].Number != 1 {
		t.Errorf("attempts %+v, want the held one (retry, \"held\") and the send, both numbered 1", j.Attempts)
	}
}
