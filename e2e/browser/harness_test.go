// Package browser drives the dashboard in a real headless Chromium against
// the real handoff binary: the keyboard flow of the approval queue, and the
// refusal of a cross-site form post.
package browser

import (
	"bytes"
	"context"
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

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// modulePath is what TestMain builds: the main package at the repo root.
const modulePath = "github.com/handoff/handoff"

// chromiumPath is Debian's Chromium, which the CI script installs.
const chromiumPath = "/usr/bin/chromium"

const (
	// startTimeout bounds how long the server may take to say where it listens.
	startTimeout = 20 * time.Second
	// stepTimeout bounds one browser step (a navigation, a wait for an element).
	stepTimeout = 15 * time.Second
	// pollInterval is the ticker of every wait-for-condition loop.
	pollInterval = 25 * time.Millisecond
	// logTail is how much server output a failing test prints.
	logTail = 8 << 10
)

var (
	// binPath is the handoff binary that TestMain builds once for the package.
	binPath string
	// buildErr is why that build failed; every test reports it.
	buildErr error
	// repo is the repository root; screenshots go under repo/testdata/out/browser.
	repo string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests builds the binary, runs the tests and removes the binary, in a
// function of its own so the deferred removal runs before os.Exit.
func runTests(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // the tests skip themselves; building would only cost time
	}
	var err error
	if repo, err = repoRoot(); err != nil {
		buildErr = err
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "handoff-browser-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "browser: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "handoff")
	cmd := exec.Command("go", "build", "-o", binPath, modulePath)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("cannot build the handoff binary (go build -o %s %s, in %s): %v\n%s",
			binPath, modulePath, repo, err, bytes.TrimSpace(out))
		fmt.Fprintf(os.Stderr, "browser: %v\n", buildErr)
	}
	return m.Run()
}

// repoRoot walks up from the package folder to the folder holding go.mod.
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
			return "", errors.New("no go.mod found above e2e/browser")
		}
		dir = parent
	}
}

// requireEnvironment stops a test that cannot run. A missing browser is a
// skip on a developer's machine but a failure under CI, whose script
// installs Chromium: there a skip would hide that nothing was tested.
func requireEnvironment(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: starts the real binary and Chromium; skipped with -short")
	}
	if buildErr != nil {
		t.Fatalf("%v", buildErr)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "0" && !strings.EqualFold(ci, "false") {
			t.Fatalf("CI=%s but %s is missing (%v): the browser tests must run under CI; install the chromium package", ci, chromiumPath, err)
		}
		t.Skipf("%s is missing (%v): install Debian's chromium package to run the browser tests (under CI=true this fails instead)", chromiumPath, err)
	}
}

// ---- the server ----

// user is a dashboard account created with `handoff user add` before the
// server starts.
type user struct {
	name, role, password string
}

// server is one run of the real binary on a fresh data folder.
type server struct {
	t      *testing.T
	url    string // http://127.0.0.1:PORT
	token  string // HANDOFF_API_TOKEN: an admin bearer token
	client *http.Client
	cmd    *exec.Cmd
	done   chan struct{}
	out    *tail
}

// startServer creates users, then starts `handoff serve` on a fresh data
// folder (the zero-config demo: channel demo, template drafter, sandbox
// provider) and waits until it listens and /readyz answers 200. It is
// stopped with SIGTERM when the test ends.
func startServer(t *testing.T, users ...user) *server {
	t.Helper()
	data := t.TempDir()
	s := &server{
		t:      t,
		token:  randomHex(t, 24),
		client: &http.Client{Timeout: 10 * time.Second},
		done:   make(chan struct{}),
		out:    &tail{},
	}
	env := childEnv(s.token, randomHex(t, 12))
	for _, u := range users {
		// The SPEC's order: --data DIR NAME --role R.
		cmd := exec.Command(binPath, "user", "add", "--data", data, u.name, "--role", u.role)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(u.password + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("handoff user add %s --role %s: %v\n%s", u.name, u.role, err, out)
		}
	}

	addrCh := make(chan string, 1)
	onLine := func(line []byte) {
		if addr, ok := listeningAddr(line); ok {
			select {
			case addrCh <- addr:
			default:
			}
		}
	}
	s.cmd = exec.Command(binPath, "serve", "--data", data, "--addr", "127.0.0.1:0")
	s.cmd.Env = env
	s.cmd.Stdout = &lineWriter{out: s.out, onLine: onLine}
	s.cmd.Stderr = &lineWriter{out: s.out, onLine: onLine}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start handoff serve: %v", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.stop)

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case addr := <-addrCh:
		s.url = "http://" + addr
	case <-s.done:
		t.Fatalf("handoff serve exited (%s) before logging {\"msg\":\"listening\",\"addr\":...}", s.cmd.ProcessState)
	case <-timer.C:
		t.Fatalf("handoff serve logged no {\"msg\":\"listening\",\"addr\":...} line within %v", startTimeout)
	}
	eventually(t, startTimeout, "GET /readyz answers 200", func() (bool, string) {
		code, _, err := s.request(http.MethodGet, "/readyz", nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("last: %d, %v", code, err)
	})
	return s
}

// stop ends the server with SIGTERM (SIGKILL after 10s) and prints its
// output when the test failed.
func (s *server) stop() {
	s.client.CloseIdleConnections()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("handoff serve did not exit within 10s of SIGTERM; killing it")
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	if s.t.Failed() {
		s.t.Logf("---- handoff serve output, last %d bytes:\n%s", logTail, s.out.String())
	}
}

// request sends one API request with the admin bearer token.
func (s *server) request(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// getJSON fetches path with the API token and decodes a 200 answer into v.
func (s *server) getJSON(path string, v any) error {
	code, raw, err := s.request(http.MethodGet, path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, code, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("GET %s: decoding %s: %w", path, raw, err)
	}
	return nil
}

// hook is one message on the demo channel.
type hook struct {
	ID   string `json:"id"`
	From string `json:"from"`
	Name string `json:"name"`
	Text string `json:"text"`
}

// postHook delivers h to POST /hooks/demo and insists on 202 accepted.
func (s *server) postHook(h hook) {
	s.t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := s.client.Post(s.url+"/hooks/demo", "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatalf("POST /hooks/demo %s: %v", b, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(raw), `"accepted"`) {
		s.t.Fatalf("POST /hooks/demo %s: %d %s; want 202 {\"status\":\"accepted\",...}", b, resp.StatusCode, bytes.TrimSpace(raw))
	}
}

// decision is the person's verdict on a draft, as the API shows it.
type decision struct {
	By     string `json:"by"`
	Text   string `json:"text"`
	Edited bool   `json:"edited"`
	Reason string `json:"reason"`
}

// draft is a draft as GET /api/v1/drafts lists it.
type draft struct {
	ID             string    `json:"id"`
	EventKey       string    `json:"event_key"`
	ConversationID string    `json:"conversation_id"`
	Status         string    `json:"status"`
	Text           string    `json:"text"`
	OutboxID       string    `json:"outbox_id"`
	Decision       *decision `json:"decision"`
}

// drafts lists every draft in status, oldest first (the queue's order).
func (s *server) drafts(status string) ([]draft, error) {
	var page struct {
		Drafts     []draft `json:"drafts"`
		NextCursor string  `json:"next_cursor"`
	}
	err := s.getJSON("/api/v1/drafts?status="+url.QueryEscape(status)+"&limit=100", &page)
	if err == nil && page.NextCursor != "" {
		err = fmt.Errorf("more than 100 drafts %s: this test made at most 3", status)
	}
	return page.Drafts, err
}

// waitPending polls until exactly n drafts wait for approval, and returns them.
func (s *server) waitPending(n int) []draft {
	s.t.Helper()
	var got []draft
	eventually(s.t, 20*time.Second, fmt.Sprintf("%d drafts pending_approval", n), func() (bool, string) {
		var err error
		got, err = s.drafts("pending_approval")
		if err != nil {
			return false, err.Error()
		}
		return len(got) == n, fmt.Sprintf("%d pending", len(got))
	})
	return got
}

// outboxRow is GET /api/v1/outbox/{id}.
type outboxRow struct {
	ID         string `json:"id"`
	DraftID    string `json:"draft_id"`
	To         string `json:"to"`
	Text       string `json:"text"`
	Status     string `json:"status"`
	ApprovedBy string `json:"approved_by"`
}

// sandboxMessage is one entry of GET /api/v1/sandbox/messages.
type sandboxMessage struct {
	Ref     string `json:"client_ref"`
	To      string `json:"to"`
	Text    string `json:"text"`
	Repeats int    `json:"repeats"`
}

func (s *server) sandbox() ([]sandboxMessage, error) {
	var body struct {
		Messages []sandboxMessage `json:"messages"`
	}
	err := s.getJSON("/api/v1/sandbox/messages?limit=100", &body)
	return body.Messages, err
}

// childEnv is the test's environment without any HANDOFF_* variable (they
// override flags), plus the API token and the admin's password.
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

// tail keeps the end of the server's output for a failing test.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (l *tail) add(line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf, line...), '\n')
	if len(l.buf) > 4*logTail {
		l.buf = append([]byte(nil), l.buf[len(l.buf)-logTail:]...)
	}
}

func (l *tail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > logTail {
		return string(l.buf[len(l.buf)-logTail:])
	}
	return string(l.buf)
}

// lineWriter splits one output stream into lines. os/exec calls Write from
// one goroutine per stream.
type lineWriter struct {
	out     *tail
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
		w.onLine(line)
		w.out.add(line)
		w.partial = w.partial[n+1:]
	}
	w.partial = append([]byte(nil), w.partial...)
	return len(b), nil
}

// eventually polls cond every pollInterval until it holds, failing the test
// with cond's last word when within passes. It is the only way these tests wait.
func eventually(t *testing.T, within time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; %s", within, what, last)
		}
		<-tick.C
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ---- the browser ----

// browser is one headless Chromium with a fresh profile, one tab.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string // folder of this test's screenshots
	n     int    // screenshots taken so far, for their order in the folder
}

// newBrowser starts Chromium for t; it is closed when the test ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	profile := t.TempDir() // removed after the browser is gone: cleanups run last-in first-out
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests may run as root in a container
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
	})
	// The first Do starts the browser; it binds the browser's life to ctx,
	// so it gets no timeout of its own (steps below do).
	start := make(chan error, 1)
	go func() { start <- chromedp.Do(ctx) }()
	select {
	case err := <-start:
		if err != nil {
			t.Fatalf("start %s: %v", chromiumPath, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start within 30s", chromiumPath)
	}
	b := &browser{t: t, ctx: ctx, shots: filepath.Join(repo, "testdata", "out", "browser")}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return b
}

// do runs steps with a deadline; on failure it takes a screenshot and stops the test.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.failed(what, err)
	}
}

// run runs one action that returns a value, with a deadline.
func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.failed(what, err)
	}
	return v
}

func (b *browser) failed(what string, err error) {
	b.t.Helper()
	where, _ := b.tryRun(chromedp.Location())
	b.t.Fatalf("browser: %s: %v (page %s; screenshot %s)", what, err, where, b.screenshot("failed"))
}

// tryRun runs a with a short deadline and returns its error instead of failing.
func (b *browser) tryRun(a chromedp.Action[string]) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// screenshot saves the whole page as a PNG named after the test and the
// step, and returns its path ("" when it could not be taken).
func (b *browser) screenshot(step string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is PNG
	if err != nil {
		b.t.Errorf("screenshot %s: %v", step, err)
		return ""
	}
	b.n++
	path := filepath.Join(b.shots, fmt.Sprintf("%s-%02d-%s.png", fileName(b.t.Name()), b.n, step))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", step, err)
		return ""
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// login logs in at /login as u and waits for the page behind it (next).
func (b *browser) login(base string, u user, next, waitFor string) {
	b.t.Helper()
	b.do("log in as "+u.name,
		chromedp.Navigate(base+"/login?next="+url.QueryEscape(next)),
		chromedp.WaitVisible(chromedp.CSS(`form.login input[name="name"]`)),
		chromedp.SendKeys(chromedp.CSS(`form.login input[name="name"]`), u.name),
		chromedp.SendKeys(chromedp.CSS(`form.login input[name="password"]`), u.password),
		chromedp.Click(chromedp.CSS(`form.login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(waitFor)),
	)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

func fileName(s string) string { return unsafeName.ReplaceAllString(s, "-") }

// press types keys the way a physical keyboard reaches a page: for each
// key, one keydown that carries the key's text, then a keyup (Puppeteer
// does the same). chromedp.KeyEvent instead sends the text as a separate
// char event, which Chrome delivers even when the page cancelled the
// keydown, so pressing the shortcut e would also type an "e" into the
// field that the shortcut focuses. With a modifier other than Shift the
// key carries no text (rawKeyDown), as Ctrl+A or Ctrl+Enter do.
func press(keys string, mods ...chromedp.Modifier) chromedp.Action[chromedp.Void] {
	var mod int64
	for _, m := range mods {
		mod |= int64(m)
	}
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, r := range keys {
			var down, up input.DispatchKeyEventParams
			for _, k := range kb.Encode(r) {
				switch k.Type {
				case kb.KeyDown:
					down = *k
				case kb.KeyChar:
					down.Text, down.UnmodifiedText = k.Text, k.UnmodifiedText
				case kb.KeyUp:
					up = *k
				}
			}
			down.Modifiers |= mod
			up.Modifiers |= mod
			if down.Text == "" || mod&^int64(chromedp.ModifierShift) != 0 {
				down.Type, down.Text, down.UnmodifiedText = kb.KeyRawDown, "", ""
			}
			for _, ev := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
					return fmt.Errorf("key %q: %w", r, err)
				}
			}
		}
		return nil
	})
}
