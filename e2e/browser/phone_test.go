package browser

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/proc"
)

// phone is the viewport of a common phone (CSS pixels); desktop is a
// common laptop screen.
const (
	phoneWidth, phoneHeight     = 390, 844
	desktopWidth, desktopHeight = 1366, 900
)

// passes are the widths and colour schemes a page is held to the page
// rules at: a phone, a desktop, and the phone in dark mode.
var passes = []struct {
	name          string
	width, height int64
	mobile, dark  bool
}{
	{"phone", phoneWidth, phoneHeight, true, false},
	{"desktop", desktopWidth, desktopHeight, false, false},
	{"phone-dark", phoneWidth, phoneHeight, true, true},
}

// axeSource is axe-core, vendored from npm (testdata/README.md): the
// browser test injects it into each page it opens.
//
//go:embed testdata/axe.min.js
var axeSource string

// axeRun runs every axe-core rule that applies to the page as it stands
// and returns the violations of impact serious or critical, with up to
// three of the nodes of each (axe's CSS selector and its summary).
const axeRun = `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
  .filter(v => v.impact === "serious" || v.impact === "critical")
  .map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.length,
    first: v.nodes.slice(0, 3).map(n => ({target: n.target.join(" "), summary: (n.failureSummary || "").replace(/\s+/g, " ")}))})))`

// axeViolation is one rule that failed, as axeRun answers.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  int    `json:"nodes"`
	First  []struct {
		Target  string `json:"target"`
		Summary string `json:"summary"`
	} `json:"first"`
}

func (v axeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, %d nodes): %s", v.ID, v.Impact, v.Nodes, v.Help)
	for _, n := range v.First {
		fmt.Fprintf(&b, "\n\t\t%s: %s", n.Target, n.Summary)
	}
	return b.String()
}

// layoutProbe measures the page as a person sees it: how wide the
// document is against the window, how many h1 it has, and the widest
// element that sticks out on the right (to name the culprit when the
// page scrolls sideways).
const layoutProbe = `((w) => {
  const de = document.documentElement;
  let worst = "", right = w;
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.right > right + 0.5) {
      right = r.right;
      worst = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "");
    }
  }
  return JSON.stringify({scroll: de.scrollWidth, inner: window.innerWidth, h1: document.querySelectorAll("h1").length, worst: worst, right: Math.round(right)});
})`

// layout is what layoutProbe answers.
type layout struct {
	Scroll int    `json:"scroll"`
	Inner  int    `json:"inner"`
	H1     int    `json:"h1"`
	Worst  string `json:"worst"`
	Right  int    `json:"right"`
}

// phoneConfig is the demo with something on every page: the demo
// channel's replies go to a provider that refuses them (an approved one
// becomes a dead letter), and the auto-approved "stall" channel's to one
// that times out after accepting and cannot look anything up (its reply
// waits for a person on /reconcile).
const phoneConfig = `channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: refuse
    coalesce: 0s
  - name: stall
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: stall
    auto_approve: true
    coalesce: 0s
providers:
  - {name: refuse, kind: sandbox, fail: permanent}
  - {name: stall, kind: sandbox, timeout_after_accept: true, lookup: false}
retry: {base_delay: 100ms, max_delay: 1s}
`

// TestEveryPageFitsAPhone opens every page of the dashboard, as an admin
// who sees them all, with drafts waiting, a dead letter, a reply to
// reconcile and a timeline to show: at 390 px and at 1366 px, and at
// 390 px again in dark mode (prefers-color-scheme). No page may scroll
// sideways (scrollWidth <= innerWidth), every page has exactly one h1,
// and axe-core finds no serious or critical accessibility violation on
// any of them (contrast included, in both colour schemes). On /drafts at
// 390×844 the message, the reply and the Approve / Reject buttons are all
// inside the first screen. The login page and the first start's setup
// page are held to the same. It saves a screenshot of each page.
func TestEveryPageFitsAPhone(t *testing.T) {
	requireEnvironment(t)
	ada := user{name: "ada", role: "admin", password: "correct-horse-battery"}
	s := startConfigured(t, phoneConfig, ada)
	for _, h := range []hook{
		{ID: "m-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website for my bakery? We open in March and need online orders, a menu and a page for catering."},
		{ID: "m-2", From: "+15550000002", Name: "", Text: "Do you also design logos? Our budget is around 800 EUR."},
		{ID: "m-3", From: "+15550000003", Name: "Cy Young", Text: "Please send me the invoice for last month again."},
	} {
		s.postHook(h)
	}
	s.postHookTo("stall", hook{ID: "s-1", From: "+15550000004", Name: "Dee Stall", Text: "Is the shop open on Sunday?"})
	pending := s.waitPending(3)
	eventKey := pending[0].EventKey

	// The third reply is approved and refused by its provider: a dead letter.
	if code, raw, err := s.request(http.MethodPost, "/api/v1/drafts/"+pending[2].ID+"/approve", map[string]any{}); err != nil || code != http.StatusOK {
		t.Fatalf("approve %s: %d %s %v", pending[2].ID, code, raw, err)
	}
	eventually(t, 30*time.Second, "a dead letter and a reply to reconcile", func() (bool, string) {
		var dl struct {
			DeadLetters []struct {
				State string `json:"state"`
			} `json:"dead_letters"`
		}
		if err := s.getJSON("/api/v1/dead-letters", &dl); err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, d := range dl.DeadLetters {
			seen[d.State] = true
		}
		return seen["failed"] && seen["needs_reconciliation"], fmt.Sprintf("dead letters: %+v", dl.DeadLetters)
	})

	pages := []string{
		"/", "/drafts", "/drafts?owner=mine", "/handoffs", "/clients", "/search?q=" + url.QueryEscape(eventKey),
		"/search?q=Ada", "/events/" + eventKey, "/events/" + pending[2].EventKey, "/account", "/dead-letters",
		"/reconcile", "/keys", "/backups", "/users", "/settings", "/audit", "/events/demo:no-such-message",
	}

	b := newBrowser(t)
	b.do("phone viewport", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile))
	b.login(s.url, ada, "/drafts", "#card[data-draft]")

	// The queue on a phone: the whole decision on the first screen.
	type box struct{ Top, Bottom, Right float64 }
	for _, sel := range []string{"#card blockquote.message", "#draft-text", "#approve", "#approve-edit", "#reject"} {
		r := run(b, "measure "+sel, chromedp.Evaluate[box](fmt.Sprintf(
			`(r => ({Top: r.top, Bottom: r.bottom, Right: r.right}))(document.querySelector(%q).getBoundingClientRect())`, sel)))
		if r.Bottom > phoneHeight || r.Right > phoneWidth {
			t.Errorf("/drafts at %dx%d: %s ends at y=%.0f, x=%.0f; want it inside the first screen", phoneWidth, phoneHeight, sel, r.Bottom, r.Right)
		}
	}

	for _, pass := range passes {
		b.viewport(pass.width, pass.height, pass.mobile, pass.dark)
		for _, p := range pages {
			b.checkPage(pass.name, int(pass.width), s.url+p)
		}
	}

	// Logged out: the login page, and the page of a setup link that was used.
	b.do("log out", chromedp.Navigate(s.url+"/drafts"), chromedp.Click(chromedp.CSS(`.me button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.login`)))
	setup := setupLink(t)
	for _, pass := range []struct {
		name         string
		dark, mobile bool
		width        int64
	}{{"phone", false, true, phoneWidth}, {"phone-dark", true, true, phoneWidth}, {"desktop", false, false, desktopWidth}} {
		b.viewport(pass.width, phoneHeight, pass.mobile, pass.dark)
		b.checkPage(pass.name, int(pass.width), s.url+"/login")
		b.checkPage(pass.name, int(pass.width), s.url+"/setup/not-a-live-link")
		b.checkPage(pass.name, int(pass.width), setup)
	}
}

// viewport sets the window's size, touch and colour scheme.
func (b *browser) viewport(width, height int64, mobile, dark bool) {
	b.t.Helper()
	var opts []chromedp.EmulateViewportOption
	if mobile {
		opts = append(opts, chromedp.EmulateMobile)
	}
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	b.do(fmt.Sprintf("viewport %dx%d, %s", width, height, scheme),
		chromedp.EmulateViewport(width, height, opts...),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
			return err
		}))
}

// checkPage opens u and holds it to the page rules at width: no sideways
// scroll, one h1, no serious or critical axe-core violation; then it
// saves a screenshot named after the pass and the path.
func (b *browser) checkPage(pass string, width int, u string) {
	t := b.t
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	path := parsed.RequestURI()
	b.do("open "+path, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("main")))
	b.checkShown(pass, width, path)
}

// checkShown holds the page the browser shows (path, opened by a
// navigation or a form's answer) to the page rules at width.
func (b *browser) checkShown(pass string, width int, path string) {
	t := b.t
	t.Helper()
	l := run(b, "measure "+path, chromedp.Evaluate[string](fmt.Sprintf("%s(%d)", layoutProbe, width)))
	var got layout
	if err := json.Unmarshal([]byte(l), &got); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// A mobile browser zooms out to show a page that is too wide, so
	// innerWidth grows with the page: both are held to the device width.
	if got.Scroll > got.Inner || got.Inner > width {
		t.Errorf("%s at %d px (%s) scrolls sideways: scrollWidth %d, innerWidth %d (widest: %s reaching x=%d)", path, width, pass, got.Scroll, got.Inner, got.Worst, got.Right)
	}
	if got.H1 != 1 {
		t.Errorf("%s has %d h1 elements; want exactly one", path, got.H1)
	}
	b.do("inject axe-core into "+path, chromedp.Evaluate[chromedp.Void](axeSource))
	vs := run(b, "run axe-core on "+path, chromedp.Evaluate[[]axeViolation](axeRun, chromedp.EvalAwaitPromise))
	for _, v := range vs {
		t.Errorf("%s at %d px (%s): axe-core: %s", path, width, pass, v)
	}
	b.screenshot(fmt.Sprintf("%s-%d-%s", pass, width, strings.Trim(fileName(path), "-")))
}

// setupMessage is the line a first start without users prints when its
// stdout is not a terminal: the file that holds the link, not the link.
var setupMessage = regexp.MustCompile(`the setup link is in (\S+) \(`)

// setupLink starts another server with no users and no
// HANDOFF_ADMIN_PASSWORD and returns the setup link it prints, live
// until the test ends.
func setupLink(t *testing.T) string {
	t.Helper()
	bin, err := proc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	inst := &proc.Instance{Binary: bin, Dir: t.TempDir(), Within: startTimeout}
	p, err := inst.Start(t.Context())
	if p != nil {
		t.Cleanup(func() {
			if err := p.Stop(10 * time.Second); err != nil {
				t.Errorf("handoff serve (for the setup page): %v; want exit status 0 after SIGTERM", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("handoff serve with no users: %v", err)
	}
	var file string
	eventually(t, startTimeout, "the setup link's file in the first start's output", func() (bool, string) {
		m := setupMessage.FindStringSubmatch(p.Tail(logTail))
		if m != nil {
			file = m[1]
		}
		return m != nil, p.Tail(logTail)
	})
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the setup link's file: %v", err)
	}
	return strings.TrimSpace(string(raw))
}
