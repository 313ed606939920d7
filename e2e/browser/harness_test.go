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
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/testkit"
)

// chromiumPath is Debian's Chromium, which the CI script installs.
const chromiumPath = "/usr/bin/chromium"

const (
	// startTimeout bounds how long the server may take to listen and be ready.
	startTimeout = 20 * time.Second
	// stepTimeout bounds one browser step (a navigation, a wait for an element).
	stepTimeout = 15 * time.Second
	// logTail is how many lines of server output a failing test prints.
	logTail = 60
)

// TestMain removes the binary that the first test built (proc.Binary).
func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBinary()
	os.Exit(code)
}

// requireEnvironment stops a test that cannot run. A missing browser is a
// skip on a developer's machine but a failure under CI, whose script
// installs Chromium: there a skip would hide that nothing was tested.
func requireEnvironment(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: starts the real binary and Chromium; skipped with -short")
	}
	if _, err := proc.Binary(); err != nil {
		t.Fatalf("%v", err)
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
	clients              string // --clients: the clients an approver is limited to ("" every one)
}

// server is one run of the real binary on a fresh data folder.
type server struct {
	t      *testing.T
	url    string // http://127.0.0.1:PORT
	token  string // HANDOFF_API_TOKEN: an admin bearer token
	client *http.Client
	run    *proc.Process
}

// startServer creates users, then starts `handoff serve` on a fresh data
// folder (the zero-config demo, channel demo, template drafter, sandbox
// provider, without its quiet period: demoConfig) and waits until it listens and /readyz answers 200. It is
// stopped with SIGTERM when the test ends.
func startServer(t *testing.T, users ...user) *server {
	t.Helper()
	return startConfigured(t, demoConfig, users...)
}

// demoConfig is the zero-config demo's channel without its quiet period:
// each message drafted at once, so that no test waits 10 s for a turn
// that is one message long.
const demoConfig = `channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    coalesce: 0s
`

// startConfigured is startServer with the configuration file config ("":
// the zero-config demo).
func startConfigured(t *testing.T, config string, users ...user) *server {
	t.Helper()
	bin, err := proc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	token := randomHex(t, 24)
	inst := &proc.Instance{
		Binary: bin,
		Dir:    t.TempDir(),
		Config: config,
		Env:    []string{"HANDOFF_API_TOKEN=" + token, "HANDOFF_ADMIN_PASSWORD=" + randomHex(t, 12)},
		Within: startTimeout,
	}
	for _, u := range users {
		// The SPEC's order: --data DIR NAME --role R.
		args := []string{"user", "add", "--data", inst.Data(), u.name, "--role", u.role}
		if u.clients != "" {
			args = append(args, "--clients", u.clients)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = proc.Environ(inst.Env...)
		cmd.Stdin = strings.NewReader(u.password + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("handoff user add %s --role %s: %v\n%s", u.name, u.role, err, out)
		}
	}
	s := &server{t: t, token: token, client: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(s.stop)
	s.run, err = inst.Start(t.Context())
	if err != nil {
		t.Fatalf("handoff serve %v", err)
	}
	s.url = s.run.URL()
	return s
}

// stop ends the server with SIGTERM (SIGKILL after 10s) and prints its
// output when the test failed.
func (s *server) stop() {
	if s.run == nil {
		return
	}
	s.client.CloseIdleConnections()
	if err := s.run.Stop(10 * time.Second); err != nil {
		s.t.Errorf("handoff serve: %v; want exit status 0 after SIGTERM", err)
	}
	if s.t.Failed() {
		s.t.Logf("---- handoff serve (%s), last %d lines of output:\n%s", s.run.Exit(), logTail, s.run.Tail(logTail))
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
	s.postHookTo("demo", h)
}

// postHookTo delivers h to POST /hooks/{channel} and insists on 202 accepted.
func (s *server) postHookTo(channel string, h hook) {
	s.t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := s.client.Post(s.url+"/hooks/"+channel, "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatalf("POST /hooks/%s %s: %v", channel, b, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(raw), `"accepted"`) {
		s.t.Fatalf("POST /hooks/%s %s: %d %s; want 202 {\"status\":\"accepted\",...}", channel, b, resp.StatusCode, bytes.TrimSpace(raw))
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

// eventually fails the test with cond's last word unless cond holds within
// that long (testkit.Eventually, which is the only way these tests wait).
func eventually(t *testing.T, within time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	var ok bool
	var last string
	defer func() { // runs as Eventually's failure ends the test
		if !ok {
			t.Logf("waiting for %s, last seen: %s", what, last)
		}
	}()
	testkit.Eventually(t, within, func() bool { ok, last = cond(); return ok }, what)
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
	repo, err := proc.Root(".")
	if err != nil {
		t.Fatal(err)
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
