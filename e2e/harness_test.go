package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// modulePath is what TestMain builds; it must be the main package at the repo root.
const modulePath = "github.com/handoff/handoff"

const (
	// startTimeout bounds how long a process may take to log its address and
	// answer /readyz; opening bbolt and releasing leases takes milliseconds,
	// so this only matters when something is badly wrong.
	startTimeout = 20 * time.Second
	// pollInterval is the ticker for every wait-for-condition loop.
	pollInterval = 25 * time.Millisecond
	// logTail is how much of each run's output a failing test prints; the whole
	// output stays in a kept log folder.
	logTail = 16 << 10
)

var (
	// binPath is the handoff binary that TestMain builds once for the package.
	binPath string
	// buildErr is why that build failed; every test reports it instead of running.
	buildErr error
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests builds the binary, runs the tests and removes the binary, in a
// function of its own so the deferred removal runs before os.Exit.
func runTests(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// The tests skip themselves; building would only cost time.
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "handoff-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "handoff")
	if buildErr = buildBinary(binPath); buildErr != nil {
		// Said once here and again in every test, so it is seen in -v and non -v output alike.
		fmt.Fprintf(os.Stderr, "e2e: %v\n", buildErr)
	}
	return m.Run()
}

// buildBinary builds the handoff command from the repository root that holds
// this package, so the tests run exactly what a user would install.
func buildBinary(out string) error {
	root, err := repoRoot()
	if err != nil {
		return fmt.Errorf("cannot build the handoff binary: %w", err)
	}
	cmd := exec.Command("go", "build", "-o", out, modulePath)
	cmd.Dir = root
	output, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("cannot build the handoff binary (go build -o %s %s, in %s): %v\n%s",
			out, modulePath, root, err, bytes.TrimSpace(output))
	}
	return nil
}

// repoRoot walks up from the working directory (the package folder under go
// test) to the folder holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the e2e package")
		}
		dir = parent
	}
}

// requireBinary stops a test that cannot run: skipped under -short, failed
// with the build output when the binary did not build.
func requireBinary(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: starts the real binary; skipped with -short")
	}
	if buildErr != nil {
		t.Fatalf("%v", buildErr)
	}
}

// instance is one handoff installation under test. The data folder, config
// file and API token outlive any single process, so a test can kill the
// process and start another one on the same files.
//
// Requests may be sent from many goroutines, but start, kill and terminate
// must not run concurrently with them: they change which process is current.
type instance struct {
	t       *testing.T
	dataDir string
	config  string // path of the config file; empty for none
	token   string
	logDir  string
	client  *http.Client
	runs    []*process
}

// process is one run of the binary.
type process struct {
	n       int
	cmd     *exec.Cmd
	log     *runLog
	baseURL string
	done    chan struct{} // closed once the process has exited and its output is drained
	state   *os.ProcessState
}

// startInstance starts handoff on a fresh data folder, with configYAML (if not
// empty) written to a file passed with --config, and waits until /readyz says
// the store is writable. extraEnv ("NAME=value", such as a fault hook) goes
// to this first run only; restart starts later runs without it. Everything is
// torn down when the test ends; the process output is printed when the test
// failed.
func startInstance(t *testing.T, configYAML string, extraEnv ...string) *instance {
	t.Helper()
	requireBinary(t)

	dir := t.TempDir()
	logDir, err := os.MkdirTemp("", "handoff-e2e-"+sanitize(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	inst := &instance{
		t:       t,
		dataDir: filepath.Join(dir, "data"),
		token:   randomHex(t, 24),
		logDir:  logDir,
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
	if configYAML != "" {
		inst.config = filepath.Join(dir, "handoff.yaml")
		if err := os.WriteFile(inst.config, []byte(configYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Registered after t.TempDir, so it runs before the data folder is
	// removed: a live process would otherwise keep writing into it.
	t.Cleanup(inst.cleanup)
	inst.start(extraEnv)
	return inst
}

// cur is the most recently started process.
func (i *instance) cur() *process { return i.runs[len(i.runs)-1] }

// restart starts a new process on the same data folder and config; the
// previous one must have exited.
func (i *instance) restart() {
	i.t.Helper()
	if p := i.cur(); !p.exited() {
		i.t.Fatalf("restart: run %d is still running", p.n)
	}
	i.start(nil)
}

// start runs the binary once more on the instance's files, with extraEnv
// added to its environment, and waits until it is ready and healthy.
func (i *instance) start(extraEnv []string) {
	t := i.t
	t.Helper()
	n := len(i.runs) + 1
	f, err := os.Create(filepath.Join(i.logDir, fmt.Sprintf("run-%d.log", n)))
	if err != nil {
		t.Fatal(err)
	}
	rl := &runLog{f: f}

	args := []string{"serve", "--data", i.dataDir, "--addr", "127.0.0.1:0"}
	if i.config != "" {
		args = append(args, "--config", i.config)
	}
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(childEnv(i.token, randomHex(t, 12)), extraEnv...)
	addrCh := make(chan string, 1)
	stderr := &lineWriter{log: rl, onLine: func(line []byte) {
		if addr, ok := listeningAddr(line); ok {
			select {
			case addrCh <- addr:
			default:
			}
		}
	}}
	stdout := &lineWriter{log: rl, prefix: "stdout: "}
	cmd.Stderr = stderr
	cmd.Stdout = stdout
	// Should the binary ever leave a child holding its pipes, Wait still returns.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binPath, err)
	}
	p := &process{n: n, cmd: cmd, log: rl, done: make(chan struct{})}
	i.runs = append(i.runs, p)
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		stderr.flush()
		stdout.flush()
		p.state = cmd.ProcessState
		close(p.done)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case addr := <-addrCh:
		p.baseURL = "http://" + addr
	case <-p.done:
		t.Fatalf("handoff run %d exited (%s) before logging {\"msg\":\"listening\",\"addr\":...}", n, p.exitDesc())
	case <-timer.C:
		t.Fatalf("handoff run %d logged no {\"msg\":\"listening\",\"addr\":...} line within %v", n, startTimeout)
	}
	if err := i.waitReady(p, time.Now().Add(startTimeout)); err != nil {
		t.Fatalf("handoff run %d: %v", n, err)
	}
	if code, err := i.status("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("handoff run %d: GET /healthz = %d, %v; want 200 once ready", n, code, err)
	}
}

// waitReady polls /readyz until it answers 200, the process exits or the deadline passes.
func (i *instance) waitReady(p *process, deadline time.Time) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		code, err := i.status("/readyz")
		if err == nil && code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET /readyz not 200 within %v (last: %d, %v)", startTimeout, code, err)
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited (%s) while waiting for /readyz", p.exitDesc())
		case <-tick.C:
		}
	}
}

// waitUntil polls cond every pollInterval until it holds, and fails the test
// when timeout passes first; cond may fail the test itself.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// kill sends SIGKILL to the current process and waits until it is gone: the
// crash that nothing in-process can imitate.
func (i *instance) kill() {
	i.t.Helper()
	p := i.cur()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.exited() {
		i.t.Fatalf("SIGKILL run %d: %v", p.n, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		i.t.Fatalf("run %d still not reaped 10s after SIGKILL", p.n)
	}
	i.client.CloseIdleConnections()
}

// terminate sends SIGTERM to the current process and waits up to within for it
// to exit. It returns the exit code, or -1 when the process had to be killed or
// died of a signal; the test fails when the deadline passes.
func (i *instance) terminate(within time.Duration) int {
	i.t.Helper()
	p := i.cur()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.exited() {
		i.t.Fatalf("SIGTERM run %d: %v", p.n, err)
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		i.t.Errorf("run %d did not exit within %v of SIGTERM; killing it", p.n, within)
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1
	}
	i.client.CloseIdleConnections()
	return p.state.ExitCode()
}

// stopCleanly ends a test's last run with SIGTERM and insists on exit 0: a
// clean shutdown is part of the contract of every test, not only the SIGTERM one.
func (i *instance) stopCleanly() {
	i.t.Helper()
	// A client like ours keeps connections it dialed but never used, and
	// http.Server.Shutdown waits up to 5s for such "new" connections; hang up
	// first so a quiet stop is quick. (The SIGTERM-under-load test does not.)
	i.client.CloseIdleConnections()
	if code := i.terminate(30 * time.Second); code != 0 {
		i.t.Errorf("after SIGTERM run %d exited with %s; want exit status 0", i.cur().n, i.cur().exitDesc())
	}
}

// cleanup kills whatever still runs and, when the test failed, prints the tail
// of every run's output and keeps the full logs.
func (i *instance) cleanup() {
	for _, p := range i.runs {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
			}
		}
		p.log.close()
	}
	i.client.CloseIdleConnections()
	if !i.t.Failed() {
		os.RemoveAll(i.logDir)
		return
	}
	for _, p := range i.runs {
		i.t.Logf("---- handoff run %d (%s), last %d bytes of output:\n%s", p.n, p.exitDesc(), logTail, p.log.tail())
	}
	i.t.Logf("full output of every run kept in %s", i.logDir)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitDesc says how the process ended, for failure messages.
func (p *process) exitDesc() string {
	if !p.exited() {
		return "still running"
	}
	return p.state.String() // "exit status 1", "signal: killed"
}

// childEnv is the test's environment without any HANDOFF_* variable (they
// override flags and would point the child at someone else's data), plus the
// API token and an admin password so that none is generated and printed.
func childEnv(token, adminPassword string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HANDOFF_") {
			env = append(env, kv)
		}
	}
	return append(env, "HANDOFF_API_TOKEN="+token, "HANDOFF_ADMIN_PASSWORD="+adminPassword)
}

// listeningAddr recognises the slog line that announces the bound address.
func listeningAddr(line []byte) (string, bool) {
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg != "listening" {
		return "", false
	}
	if _, _, err := net.SplitHostPort(rec.Addr); err != nil {
		return "", false
	}
	return rec.Addr, true
}

// runLog keeps one run's output: all of it in a file, the end of it in memory.
type runLog struct {
	mu   sync.Mutex
	f    *os.File
	last []byte
}

func (l *runLog) writeLine(prefix string, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := prefix + string(line) + "\n"
	if l.f != nil {
		_, _ = l.f.WriteString(rec)
	}
	l.last = append(l.last, rec...)
	if len(l.last) > 4*logTail {
		l.last = append([]byte(nil), l.last[len(l.last)-logTail:]...)
	}
}

func (l *runLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.last) > logTail {
		return string(l.last[len(l.last)-logTail:])
	}
	return string(l.last)
}

func (l *runLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

// lineWriter splits one output stream into lines for a runLog. os/exec calls
// Write from a single goroutine per stream, so it needs no lock of its own.
type lineWriter struct {
	log     *runLog
	prefix  string
	onLine  func([]byte)
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.partial = append(w.partial, b...)
	rest := w.partial
	for {
		n := bytes.IndexByte(rest, '\n')
		if n < 0 {
			break
		}
		w.line(rest[:n])
		rest = rest[n+1:]
	}
	w.partial = append(w.partial[:0], rest...)
	return len(b), nil
}

// flush hands over a last line that had no newline; called after Wait.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.line(w.partial)
		w.partial = nil
	}
}

func (w *lineWriter) line(b []byte) {
	if w.onLine != nil {
		w.onLine(b)
	}
	w.log.writeLine(w.prefix, b)
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
	resp, err := i.client.Get(i.cur().baseURL + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// postHook delivers one demo-channel message with the given provider id.
func (i *instance) postHook(id string) (hookResult, error) {
	body, err := json.Marshal(map[string]string{"id": id, "from": "+15550001234", "name": "Ada", "text": "hi"})
	if err != nil {
		return hookResult{}, err
	}
	resp, err := i.client.Post(i.cur().baseURL+"/hooks/demo", "application/json", bytes.NewReader(body))
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

// errNoEvent is event's answer to a 404.
var errNoEvent = errors.New("event not found (404)")

// event fetches one event's timeline with the API token.
func (i *instance) event(key string) (eventView, error) {
	var v eventView
	req, err := http.NewRequest(http.MethodGet, i.cur().baseURL+"/api/v1/events/"+url.PathEscape(key), nil)
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

// checkEvent checks the stored event against what the demo channel was sent.
func checkEvent(t *testing.T, id string, v eventView, wantCorrelation string, wantDuplicates int) {
	t.Helper()
	e := v.Event
	key := "demo:" + id
	if e.Key != key || e.Channel != "demo" || e.MessageID != id {
		t.Errorf("event %s: key %q channel %q message_id %q; want %q, %q, %q", key, e.Key, e.Channel, e.MessageID, key, "demo", id)
	}
	if e.Contact != "+15550001234" || e.Name != "Ada" || e.Text != "hi" {
		t.Errorf("event %s: contact %q name %q text %q; want the delivered %q, %q, %q", key, e.Contact, e.Name, e.Text, "+15550001234", "Ada", "hi")
	}
	if e.CorrelationID != wantCorrelation {
		t.Errorf("event %s: correlation id %q, but the webhook answered %q: one event, one correlation id", key, e.CorrelationID, wantCorrelation)
	}
	if e.Duplicates != wantDuplicates {
		t.Errorf("event %s: duplicates = %d, want %d", key, e.Duplicates, wantDuplicates)
	}
}

// ulidRE is a canonical ULID: 26 Crockford base32 characters, the first at most 7.
var ulidRE = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
