package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// What lies below handoff's own retries can resend too: Go's http.Transport
// replays a request by itself when a reused keep-alive connection dies
// before the first answer byte, and a POST with an Idempotency-Key header
// counts as replayable. These tests put a real net/http provider outside
// the binary, over real keep-alive connections, and count every POST it
// receives against the attempts the outbox rows record.

// rsProvider is an outside provider of kind http in the test process, a
// real net/http server (not httptest's client) so that handoff's transport
// keeps and reuses its connections. (Not the kit's testkit/standin: it
// counts the requests per connection and stores a message later than it
// received it, which is what these tests are about.) Every POST it reads whole is recorded;
// the message is stored (visible to GET /messages/{ref}) storeAfter later,
// and answered with {"id":…} hold after receipt, unless dropReused is set
// and the request came on a connection that had already carried one: then
// the connection is hijacked and closed without an answer, the provider
// having accepted the message. With dedupe, a repeated Idempotency-Key is
// answered with the first id and is no second message.
type rsProvider struct {
	url        string
	dropReused bool
	dedupe     bool
	storeAfter time.Duration
	hold       time.Duration // >= storeAfter

	mu       sync.Mutex
	seq      int
	posts    []*rsPost
	byKey    map[string]string   // dedupe: the first id per Idempotency-Key
	stored   map[string]string   // what a lookup finds: the first stored id per client_ref
	lookedUp map[string][]string // ids a lookup answered, per client_ref
	notFound int                 // lookups answered 404
	holding  int                 // POSTs received and not yet answered or dropped
}

// rsPost is one POST the provider read whole.
type rsPost struct {
	Ref      string // client_ref of the body
	Key      string // Idempotency-Key
	ID       string // the id the provider gave it (the first one, for a deduplicated repeat)
	Reused   bool   // it came on a connection that had carried a request before
	Repeat   bool   // dedupe: the key was seen before, so this is no second message
	Dropped  bool   // the connection was closed instead of answering
	Answered bool   // the provider wrote its answer
}

// rsConnKey holds, in a request's context, the number of requests its
// connection has carried.
type rsConnKey struct{}

func newRSProvider(t *testing.T, dropReused, dedupe bool, storeAfter, hold time.Duration) *rsProvider {
	t.Helper()
	p := &rsProvider{dropReused: dropReused, dedupe: dedupe, storeAfter: storeAfter, hold: max(hold, storeAfter),
		byKey: map[string]string{}, stored: map[string]string{}, lookedUp: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /send", p.send)
	mux.HandleFunc("GET /messages/{ref}", p.lookup)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, rsConnKey{}, new(atomic.Int64))
		},
	}
	go func() { _ = srv.Serve(ln) }()
	// Close does not wait for handlers still holding a request; they only
	// touch the provider's own state.
	t.Cleanup(func() { _ = srv.Close() })
	p.url = "http://" + ln.Addr().String()
	return p
}

func (p *rsProvider) send(w http.ResponseWriter, r *http.Request) {
	n := r.Context().Value(rsConnKey{}).(*atomic.Int64).Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // never read whole: not accepted
	}
	var m struct {
		Ref string `json:"client_ref"`
	}
	_ = json.Unmarshal(body, &m)
	post := &rsPost{Ref: m.Ref, Key: r.Header.Get("Idempotency-Key"), Reused: n > 1}
	p.mu.Lock()
	if p.dedupe && post.Key != "" {
		post.ID, post.Repeat = p.byKey[post.Key]
	}
	if !post.Repeat {
		p.seq++
		post.ID = fmt.Sprintf("rmt-%d", p.seq)
		if p.dedupe && post.Key != "" {
			p.byKey[post.Key] = post.ID
		}
	}
	p.posts = append(p.posts, post)
	p.holding++
	p.mu.Unlock()

	// The provider's own processing time, not a wait for a condition: a
	// kill can land while a send is in flight, and a slow provider stores
	// what it accepted only after handoff has given up waiting.
	time.Sleep(p.storeAfter)
	p.mu.Lock()
	if _, ok := p.stored[post.Ref]; !ok && post.Ref != "" {
		p.stored[post.Ref] = post.ID
	}
	p.mu.Unlock()
	time.Sleep(p.hold - p.storeAfter)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding--
	if p.dropReused && post.Reused {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			post.Dropped = true
			_ = conn.Close()
			return
		}
	}
	post.Answered = true
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"id": post.ID})
}

func (p *rsProvider) lookup(w http.ResponseWriter, r *http.Request) {
	r.Context().Value(rsConnKey{}).(*atomic.Int64).Add(1)
	ref := r.PathValue("ref")
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.stored[ref]
	if !ok {
		p.notFound++
		http.Error(w, `{"error":"no such message"}`, http.StatusNotFound)
		return
	}
	p.lookedUp[ref] = append(p.lookedUp[ref], id)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "status": "sent"})
}

// rsSeen is a copy of what the provider saw.
type rsSeen struct {
	posts    []rsPost
	byRef    map[string][]rsPost
	lookedUp map[string][]string
	notFound int
	holding  int
}

func (p *rsProvider) seen() rsSeen {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := rsSeen{byRef: map[string][]rsPost{}, lookedUp: map[string][]string{}, notFound: p.notFound, holding: p.holding}
	for _, post := range p.posts {
		s.posts = append(s.posts, *post)
		s.byRef[post.Ref] = append(s.byRef[post.Ref], *post)
	}
	for ref, ids := range p.lookedUp {
		s.lookedUp[ref] = slices.Clone(ids)
	}
	return s
}

// effects is how many messages the provider delivered for ref: every POST,
// except that with dedupe all POSTs with one Idempotency-Key are one.
func (s rsSeen) effects(ref string, dedupe bool) int {
	n := 0
	for _, post := range s.byRef[ref] {
		if !dedupe || !post.Repeat {
			n++
		}
	}
	return n
}

// rsConfig is an instance whose demo channel auto-approves to the outside
// provider at base, with the given provider keys, on 2 workers.
func rsConfig(base, providerKeys, retry string) string {
	return fmt.Sprintf(`workers: 2
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: remote
    auto_approve: true
    coalesce: 0s # one message a lead: no turn to wait for
providers:
  - name: remote
    kind: http
    url: %s/send
%sretry: %s
`, base, providerKeys, retry)
}

// rsPostHooks delivers n new messages of the corpus, each from its own
// lead, and returns
// their event keys.
func rsPostHooks(t *testing.T, inst *instance, prefix string, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for k := range n {
		id := fmt.Sprintf("%s-%02d", prefix, k)
		conv := fmt.Sprintf("+1555060%04d", k)
		keys[k] = "demo:" + id
		inst.mustPostBody(corpus.Message(k, id, conv, conv)) // mixed layouts and texts
	}
	return keys
}

// rsSettle waits until every key's reply row is sent, failed or
// needs_reconciliation and its jobs have ended, and returns the rows.
func rsSettle(t *testing.T, inst *instance, keys []string, within time.Duration) map[string]dlvOutbox {
	t.Helper()
	rows := map[string]dlvOutbox{}
	last := map[string]int{}
	settled := func(key string) bool {
		var tl dlvTimeline
		if code, err := dlvGet(inst, "/api/v1/events/"+url.PathEscape(key), &tl); err != nil || code != http.StatusOK {
			t.Fatalf("GET event %s: %d %v", key, code, err)
		}
		if tl.Outbox == nil {
			last["no row"]++
			return false
		}
		if !rsFinal(tl.Outbox.Status) {
			last[tl.Outbox.Status]++
			return false
		}
		// The row is final a moment before its job records its end.
		for _, j := range tl.Jobs {
			if j.State != jobCompleted && j.State != jobDiscarded && j.State != jobCancelled {
				last[tl.Outbox.Status+" (job "+j.State+")"]++
				return false
			}
		}
		var row dlvOutbox
		if code, err := dlvGet(inst, dlvOutboxPath(tl.Outbox.ID), &row); err != nil || code != http.StatusOK {
			t.Fatalf("GET outbox %s: %d %v", tl.Outbox.ID, code, err)
		}
		rows[key] = row
		return true
	}
	err := proc.Eventually(t.Context(), within, func() (bool, error) {
		clear(last)
		for _, key := range keys {
			if _, done := rows[key]; !done {
				settled(key)
			}
		}
		return len(rows) == len(keys), nil
	})
	if err != nil {
		t.Fatalf("waiting for the replies to settle: %v: %d settled, the others %s", err, len(rows), rsCount(last))
	}
	return rows
}

func rsFinal(status string) bool {
	return status == "sent" || status == "failed" || status == "needs_reconciliation"
}

// rsSends counts a row's attempts that may have reached the provider: send
// and resend, except those that provably never left (not_sent).
func rsSends(row dlvOutbox) int {
	n := 0
	for _, a := range row.Attempts {
		if (a.Action == "send" || a.Action == "resend") && a.Outcome != "not_sent" {
			n++
		}
	}
	return n
}

// rsSteps says "send:ambiguous,lookup:sent".
func rsSteps(row dlvOutbox) string {
	var steps []string
	for _, a := range row.Attempts {
		steps = append(steps, a.Action+":"+a.Outcome)
	}
	return strings.Join(steps, ",")
}

// rsPosts says "rmt-3 dropped, rmt-5 answered".
func rsPosts(posts []rsPost) string {
	if len(posts) == 0 {
		return "none"
	}
	var parts []string
	for _, post := range posts {
		what := "held"
		switch {
		case post.Dropped:
			what = "dropped"
		case post.Answered:
			what = "answered"
		}
		if post.Repeat {
			what += " (repeat)"
		}
		parts = append(parts, post.ID+" "+what)
	}
	return strings.Join(parts, ", ")
}

// rsCount says "12 sent, 8 needs_reconciliation".
func rsCount(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

// TestResendAfterDroppedReusedConnection delivers a batch of replies to an
// outside provider that accepts every POST and then closes, unanswered,
// each connection that had already carried a request; for each way
// handoff may resolve a lost answer (resend with the key, lookup, neither),
// once undisturbed and once with two SIGKILLs of the server mid-send. No
// message may be delivered twice, every row must end in a state that is
// true, and every POST the provider received must be an attempt on its row
// (or the attempt a SIGKILL cut short): a resend by the transport below
// handoff is a POST that no attempt records.
func TestResendAfterDroppedReusedConnection(t *testing.T) {
	const (
		n       = 20
		workers = 2 // rsConfig's
	)
	setups := []struct {
		name   string
		keys   string // provider keys beyond name, kind and url
		dedupe bool
	}{
		{name: "key", keys: "    supports_idempotency_key: true\n    timeout: 5s\n", dedupe: true},
		{name: "lookup", keys: "    lookup_url: \"%s/messages/{ref}\"\n    lookup_settle: 1s\n    timeout: 5s\n"},
		{name: "neither", keys: "    timeout: 5s\n"},
	}
	for _, su := range setups {
		for _, kills := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/kills=%d", su.name, kills), func(t *testing.T) {
				// Held a little while in flight, so that a kill lands on a
				// send the provider already has.
				hold := 20 * time.Millisecond
				if kills > 0 {
					hold = 150 * time.Millisecond
				}
				p := newRSProvider(t, true, su.dedupe, 0, hold)
				keys := strings.ReplaceAll(su.keys, "%s", p.url)
				inst := startInstance(t, rsConfig(p.url, keys, "{max_attempts: 20, base_delay: 50ms, max_delay: 200ms}"))
				events := rsPostHooks(t, inst, "rs-"+su.name, n)

				for k := range kills {
					// Each kill waits for progress since the last restart and
					// for a POST the provider holds: a send in flight that the
					// provider has already accepted.
					before := len(p.seen().posts)
					testkit.Eventually(t, 30*time.Second, func() bool {
						s := p.seen()
						return len(s.posts) >= before+n/5 && s.holding > 0
					}, fmt.Sprintf("kill %d: a POST in flight after %d more", k+1, n/5))
					inst.kill()
					inst.restart()
				}
				rows := rsSettle(t, inst, events, 60*time.Second)
				s := p.seen()

				var (
					states                                  = map[string]int{}
					doubles, dropped, recorded, cut, unsure int
				)
				for _, post := range s.posts {
					if post.Dropped {
						dropped++
					}
				}
				for _, key := range events {
					row := rows[key]
					posts := s.byRef[row.ID]
					states[row.Status]++
					if e := s.effects(row.ID, su.dedupe); e > 1 {
						doubles++
						t.Errorf("%s: the provider delivered %s %d times (POSTs: %s); want once", key, row.ID, e, rsPosts(posts))
					}
					for _, post := range posts {
						if su.dedupe && post.Key != row.ID {
							t.Errorf("%s: a POST of %s carried Idempotency-Key %q; want the outbox id", key, row.ID, post.Key)
						}
					}

					// Every POST the provider received is an attempt on the
					// row, or one a SIGKILL cut short before it was recorded.
					sends := rsSends(row)
					recorded += sends
					switch extra := len(posts) - sends; {
					case extra < 0 || (kills == 0 && extra != 0) || extra > kills:
						t.Errorf("%s: the provider received %d POSTs of %s, the row records %d send/resend attempts (%s), with %d kills; want them equal (each kill may cut one short)",
							key, len(posts), row.ID, sends, rsSteps(row), kills)
					default:
						cut += extra
					}

					// The row's state is true to what the provider saw.
					answered := map[string]bool{}
					lost := false
					for _, post := range posts {
						if post.Answered {
							answered[post.ID] = true
						}
						lost = lost || post.Dropped
					}
					for _, id := range s.lookedUp[row.ID] {
						answered[id] = true
					}
					switch row.Status {
					case "sent":
						if row.ProviderID == "" || !answered[row.ProviderID] {
							t.Errorf("%s: row sent as %q (%s), but the provider neither answered a POST of %s with that id nor had it looked up (POSTs: %s; lookups found %v)",
								key, row.ProviderID, rsSteps(row), row.ID, rsPosts(posts), s.lookedUp[row.ID])
						}
						if su.name == "neither" && lost {
							t.Errorf("%s: row sent (%s) though the provider dropped the answer to %s and can neither deduplicate nor look it up", key, rsSteps(row), row.ID)
						}
					case "needs_reconciliation":
						switch {
						case su.name != "neither":
							t.Errorf("%s: row needs_reconciliation (%s, %s); want sent: the provider can resolve a lost answer", key, rsSteps(row), row.Note)
						case lost:
						case kills > 0:
							unsure++ // a send the kill cut short: only a person can say
						default:
							t.Errorf("%s: row needs_reconciliation (%s, %s) though the provider answered every POST of %s (%s)", key, rsSteps(row), row.Note, row.ID, rsPosts(posts))
						}
					default:
						t.Errorf("%s: row %s (%s, %s); want sent or, where the answer was lost and nothing can resolve it, needs_reconciliation", key, row.Status, rsSteps(row), row.Note)
					}
				}
				if cut > workers*kills {
					t.Errorf("%d POSTs recorded by no attempt; at most %d (%d workers, %d kills) can have been cut short by a kill", cut, workers*kills, workers, kills)
				}
				if unsure > workers*kills {
					t.Errorf("%d rows need reconciliation without a dropped answer; at most %d sends can have been cut short by %d kills", unsure, workers*kills, kills)
				}
				if dropped == 0 {
					t.Errorf("the provider dropped no reused connection (%d POSTs): handoff reused none, so this run proves nothing", len(s.posts))
				}
				t.Logf("%s, %d kills: %d messages, %d POSTs (%d dropped on a reused connection), %d lookups (%d not found), %d delivered twice; rows %s; %d send/resend attempts recorded, %d POSTs cut short by a kill, %d rows unresolved by a kill",
					su.name, kills, n, len(s.posts), dropped, rsLookups(s), s.notFound, doubles, rsCount(states), recorded, cut, unsure)
				inst.stopCleanly()
			})
		}
	}
}

// rsLookups is how many lookups the provider answered, found or not.
func rsLookups(s rsSeen) int {
	n := s.notFound
	for _, ids := range s.lookedUp {
		n += len(ids)
	}
	return n
}

// TestSlowProviderWithLookup delivers 20 replies to a provider that stores
// each message 1.5s after the request and answers after that, with
// handoff's timeout at 300ms and retries 100ms apart: the lookups that
// follow the timeouts find nothing at first, and that "not found" must not
// count as "not sent" until lookup_settle has passed since the send, or
// every early lookup would send the message a second time.
func TestSlowProviderWithLookup(t *testing.T) {
	const (
		n     = 20
		delay = 1500 * time.Millisecond
	)
	p := newRSProvider(t, false, false, delay, delay)
	inst := startInstance(t, rsConfig(p.url,
		fmt.Sprintf("    lookup_url: \"%s/messages/{ref}\"\n    timeout: 300ms\n    lookup_settle: %s\n", p.url, 3*delay),
		"{max_attempts: 8, base_delay: 100ms, max_delay: 1s}"))
	start := time.Now()
	events := rsPostHooks(t, inst, "slow", n)
	rows := rsSettle(t, inst, events, 60*time.Second)
	took := time.Since(start)
	s := p.seen()

	states, paths := map[string]int{}, map[string]int{}
	doubles, recorded := 0, 0
	for _, key := range events {
		row := rows[key]
		posts := s.byRef[row.ID]
		states[row.Status]++
		paths[rsSteps(row)]++
		if len(posts) > 1 {
			doubles++
		}
		sends := rsSends(row)
		recorded += sends
		if len(posts) != 1 {
			t.Errorf("%s: the provider received %d POSTs of %s (%s); want exactly 1", key, len(posts), row.ID, rsSteps(row))
			continue
		}
		if sends != 1 {
			t.Errorf("%s: the row records %d send attempts (%s); the provider received 1", key, sends, rsSteps(row))
		}
		if row.Status != "sent" || row.ProviderID != posts[0].ID {
			t.Errorf("%s: row %s as %q (%s, %s); want sent as %q, the id the provider stored",
				key, row.Status, row.ProviderID, rsSteps(row), row.Note, posts[0].ID)
		}
	}
	if s.notFound == 0 {
		t.Errorf("no lookup came before the provider had stored a message: the race this test is about did not happen")
	}
	t.Logf("slow provider (stores after %v, timeout 300ms, lookup_settle %v): %d messages, %d POSTs, %d lookups (%d not found yet), %d delivered twice; rows %s; %d send attempts recorded; attempts %s; %.1fs",
		delay, 3*delay, n, len(s.posts), rsLookups(s), s.notFound, doubles, rsCount(states), recorded, rsCount(paths), took.Seconds())
	inst.stopCleanly()
}
