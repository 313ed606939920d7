package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/testkit/corpus"
)

const (
	// startTimeout bounds how long a process may take to log its address and
	// answer /readyz; opening bbolt and releasing leases takes milliseconds,
	// so this only matters when something is badly wrong.
	startTimeout = 20 * time.Second
	// logTail is how many lines of each run's output a failing test prints;
	// the whole output stays in a kept log file.
	logTail = 100
)

// TestMain removes the binary that the first test built (proc.Binary).
func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBinary()
	os.Exit(code)
}

// requireBinary stops a test that cannot run (skipped under -short, failed
// with the build output when the binary did not build) and returns the
// binary, built once for the package.
func requireBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: starts the real binary; skipped with -short")
	}
	bin, err := proc.Binary()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return bin
}

// instance is one handoff installation under test. The data folder, config
// file and API token outlive any single process, so a test can kill the
// process and start another one on the same files.
//
// Requests may be sent from many goroutines, but start, kill and stop must
// not run concurrently with them: they change which process is current.
type instance struct {
	t       *testing.T
	files   *proc.Instance
	dataDir string
	token   string
	log     *os.File // every run's output, kept when the test fails
	client  *http.Client
}

// startInstance starts handoff on a fresh data folder, with configYAML (if not
// empty) written to a file passed with --config, and waits until /readyz says
// the store is writable. extraEnv ("NAME=value", such as a fault hook) goes
// to this first run only; restart starts later runs without it. Everything is
// torn down when the test ends; the process output is printed when the test
// failed.
func startInstance(t *testing.T, configYAML string, extraEnv ...string) *instance {
	t.Helper()
	return startInstanceIn(t, "", configYAML, extraEnv...)
}

// startInstanceIn is startInstance in the installation folder dir ("" for
// a fresh temporary one), such as a small disk of the test's own.
func startInstanceIn(t *testing.T, dir, configYAML string, extraEnv ...string) *instance {
	t.Helper()
	bin := requireBinary(t)
	if dir == "" {
		dir = t.TempDir()
	}

	logDir, err := os.MkdirTemp("", "handoff-e2e-"+sanitize(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(logDir, "handoff.log"))
	if err != nil {
		t.Fatal(err)
	}
	token := randomHex(t, 24)
	inst := &instance{
		t: t,
		files: &proc.Instance{
			Binary: bin,
			Dir:    dir,
			Config: configYAML,
			// An admin password of our own, so that none is generated and printed.
			Env:    []string{"HANDOFF_API_TOKEN=" + token, "HANDOFF_ADMIN_PASSWORD=" + randomHex(t, 12)},
			Log:    log,
			Within: startTimeout,
		},
		token: token,
		log:   log,
		client: &http.Client{
			// A hung server must fail the test, not hang it.
			Timeout: 20 * time.Second,
			Transport: &http.Transport{
				// Load tests open many connections at once; keep them rather
				// than churning through ephemeral ports.
				MaxIdleConnsPerHost: 128,
			},
		},
	}
	inst.dataDir = inst.files.Data()
	// Registered after t.TempDir, so it runs before the data folder is
	// removed: a live process would otherwise keep writing into it.
	t.Cleanup(inst.cleanup)
	inst.start(extraEnv)
	return inst
}

// cur is the most recently started process.
func (i *instance) cur() *proc.Process { return i.files.Current() }

// restart starts a new process on the same data folder and config; the
// previous one must have exited.
func (i *instance) restart() {
	i.t.Helper()
	i.start(nil)
}

// start runs the binary once more on the instance's files, with extraEnv
// added to its environment, and waits until it is ready and healthy.
func (i *instance) start(extraEnv []string) {
	t := i.t
	t.Helper()
	p, err := i.files.Start(t.Context(), extraEnv...)
	if err != nil {
		t.Fatalf("handoff %v", err)
	}
	if code, err := i.status("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("handoff run %d: GET /healthz = %d, %v; want 200 once ready", p.Number(), code, err)
	}
}

// kill sends SIGKILL to the current process and waits until it is gone: the
// crash that nothing in-process can imitate.
func (i *instance) kill() {
	i.t.Helper()
	if err := i.cur().Kill(); err != nil {
		i.t.Fatalf("run %d: %v", i.cur().Number(), err)
	}
	i.client.CloseIdleConnections()
}

// stop sends SIGTERM to the current process and waits up to within for it to
// exit, killing it after that; it is nil only for exit status 0.
func (i *instance) stop(within time.Duration) error {
	err := i.cur().Stop(within)
	i.client.CloseIdleConnections()
	return err
}

// stopCleanly ends a test's last run with SIGTERM and insists on exit 0: a
// clean shutdown is part of the contract of every test, not only the SIGTERM one.
func (i *instance) stopCleanly() {
	i.t.Helper()
	// A client like ours keeps connections it dialed but never used, and
	// http.Server.Shutdown waits up to 5s for such "new" connections; hang up
	// first so a quiet stop is quick. (The SIGTERM-under-load test does not.)
	i.client.CloseIdleConnections()
	if err := i.stop(30 * time.Second); err != nil {
		i.t.Errorf("run %d: %v; want exit status 0 after SIGTERM", i.cur().Number(), err)
	}
}

// cleanup kills whatever still runs and, when the test failed, prints the tail
// of every run's output and keeps the full log.
func (i *instance) cleanup() {
	if p := i.cur(); p != nil {
		_ = p.Kill()
	}
	i.client.CloseIdleConnections()
	_ = i.log.Close()
	if !i.t.Failed() {
		os.RemoveAll(filepath.Dir(i.log.Name()))
		return
	}
	for _, p := range i.files.Runs() {
		i.t.Logf("---- handoff run %d (%s), last %d lines of output:\n%s", p.Number(), p.Exit(), logTail, p.Tail(logTail))
	}
	i.t.Logf("full output of every run kept in %s", i.log.Name())
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
}

// ---- HTTP: the contract as the tests see it ----

// hookReply is the body of an answer from POST /hooks/{channel}.
type hookReply struct {
	Status        string `json:"status"`
	EventKey      string `json:"event_key"`
	CorrelationID string `json:"correlation_id"`
	Error         string `json:"error"`
}

// hookResult is what came back for one webhook delivery. A transport error
// (the process died, the connection broke) is returned separately by
// postHook, never as a hookResult.
type hookResult struct {
	code      int
	reply     hookReply
	raw       string
	decodeErr error
}

func (r hookResult) String() string {
	return fmt.Sprintf("%d %s", r.code, strings.TrimSpace(r.raw))
}

// eventView is GET /api/v1/events/{key}. Only the fields the tests assert on
// are declared; the timeline carries more (outbox, handoff) that is ignored.
type eventView struct {
	Event struct {
		ID             string `json:"id"`
		Key            string `json:"key"`
		Channel        string `json:"channel"`
		MessageID      string `json:"message_id"`
		CorrelationID  string `json:"correlation_id"`
		ConversationID string `json:"conversation_id"`
		Contact        string `json:"contact"`
		Name           string `json:"name"`
		Text           string `json:"text"`
		Duplicates     int    `json:"duplicates"`
		// Body is the body as stored (a JSON body as JSON).
		Body json.RawMessage `json:"body"`
	} `json:"event"`
	Jobs  []jobView  `json:"jobs"`
	Draft *draftView `json:"draft"`
}

type jobView struct {
	ID          string        `json:"id"`
	Kind        string        `json:"kind"`
	Key         string        `json:"key"`
	State       string        `json:"state"`
	Attempt     int           `json:"attempt"`
	MaxAttempts int           `json:"max_attempts"`
	LastError   string        `json:"last_error"`
	Attempts    []attemptView `json:"attempts"`
}

type attemptView struct {
	ExecutionID string `json:"execution_id"`
	Number      int    `json:"number"`
	StartedAt   string `json:"started_at"`
	EndedAt     string `json:"ended_at"`
	Outcome     string `json:"outcome"`
	Error       string `json:"error"`
}

type draftView struct {
	ID          string `json:"id"`
	EventKey    string `json:"event_key"`
	Status      string `json:"status"`
	Text        string `json:"text"`
	ExecutionID string `json:"execution_id"`
}

// status is the status code of GET path on the current process.
func (i *instance) status(path string) (int, error) {
	resp, err := i.client.Get(i.cur().URL() + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// demoBody is the corpus body postHook sends for id: its own layout and
// text of the corpus (chosen by id, so every call agrees), the id, and a
// conversation of its own, "conv-"+id.
func demoBody(id string) corpus.Body {
	h := fnv.New32a()
	h.Write([]byte(id))
	return corpus.Message(int(h.Sum32()%72), id, "conv-"+id, "")
}

// postHook delivers one demo-channel message with the given provider id.
// Each message is its own lead (conversation): these tests count one draft
// per message; the turn tests (turns_test.go) send bursts of one lead.
func (i *instance) postHook(id string) (hookResult, error) {
	return i.postBody(demoBody(id))
}

// postBody delivers one demo-channel corpus body.
func (i *instance) postBody(b corpus.Body) (hookResult, error) {
	resp, err := i.client.Post(i.cur().URL()+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
	if err != nil {
		return hookResult{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		// The status line came back but the body did not: still a broken
		// transport, and the server may or may not have committed.
		return hookResult{}, fmt.Errorf("reading %d response: %w", resp.StatusCode, err)
	}
	res := hookResult{code: resp.StatusCode, raw: string(raw)}
	res.decodeErr = json.Unmarshal(raw, &res.reply)
	return res, nil
}

// mustPostBody delivers b and insists on 202 accepted.
func (i *instance) mustPostBody(b corpus.Body) hookResult {
	i.t.Helper()
	res, err := i.postBody(b)
	if err != nil || res.code != http.StatusAccepted || res.reply.Status != "accepted" {
		i.t.Fatalf("POST /hooks/demo %s (%s): %s, %v; want 202 accepted", b.Want.MessageID, b.Name(), res, err)
	}
	return res
}

// errNoEvent is event's answer to a 404.
var errNoEvent = errors.New("event not found (404)")

// event fetches one event's timeline with the API token.
func (i *instance) event(key string) (eventView, error) {
	var v eventView
	req, err := http.NewRequest(http.MethodGet, i.cur().URL()+"/api/v1/events/"+url.PathEscape(key), nil)
	if err != nil {
		return v, err
	}
	req.Header.Set("Authorization", "Bearer "+i.token)
	resp, err := i.client.Do(req)
	if err != nil {
		return v, fmt.Errorf("GET event %s: %w", key, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return v, fmt.Errorf("GET event %s: %w", key, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return v, fmt.Errorf("GET event %s: %w", key, errNoEvent)
	default:
		return v, fmt.Errorf("GET event %s: %d %s", key, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("GET event %s: decoding %s: %w", key, raw, err)
	}
	return v, nil
}

// events fetches many timelines with a few parallel requests, so that polling
// hundreds of events stays well inside a poll interval or two. The error, if
// any, counts the failures and quotes the first.
func (i *instance) events(keys []string) (map[string]eventView, error) {
	const parallel = 8
	var (
		mu     sync.Mutex
		out    = make(map[string]eventView, len(keys))
		failed []error
		wg     sync.WaitGroup
		next   = make(chan string)
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range next {
				v, err := i.event(key)
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					out[key] = v
				}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	if len(failed) > 0 {
		return out, fmt.Errorf("%d of %d event lookups failed; first: %w", len(failed), len(keys), failed[0])
	}
	return out, nil
}

// delivery is one webhook delivery and what came of it.
type delivery struct {
	id  string
	res hookResult
	err error // transport error: no answer at all
}

// postHooks delivers ids with a few parallel senders and returns the outcomes
// in the order of ids.
func (i *instance) postHooks(ids []string) []delivery {
	const parallel = 8
	out := make([]delivery, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				res, err := i.postHook(ids[n])
				out[n] = delivery{id: ids[n], res: res, err: err}
			}
		}()
	}
	for n := range ids {
		next <- n
	}
	close(next)
	wg.Wait()
	return out
}

// checkReply checks one webhook answer against the contract and returns its
// correlation id.
func checkReply(t *testing.T, d delivery, wantCode int, wantStatus string) string {
	t.Helper()
	key := "demo:" + d.id
	r := d.res
	switch {
	case d.err != nil:
		t.Errorf("delivery of %s: %v; want %d %s", d.id, d.err, wantCode, wantStatus)
	case r.code != wantCode || r.decodeErr != nil || r.reply.Status != wantStatus:
		t.Errorf("delivery of %s: got %s; want %d {\"status\":%q,...}", d.id, r, wantCode, wantStatus)
	case r.reply.EventKey != key:
		t.Errorf("delivery of %s: event_key %q, want %q", d.id, r.reply.EventKey, key)
	case !ulidRE.MatchString(r.reply.CorrelationID):
		t.Errorf("delivery of %s: correlation_id %q is not a ULID", d.id, r.reply.CorrelationID)
	}
	return r.reply.CorrelationID
}

// checkEvent checks the stored event against what the demo channel was
// sent for id by postHook.
func checkEvent(t *testing.T, id string, v eventView, wantCorrelation string, wantDuplicates int) {
	t.Helper()
	e := v.Event
	key := "demo:" + id
	if e.Key != key || e.Channel != "demo" || e.MessageID != id {
		t.Errorf("event %s: key %q channel %q message_id %q; want %q, %q, %q", key, e.Key, e.Channel, e.MessageID, key, "demo", id)
	}
	checkBodyRead(t, demoBody(id), v)
	if e.CorrelationID != wantCorrelation {
		t.Errorf("event %s: correlation id %q, but the webhook answered %q: one event, one correlation id", key, e.CorrelationID, wantCorrelation)
	}
	if e.Duplicates != wantDuplicates {
		t.Errorf("event %s: duplicates = %d, want %d", key, e.Duplicates, wantDuplicates)
	}
}

// checkBodyRead checks that the API shows the corpus body b's event with
// exactly its contact, name, text and conversation, and its body as the
// document sent.
func checkBodyRead(t *testing.T, b corpus.Body, v eventView) {
	t.Helper()
	e, w := v.Event, b.Want
	if e.Contact != w.Contact || e.Name != w.Name || e.Text != w.Text || e.ConversationID != w.Conversation {
		t.Errorf("event demo:%s (%s): contact %q name %q text %q conversation %q;\nwant the delivered %q, %q, %q, %q",
			w.MessageID, b.Name(), e.Contact, e.Name, e.Text, e.ConversationID, w.Contact, w.Name, w.Text, w.Conversation)
	}
	if !sameJSON(e.Body, b.Raw) {
		t.Errorf("event demo:%s (%s): the body shown is not the document sent:\n%s\nsent:\n%s", w.MessageID, b.Name(), e.Body, b.Raw)
	}
}

// sameJSON says a and b decode to the same document.
func sameJSON(a, b []byte) bool {
	dec := func(raw []byte) (any, bool) {
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		err := d.Decode(&v)
		return v, err == nil
	}
	va, ok1 := dec(a)
	vb, ok2 := dec(b)
	return ok1 && ok2 && reflect.DeepEqual(va, vb)
}

// ulidRE is a canonical ULID: 26 Crockford base32 characters, the first at most 7.
var ulidRE = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
