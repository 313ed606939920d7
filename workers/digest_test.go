package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/standin"
)

// dt0 is the injected clock's start in the digest tests.
var dt0 = time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)

const digestBase = "https://handoff.example.com"

// digestRig is a store on a real file with the real digest and delivery
// jobs on a runner, the configured providers, and the Maintenance whose
// schedule and threshold check enqueue digests, all on one injected clock.
type digestRig struct {
	dir    string
	st     *store.Store
	cfg    *config.Config
	clock  *testkit.Clock
	runner *jobs.Runner
	maint  *Maintenance
}

// digestConfig parses a config file: the digests are validated as serve
// validates them.
func digestConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("base_url: "+digestBase+"\n"+yaml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Retry.MaxAttempts = 3
	return cfg
}

func startDigestRig(t *testing.T, dir string, cfg *config.Config, clock *testkit.Clock) *digestRig {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: st, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	senders := map[string]delivery.Sender{}
	for name, p := range providers {
		senders[name] = p
	}
	digest := &DigestJob{Store: st, Config: cfg, Now: clock.Now}
	opt := testOptions()
	opt.Now = clock.Now
	r := jobs.NewRunner(st, map[string]jobs.Kind{
		delivery.Kind: &delivery.Job{Store: st, Providers: senders, Now: clock.Now},
		KindDigest:    digest,
	}, opt)
	digest.Wake = r.Wake
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := &digestRig{dir: dir, st: st, cfg: cfg, clock: clock, runner: r}
	g.maint = &Maintenance{Store: st, Config: cfg, Log: discardLogger(), Wake: r.Wake, Now: clock.Now}
	return g
}

// stop stops the runner, checks the file and closes the store.
func (g *digestRig) stop(t *testing.T) {
	t.Helper()
	stopAndCheck(t, g.runner, g.st)
}

// waiting stores a draft waiting for approval since at, for a new event
// on channel from name with text; its draft job is due far in the future.
func waiting(t *testing.T, st *store.Store, channel, name, text string, at time.Time) store.Draft {
	t.Helper()
	id := ulid.Make().String()
	key := channel + ":m-" + id
	rec, err := leads.RecordEvent(context.Background(), st, store.Event{
		ID: id, Key: key, Channel: channel, MessageID: "m-" + id, CorrelationID: ulid.Make().String(),
		ConversationID: "conv-" + id, Contact: "+15550001234", Name: name, Text: text, ReceivedAt: at,
	}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: 3, RunAt: at.Add(1000 * time.Hour)})
	if err != nil || !rec.Created {
		t.Fatalf("RecordEvent(%s) = %v, %v", key, rec.Created, err)
	}
	d := store.Draft{
		ID: store.DraftID(id), EventKey: key, CorrelationID: rec.Event.CorrelationID, Channel: channel,
		ConversationID: rec.Event.ConversationID, Status: store.DraftPending, Text: "Thanks, we will call you.",
		Drafter: "template", PromptVersion: "v1", Owner: "sales", CreatedAt: at, Version: 1, Answers: []string{key},
	}
	if err := st.Update(context.Background(), func(tx *store.Tx) error { return tx.InsertDraft(&d, rec.Event) }); err != nil {
		t.Fatalf("InsertDraft: %v", err)
	}
	return d
}

// decide takes draft id out of the queue (rejected), as a person would.
func decide(t *testing.T, st *store.Store, id string, at time.Time) {
	t.Helper()
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		old, err := tx.Draft(id)
		if err != nil {
			return err
		}
		d := old
		d.Status, d.Decision = store.DraftRejected, &store.Decision{By: "dana", At: at, Reason: "test"}
		return tx.PutDraft(&old, &d)
	})
	if err != nil {
		t.Fatalf("reject %s: %v", id, err)
	}
}

// digestJobs are the jobs of digest name: its digest jobs and their
// delivery jobs.
func digestJobs(t *testing.T, st *store.Store, name string) (digests, deliveries []store.Job) {
	t.Helper()
	var js []store.Job
	err := st.View(func(tx *store.Tx) (err error) { js, err = tx.JobsByCorrelation("digest:" + name); return err })
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		switch j.Kind {
		case KindDigest:
			digests = append(digests, j)
		case delivery.Kind:
			deliveries = append(deliveries, j)
		default:
			t.Errorf("digest %s has a %s job", name, j.Kind)
		}
	}
	return digests, deliveries
}

// waitSettled waits for the digest row id to leave the way out, and returns it.
func waitSettled(t *testing.T, st *store.Store, id string) store.Outbox {
	t.Helper()
	var o store.Outbox
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		o, err = st.OutboxRow(id)
		return err == nil && o.Status != store.OutboxPending && o.Status != store.OutboxEffectPending
	}, "digest "+id+" to be settled")
	return o
}

func link(id string) string { return digestBase + "/drafts?id=" + id }

// mailpitText is the plain-text body of Mailpit's message id.
func mailpitText(t *testing.T, mp testkit.Mailpit, id string) string {
	t.Helper()
	resp, err := http.Get(mp.API + "/api/v1/message/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Text string }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.Text
}

// TestDigestByEmailThroughMailpit: a scheduled digest goes through a real
// SMTP server once: the count, the oldest's wait, the ten oldest drafts
// each with its customer, channel, first words and the link that opens
// it, and how many more. Firing again in the same minute sends nothing.
func TestDigestByEmailThroughMailpit(t *testing.T) {
	mp := testkit.StartMailpit(t)
	host, port, err := net.SplitHostPort(mp.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	cfg := digestConfig(t, fmt.Sprintf(`providers:
  - {name: mail, kind: smtp, host: %s, port: %s, tls: none, from: "Handoff <handoff@agency.example>", lookup_url: "%s"}
digests:
  - {name: morning, to: mail, address: approvers@agency.example, schedule: "0 9 * * 1-5"}
`, host, port, mp.LookupURL()))
	clock := testkit.NewClock(dt0)
	g := startDigestRig(t, t.TempDir(), cfg, clock)
	defer g.stop(t)

	var drafts []store.Draft
	for i := range 12 {
		drafts = append(drafts, waiting(t, g.st, "demo", fmt.Sprintf("Ada %02d", i),
			fmt.Sprintf("Hello, do you have the blue one in stock for delivery on Friday, item %d? Thanks a lot", i),
			dt0.Add(-3*time.Hour+time.Duration(i)*time.Minute)))
	}
	clock.Advance(15 * time.Second) // the cron fires a moment into its minute
	for range 2 {
		if err := g.maint.ScheduledDigest(context.Background(), "morning"); err != nil {
			t.Fatalf("ScheduledDigest: %v", err)
		}
	}
	id := delivery.DigestID("morning", "at-20260601T0900Z")
	o := waitSettled(t, g.st, id)
	if o.Status != store.OutboxSent || len(o.Attempts) != 1 || o.To != "approvers@agency.example" || o.Provider != "mail" {
		t.Fatalf("digest row = %s to %q via %s after %d attempts, want sent once to approvers@agency.example via mail", o.Status, o.To, o.Provider, len(o.Attempts))
	}
	msgs := mp.Messages(t)
	if len(msgs) != 1 || msgs[0].To[0].Address != "approvers@agency.example" || msgs[0].MessageID != provider.MessageID(id, "agency.example") {
		t.Fatalf("mailpit holds %+v, want one digest to approvers@agency.example", msgs)
	}
	body := mailpitText(t, mp, msgs[0].ID)
	for _, want := range []string{
		"12 drafts wait for approval; the oldest has waited 3h.",
		"- Ada 00 (demo, 3h ago): “Hello, do you have the blue one in stock for delivery on…” " + link(drafts[0].ID),
		"- Ada 09 (demo, 2h51m ago)",
		"…and 2 more.",
		"Open the queue: " + digestBase + "/drafts",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("digest body lacks %q:\n%s", want, body)
		}
	}
	for i, d := range drafts {
		if has := strings.Contains(body, link(d.ID)); has != (i < digestLines) {
			t.Errorf("digest links draft %d (%s): %v, want %v", i, d.ID, has, i < digestLines)
		}
	}
	if digests, deliveries := digestJobs(t, g.st, "morning"); len(digests) != 1 || len(deliveries) != 1 {
		t.Errorf("digest jobs %d, delivery jobs %d; want one of each for one period", len(digests), len(deliveries))
	}
}

// standIn is an ntfy-style receiver (the fake http provider of
// testkit/standin): it records each POST and answers with status.
type standIn struct {
	*standin.Server
	t *testing.T
}

func startStandIn(t *testing.T, status int) standIn {
	t.Helper()
	mode := standin.OK
	if status != http.StatusOK {
		mode = standin.Status(status)
	}
	return standIn{standin.New(t, "http", mode), t}
}

// got is every message posted, accepted or not; a body the receiver could
// not read fails the test.
func (s standIn) got() []provider.Message {
	for _, why := range s.Malformed() {
		s.t.Errorf("stand-in got a malformed request: %s", why)
	}
	var out []provider.Message
	for _, p := range s.Sends() {
		out = append(out, provider.Message{Ref: p.Ref, To: p.To, Text: p.Text})
	}
	return out
}

func httpDigestConfig(t *testing.T, url string) *config.Config {
	return digestConfig(t, fmt.Sprintf(`providers:
  - {name: ntfy, kind: http, url: "%s"}
digests:
  - {name: late, to: ntfy, oldest_after: 30m}
`, url))
}

// TestDigestThresholdOncePerCrossing: with oldest_after 30m, the check
// that first sees the oldest waiting draft past 30m sends one digest
// through the stand-in; later checks, and checks after a restart on the
// same file, send nothing more while it stays past. Once no draft is past
// the threshold the mark clears, and the next crossing sends again.
func TestDigestThresholdOncePerCrossing(t *testing.T) {
	ntfy := startStandIn(t, http.StatusOK)
	dir := t.TempDir()
	clock := testkit.NewClock(dt0)
	g := startDigestRig(t, dir, httpDigestConfig(t, ntfy.SendURL()), clock)
	ctx := context.Background()
	check := func(at time.Duration) {
		t.Helper()
		clock.Set(dt0.Add(at))
		if err := g.maint.CheckDigests(ctx); err != nil {
			t.Fatalf("CheckDigests at +%s: %v", at, err)
		}
	}
	first := waiting(t, g.st, "demo", "Ada", "Can I book a table for four?", dt0)
	check(10 * time.Minute)
	check(30 * time.Minute) // exactly the threshold is not past it
	if digests, _ := digestJobs(t, g.st, "late"); len(digests) != 0 {
		t.Fatalf("%d digests before the threshold, want none", len(digests))
	}
	check(31 * time.Minute)
	id := delivery.DigestID("late", "oldest-"+first.ID)
	if o := waitSettled(t, g.st, id); o.Status != store.OutboxSent {
		t.Fatalf("digest %s ended %s (%s), want sent", id, o.Status, o.Note)
	}
	check(32 * time.Minute)
	if digests, deliveries := digestJobs(t, g.st, "late"); len(digests) != 1 || len(deliveries) != 1 {
		t.Fatalf("a second check past the threshold: %d digest jobs, %d deliveries; want the one crossing's", len(digests), len(deliveries))
	}
	got := ntfy.got()
	if len(got) != 1 || got[0].Ref != id || !strings.Contains(got[0].Text, "1 draft waits for approval; the oldest has waited 31m. That is past the 30m this digest allows.") ||
		!strings.Contains(got[0].Text, "- Ada (demo, 31m ago): “Can I book a table for four?” "+link(first.ID)) {
		t.Fatalf("stand-in got %+v, want one digest %s with Ada's draft and its link", got, id)
	}

	// A restart on the same file remembers the crossing.
	g.stop(t)
	g = startDigestRig(t, dir, httpDigestConfig(t, ntfy.SendURL()), clock)
	defer g.stop(t)
	check(40 * time.Minute)
	if digests, deliveries := digestJobs(t, g.st, "late"); len(digests) != 1 || len(deliveries) != 1 {
		t.Fatalf("after a restart: %d digest jobs, %d deliveries; want the one crossing's", len(digests), len(deliveries))
	}
	err := g.st.View(func(tx *store.Tx) error {
		m, err := tx.DigestMark("late")
		if err == nil && (!m.Over || m.Draft != first.ID || !m.At.Equal(dt0.Add(31*time.Minute))) {
			t.Errorf("mark after the restart = %+v, want over since +31m for %s", m, first.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// The queue empties: the mark clears, and nothing is sent for it.
	decide(t, g.st, first.ID, dt0.Add(41*time.Minute))
	check(42 * time.Minute)
	second := waiting(t, g.st, "demo", "Bea", "Do you open on Sundays?", dt0.Add(43*time.Minute))
	check(70 * time.Minute)
	if digests, _ := digestJobs(t, g.st, "late"); len(digests) != 1 {
		t.Fatalf("%d digests before the second crossing, want 1", len(digests))
	}
	check(74 * time.Minute)
	id2 := delivery.DigestID("late", "oldest-"+second.ID)
	if o := waitSettled(t, g.st, id2); o.Status != store.OutboxSent {
		t.Fatalf("second digest ended %s, want sent", o.Status)
	}
	check(75 * time.Minute)
	if got := ntfy.got(); len(got) != 2 || got[1].Ref != id2 || strings.Contains(got[1].Text, first.ID) || !strings.Contains(got[1].Text, link(second.ID)) {
		t.Fatalf("stand-in got %+v, want a second digest with Bea's draft alone", got)
	}
}

// TestDigestCrossingRace: sixteen checks at once past the threshold mark
// one crossing, enqueue one digest and send one message: the check and
// the write are one transaction.
func TestDigestCrossingRace(t *testing.T) {
	cfg := digestConfig(t, "digests:\n  - {name: late, to: sandbox, oldest_after: 30m}\n")
	clock := testkit.NewClock(dt0)
	g := startDigestRig(t, t.TempDir(), cfg, clock)
	defer g.stop(t)
	d := waiting(t, g.st, "demo", "Ada", "hello", dt0.Add(-time.Hour))
	errs := make([]error, 16)
	testkit.Together(16, func(i int) { errs[i] = g.maint.CheckDigests(context.Background()) })
	for _, err := range errs {
		if err != nil {
			t.Fatalf("CheckDigests: %v", err)
		}
	}
	id := delivery.DigestID("late", "oldest-"+d.ID)
	if o := waitSettled(t, g.st, id); o.Status != store.OutboxSent || len(o.Attempts) != 1 {
		t.Fatalf("digest %s: %s after %d attempts, want sent once", id, o.Status, len(o.Attempts))
	}
	digests, deliveries := digestJobs(t, g.st, "late")
	if len(digests) != 1 || len(deliveries) != 1 {
		t.Fatalf("16 concurrent checks: %d digest jobs, %d deliveries; want 1 and 1", len(digests), len(deliveries))
	}
	msgs, err := g.st.SandboxMessages(100)
	if err != nil || len(msgs) != 1 || msgs[0].Ref != id {
		t.Fatalf("sandbox holds %d messages (%v), want the one digest %s", len(msgs), err, id)
	}
}

// TestDigestAmbiguousNotResent: a stand-in that answers 503 leaves the
// digest's outcome unknown; the http provider can neither deduplicate nor
// look it up, so the row waits for a person and the digest is not sent
// again, however often the period's schedule fires or the job is run.
func TestDigestAmbiguousNotResent(t *testing.T) {
	ntfy := startStandIn(t, http.StatusServiceUnavailable)
	cfg := digestConfig(t, fmt.Sprintf(`providers:
  - {name: ntfy, kind: http, url: "%s"}
digests:
  - {name: daily, to: ntfy, schedule: "@daily"}
`, ntfy.SendURL()))
	clock := testkit.NewClock(dt0)
	g := startDigestRig(t, t.TempDir(), cfg, clock)
	defer g.stop(t)
	waiting(t, g.st, "demo", "Ada", "hello", dt0.Add(-time.Hour))
	if err := g.maint.ScheduledDigest(context.Background(), "daily"); err != nil {
		t.Fatal(err)
	}
	id := delivery.DigestID("daily", "at-20260601T0900Z")
	if o := waitSettled(t, g.st, id); o.Status != store.OutboxNeedsReconciliation {
		t.Fatalf("digest after a 503 = %s, want needs_reconciliation", o.Status)
	}
	digests, _ := digestJobs(t, g.st, "daily")
	testkit.WaitJob(t, g.st, digests[0].ID, store.JobCompleted)
	// The same period again: the job runs, finds the row, sends nothing.
	if err := g.maint.ScheduledDigest(context.Background(), "daily"); err != nil {
		t.Fatal(err)
	}
	digests, deliveries := digestJobs(t, g.st, "daily")
	if len(digests) != 2 || len(deliveries) != 1 {
		t.Fatalf("%d digest jobs, %d deliveries; want the rerun's job and still one delivery", len(digests), len(deliveries))
	}
	for _, j := range digests {
		testkit.WaitJob(t, g.st, j.ID, store.JobCompleted)
	}
	if got := ntfy.got(); len(got) != 1 {
		t.Fatalf("the stand-in got %d digests, want the one whose answer was lost", len(got))
	}
}

// TestDigestClientScoped: a digest for one client's approvers lists that
// client's drafts alone, and another client's old draft does not cross
// its threshold.
func TestDigestClientScoped(t *testing.T) {
	cfg := digestConfig(t, `clients: [{id: acme, name: Acme Ltd}, {id: bolt}]
channels:
  - {name: acme-web, client: acme, fields: {message_id: /id}}
  - {name: bolt-web, client: bolt, fields: {message_id: /id}}
digests:
  - {name: acme, to: sandbox, client: acme, schedule: "@hourly", oldest_after: 30m}
`)
	clock := testkit.NewClock(dt0)
	g := startDigestRig(t, t.TempDir(), cfg, clock)
	defer g.stop(t)
	bolt := waiting(t, g.st, "bolt-web", "Bob", "bolt's question", dt0.Add(-2*time.Hour))
	acme := waiting(t, g.st, "acme-web", "Ada", "acme's question", dt0.Add(-10*time.Minute))
	if err := g.maint.CheckDigests(context.Background()); err != nil {
		t.Fatal(err)
	}
	if digests, _ := digestJobs(t, g.st, "acme"); len(digests) != 0 {
		t.Fatalf("bolt's 2h-old draft crossed acme's threshold: %d digests", len(digests))
	}
	if err := g.maint.ScheduledDigest(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	id := delivery.DigestID("acme", "at-20260601T0900Z")
	if o := waitSettled(t, g.st, id); o.Status != store.OutboxSent {
		t.Fatalf("digest ended %s, want sent", o.Status)
	}
	m, err := g.st.SandboxLookup(id)
	if err != nil {
		t.Fatal(err)
	}
	if m.To != "team" || !strings.Contains(m.Text, "1 draft waits for approval (Acme Ltd); the oldest has waited 10m.") ||
		!strings.Contains(m.Text, link(acme.ID)) || strings.Contains(m.Text, bolt.ID) || strings.Contains(m.Text, "Bob") {
		t.Fatalf("acme's digest to %q:\n%s\nwant Ada's draft alone", m.To, m.Text)
	}
}

// TestDigestNothingWaiting: a schedule that fires on an empty queue
// enqueues nothing and sends nothing.
func TestDigestNothingWaiting(t *testing.T) {
	cfg := digestConfig(t, "digests:\n  - {name: daily, to: sandbox, schedule: \"@daily\"}\n")
	st := openStore(t)
	m := &Maintenance{Store: st, Config: cfg, Log: discardLogger(), Now: func() time.Time { return dt0 }}
	if err := m.ScheduledDigest(context.Background(), "daily"); err != nil {
		t.Fatal(err)
	}
	if digests, _ := digestJobs(t, st, "daily"); len(digests) != 0 {
		t.Fatalf("%d digest jobs for an empty queue, want none", len(digests))
	}
}

// TestDigestSlackTextVerbatim: a Slack digest quotes what the customer
// wrote as written, escaped once: by the Slack provider, for every message
// it posts (provider's TestSlackEscapesControlCharacters), not here too.
func TestDigestSlackTextVerbatim(t *testing.T) {
	cfg, err := config.Parse([]byte("base_url: "+digestBase+`
providers:
  - {name: team, kind: slack, token_env: SLACK}
digests:
  - {name: s, to: team, address: "#approvals", schedule: "@daily"}
`), func(string) string { return "xoxb-test" })
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	waiting(t, st, "demo", "<!here>", "<!channel> call me & <https://evil.example|click>", dt0)
	err = st.View(func(tx *store.Tx) error {
		w, err := tx.WaitingDrafts(nil, digestLines)
		if err != nil {
			return err
		}
		text, err := digestText(tx, cfg, cfg.Digests[0], w, dt0.Add(time.Hour), "at-x")
		if err != nil {
			return err
		}
		if strings.Contains(text, "&lt;") || !strings.Contains(text, "<!channel> call me & <https://evil.example|click>") || !strings.Contains(text, "- <!here> (demo") {
			t.Errorf("slack digest text:\n%s\nwant the customer's words as written (the provider escapes)", text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAge: waits read as people say them.
func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second: "<1m", 45 * time.Minute: "45m", 2*time.Hour + 15*time.Minute: "2h15m",
		3 * time.Hour: "3h", 76 * time.Hour: "3d4h",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
}

// seedWaiting stores n waiting drafts, a minute apart from at, on the
// channels in turn, in one transaction.
func seedWaiting(b testing.TB, st *store.Store, n int, at time.Time, channels ...string) {
	b.Helper()
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		for i := range n {
			id, ch := ulid.Make().String(), channels[i%len(channels)]
			key := ch + ":m-" + id
			e, err := store.EncodeEvent(store.Event{
				ID: id, Key: key, Channel: ch, MessageID: "m-" + id, CorrelationID: ulid.Make().String(),
				ConversationID: "conv-" + id, Contact: "+15550001234", Name: "Ada", Text: "hello there", ReceivedAt: at,
			}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: 3, RunAt: at.Add(1000 * time.Hour)})
			if err != nil {
				return err
			}
			rec, err := leads.RecordTx(tx, e)
			if err != nil {
				return err
			}
			d := store.Draft{ID: store.DraftID(id), EventKey: key, CorrelationID: rec.Event.CorrelationID, Channel: ch,
				ConversationID: rec.Event.ConversationID, Status: store.DraftPending, Text: "ok", Drafter: "template",
				PromptVersion: "v1", CreatedAt: at.Add(time.Duration(i) * time.Minute), Version: 1, Answers: []string{key}}
			if err := tx.InsertDraft(&d, rec.Event); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDigest measures, with 5,000 waiting drafts, the minutely
// threshold check (a read that changes nothing) and the digest's read of
// the queue, for every client and for one of two clients.
func BenchmarkDigest(b *testing.B) {
	cfg, err := config.Parse([]byte("base_url: "+digestBase+`
clients: [{id: acme}, {id: bolt}]
channels:
  - {name: acme-web, client: acme, fields: {message_id: /id}}
  - {name: bolt-web, client: bolt, fields: {message_id: /id}}
digests:
  - {name: all, to: sandbox, oldest_after: 30m}
  - {name: bolt, to: sandbox, client: bolt, oldest_after: 30m}
`), nil)
	if err != nil {
		b.Fatal(err)
	}
	st := testkit.OpenStore(b, "")
	seedWaiting(b, st, 5000, dt0, "acme-web", "bolt-web")
	m := &Maintenance{Store: st, Config: cfg, Log: discardLogger(), Now: func() time.Time { return dt0.Add(time.Hour) }}
	if err := m.CheckDigests(context.Background()); err != nil { // the crossing, once
		b.Fatal(err)
	}
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if err := m.CheckDigests(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, dg := range cfg.Digests {
		b.Run("text/"+dg.Name, func(b *testing.B) {
			for b.Loop() {
				err := st.View(func(tx *store.Tx) error {
					w, err := tx.WaitingDrafts(digestKeep(cfg, dg), digestLines)
					if err == nil {
						_, err = digestText(tx, cfg, dg, w, dt0.Add(time.Hour), "at-x")
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDigestPrunedWithAlerts: retention deletes a sent digest's row with
// its digest and delivery jobs (they share the row's id as their key), as
// it does a stuck-lead alert's, and the file still checks.
func TestDigestPrunedWithAlerts(t *testing.T) {
	cfg := digestConfig(t, "digests:\n  - {name: daily, to: sandbox, schedule: \"@daily\"}\n")
	clock := testkit.NewClock(dt0)
	g := startDigestRig(t, t.TempDir(), cfg, clock)
	defer g.stop(t)
	waiting(t, g.st, "demo", "Ada", "hello", dt0.Add(-time.Hour))
	if err := g.maint.ScheduledDigest(context.Background(), "daily"); err != nil {
		t.Fatal(err)
	}
	id := delivery.DigestID("daily", "at-20260601T0900Z")
	if o := waitSettled(t, g.st, id); o.Status != store.OutboxSent {
		t.Fatalf("digest ended %s, want sent", o.Status)
	}
	digests, deliveries := digestJobs(t, g.st, "daily")
	for _, j := range append(digests, deliveries...) {
		testkit.WaitJob(t, g.st, j.ID, store.JobCompleted)
	}
	if _, err := g.st.PruneOutside(context.Background(), dt0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.st.OutboxRow(id); err == nil {
		t.Errorf("digest row %s survived retention", id)
	}
	if digests, deliveries := digestJobs(t, g.st, "daily"); len(digests)+len(deliveries) != 0 {
		t.Errorf("retention left %d digest and %d delivery jobs", len(digests), len(deliveries))
	}
}
