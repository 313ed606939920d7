package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// startTimeout bounds how long a run may take to log its address and
	// answer /readyz; opening bbolt takes milliseconds, so this only matters
	// when something is badly wrong.
	startTimeout = 20 * time.Second
	// stopGrace is how long a run gets after SIGTERM before SIGKILL.
	stopGrace = 10 * time.Second
	// pollInterval paces every wait-for-a-condition loop.
	pollInterval = 25 * time.Millisecond
)

// instance is the temporary handoff installation under drill: one config
// file, one data folder and one API token that outlive any single process,
// so a fixture can kill the process and start another on the same files.
// start, kill and stop must not run concurrently with requests.
type instance struct {
	bin, config, data string
	token, password   string
	client            *http.Client
	log               *lockedFile
	runs              int
	cur               *process
}

// process is one run of the binary.
type process struct {
	n     int
	cmd   *exec.Cmd
	base  string        // http://127.0.0.1:PORT
	done  chan struct{} // closed once the process has exited
	state *os.ProcessState
}

func newInstance(bin, config, data, token, password string, log *os.File) *instance {
	return &instance{
		bin: bin, config: config, data: data, token: token, password: password,
		log: &lockedFile{f: log},
		client: &http.Client{
			Timeout: 20 * time.Second, // a hung instance fails a fixture, not the drill
			Transport: &http.Transport{
				Proxy:               nil, // only 127.0.0.1 is ever contacted
				MaxIdleConnsPerHost: 256,
			},
		},
	}
}

// running reports whether the current run is alive.
func (i *instance) running() bool { return i.cur != nil && !i.cur.exited() }

// start runs the binary on the instance's files, with extra environment
// variables for this run only, and waits until /readyz answers 200.
func (i *instance) start(ctx context.Context, extraEnv ...string) error {
	if i.running() {
		return fmt.Errorf("run %d is still running", i.cur.n)
	}
	i.runs++
	n := i.runs
	i.log.printf("---- run %d: %s serve --config %s --data %s --addr 127.0.0.1:0 %s\n", n, i.bin, i.config, i.data, strings.Join(extraEnv, " "))
	cmd := exec.Command(i.bin, "serve", "--config", i.config, "--data", i.data, "--addr", "127.0.0.1:0")
	cmd.Env = append(childEnv(i.token, i.password), extraEnv...)
	addrCh := make(chan string, 1)
	cmd.Stderr = &lineWriter{log: i.log, onLine: func(line []byte) {
		if addr, ok := listeningAddr(line); ok {
			select {
			case addrCh <- addr:
			default:
			}
		}
	}}
	cmd.Stdout = &lineWriter{log: i.log, prefix: "stdout: "}
	cmd.WaitDelay = 5 * time.Second // a grandchild holding the pipes cannot hang Wait
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", i.bin, err)
	}
	p := &process{n: n, cmd: cmd, done: make(chan struct{})}
	i.cur = p
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		p.state = cmd.ProcessState
		close(p.done)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case addr := <-addrCh:
		host, _, _ := net.SplitHostPort(addr)
		if host != "127.0.0.1" {
			i.stop()
			return fmt.Errorf("run %d listens on %s, not on 127.0.0.1 as asked", n, addr)
		}
		p.base = "http://" + addr
	case <-p.done:
		return fmt.Errorf("run %d exited (%s) before logging {\"msg\":\"listening\",...}", n, p.exitDesc())
	case <-timer.C:
		i.stop()
		return fmt.Errorf("run %d logged no {\"msg\":\"listening\",...} line within %v", n, startTimeout)
	case <-ctx.Done():
		i.stop()
		return ctx.Err()
	}
	err := poll(ctx, startTimeout, func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("run %d exited (%s) while starting", n, p.exitDesc())
		}
		code, _, err := i.do(http.MethodGet, "/readyz", nil)
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		i.stop()
		return fmt.Errorf("run %d: GET /readyz: %w", n, err)
	}
	return nil
}

// kill sends SIGKILL to the current run and waits until it is reaped: the
// crash that nothing in-process can imitate.
func (i *instance) kill() error {
	p := i.cur
	if p == nil || p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	if !p.wait(stopGrace) {
		return fmt.Errorf("run %d still not reaped %v after SIGKILL", p.n, stopGrace)
	}
	i.client.CloseIdleConnections()
	return nil
}

// stop ends the current run with SIGTERM, and with SIGKILL when it has not
// exited stopGrace later. It says how the run ended.
func (i *instance) stop() string {
	p := i.cur
	if p == nil {
		return "not started"
	}
	if p.exited() {
		return p.exitDesc()
	}
	// Idle keep-alive connections would make the server's graceful
	// shutdown wait for them; hang up first.
	i.client.CloseIdleConnections()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if !p.wait(stopGrace) {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		p.wait(stopGrace)
		return fmt.Sprintf("did not stop within %v of SIGTERM; killed", stopGrace)
	}
	i.client.CloseIdleConnections()
	return p.exitDesc()
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit.
func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// killedBySIGKILL reports whether the process died of SIGKILL.
func (p *process) killedBySIGKILL() bool {
	if !p.exited() {
		return false
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (p *process) exitDesc() string {
	if !p.exited() {
		return "still running"
	}
	return p.state.String() // "exit status 0", "signal: killed"
}

// childEnv is this process's environment without any HANDOFF_* variable
// (they override flags and could point the child at someone's real data),
// plus the API token and an admin password, so none is generated and printed.
func childEnv(token, password string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HANDOFF_") {
			env = append(env, kv)
		}
	}
	return append(env, "HANDOFF_API_TOKEN="+token, "HANDOFF_ADMIN_PASSWORD="+password)
}

// listeningAddr recognises the log line that announces the bound address.
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

// lockedFile is the instance's log, written by the output copiers of
// every run.
type lockedFile struct {
	mu sync.Mutex
	f  *os.File
}

func (l *lockedFile) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, format, args...)
}

// lineWriter splits one output stream into lines; os/exec writes each
// stream from a single goroutine.
type lineWriter struct {
	log     *lockedFile
	prefix  string
	onLine  func([]byte)
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.partial = append(w.partial, b...)
	for {
		n := bytes.IndexByte(w.partial, '\n')
		if n < 0 {
			break
		}
		line := w.partial[:n]
		if w.onLine != nil {
			w.onLine(line)
		}
		w.log.printf("%s%s\n", w.prefix, line)
		w.partial = w.partial[n+1:]
	}
	w.partial = append([]byte(nil), w.partial...)
	return len(b), nil
}

// poll calls cond every pollInterval until it reports done, returns an
// error, ctx ends or within has passed.
func poll(ctx context.Context, within time.Duration, cond func() (bool, error)) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("not within %v", within)
		case <-tick.C:
		}
	}
}

// ---- the API, as the drill uses it ----

// errNotRunning is every request's answer while no run is alive.
var errNotRunning = errors.New("the instance is not running")

// do sends one request with the API token to the current run and returns
// the status and body.
func (i *instance) do(method, path string, body any) (int, []byte, error) {
	if i.cur == nil || i.cur.base == "" {
		return 0, nil, errNotRunning
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, i.cur.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+i.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := i.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: reading the %d answer: %w", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode, raw, nil
}

// getJSON decodes a 200 answer of GET path into v; other statuses are errors.
func (i *instance) getJSON(path string, v any) error {
	code, raw, err := i.do(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, code, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("GET %s: decoding %s: %w", path, raw, err)
	}
	return nil
}

// hookAnswer is the body of an answer from POST /hooks/{channel}.
type hookAnswer struct {
	Status   string `json:"status"`
	EventKey string `json:"event_key"`
	Error    string `json:"error"`
}

// post delivers one inbound event to a channel.
func (i *instance) post(channel string, ev inbound) (int, hookAnswer, error) {
	var a hookAnswer
	code, raw, err := i.do(http.MethodPost, "/hooks/"+channel, ev)
	if err != nil {
		return code, a, err
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return code, a, fmt.Errorf("POST /hooks/%s: %d %s", channel, code, bytes.TrimSpace(raw))
	}
	return code, a, nil
}

// timeline is GET /api/v1/events/{key}, reduced to what the drill reads.
type timeline struct {
	Event struct {
		Key           string `json:"key"`
		CorrelationID string `json:"correlation_id"`
	} `json:"event"`
	Jobs []struct {
		ID       string    `json:"id"`
		Kind     string    `json:"kind"`
		State    string    `json:"state"`
		Attempt  int       `json:"attempt"`
		Attempts []attempt `json:"attempts"`
	} `json:"jobs"`
	Draft *struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		OutboxID string `json:"outbox_id"`
	} `json:"draft"`
	Outbox  *outboxRow `json:"outbox"`
	Handoff *struct {
		Status string `json:"status"`
	} `json:"handoff"`
}

// attempt is one attempt of a job.
type attempt struct {
	Outcome string `json:"outcome"`
}

// outboxRow is GET /api/v1/outbox/{id}, reduced.
type outboxRow struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	ProviderID string `json:"provider_id"`
	Note       string `json:"note"`
	Attempts   []struct {
		Action  string `json:"action"`
		Outcome string `json:"outcome"`
	} `json:"attempts"`
}

func (i *instance) event(key string) (timeline, error) {
	var t timeline
	err := i.getJSON("/api/v1/events/"+url.PathEscape(key), &t)
	return t, err
}

func (i *instance) outbox(id string) (outboxRow, error) {
	var o outboxRow
	err := i.getJSON("/api/v1/outbox/"+url.PathEscape(id), &o)
	return o, err
}

// sandboxMessage is one message the sandbox provider received.
type sandboxMessage struct {
	Ref      string `json:"client_ref"`
	Provider string `json:"provider"`
	ID       string `json:"id"`
	Repeats  int    `json:"repeats"`
}

// sandbox lists what the sandbox providers received, by our reference. The
// sandbox keeps one record per reference and counts later sends of it as
// repeats.
func (i *instance) sandbox() (map[string]sandboxMessage, error) {
	var v struct {
		Messages []sandboxMessage `json:"messages"`
	}
	if err := i.getJSON("/api/v1/sandbox/messages?limit=1000", &v); err != nil {
		return nil, err
	}
	out := make(map[string]sandboxMessage, len(v.Messages))
	for _, m := range v.Messages {
		out[m.Ref] = m
	}
	return out, nil
}

// deadLetter is one item of GET /api/v1/dead-letters, reduced.
type deadLetter struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Channel  string `json:"channel"`
	EventKey string `json:"event_key"`
	State    string `json:"state"`
	Safe     bool   `json:"safe"`
	Why      string `json:"why"`
}

func (i *instance) deadLetters(kind, channel string) ([]deadLetter, error) {
	var v struct {
		DeadLetters []deadLetter `json:"dead_letters"`
	}
	q := url.Values{"kind": {kind}, "channel": {channel}}
	err := i.getJSON("/api/v1/dead-letters?"+q.Encode(), &v)
	return v.DeadLetters, err
}

// replay asks for a replay of a dead letter; body may be nil.
func (i *instance) replay(id string, body any) (int, string, error) {
	code, raw, err := i.do(http.MethodPost, "/api/v1/dead-letters/"+url.PathEscape(id)+"/replay", body)
	return code, string(bytes.TrimSpace(raw)), err
}
