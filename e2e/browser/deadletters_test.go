package browser

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// deadConfig has the demo channel approve automatically and deliver to a
// sandbox that refuses every message for good, so each lead is one dead
// letter; "look" goes to a sandbox that takes the message, answers like a
// timeout and can look it up, with one attempt: its reply waits on
// /reconcile until someone looks it up.
const deadConfig = `channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: refuse
    auto_approve: true
    coalesce: 0s
  - name: look
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: look
    auto_approve: true
    coalesce: 0s
providers:
  - {name: refuse, kind: sandbox, fail: permanent}
  - {name: look, kind: sandbox, timeout_after_accept: true}
retry: {max_attempts: 1, base_delay: 100ms, max_delay: 1s}
workers: 4
`

// Bounds of one page of the dead-letter table (50 rows), whatever the
// length of the list.
const (
	maxDeadPageBytes = 60_000
	maxDeadPageNodes = 1_500
)

// pageProbe answers the page's own HTML size (fetched again, as sent, before
// any compression) and its element count, and the table's rows and boxes.
const pageProbe = `fetch(location.href, {credentials: "same-origin"}).then(r => r.text()).then(html => JSON.stringify({
  bytes: new TextEncoder().encode(html).length,
  nodes: document.getElementsByTagName("*").length,
  rows: document.querySelectorAll(".dl-table tbody tr").length,
  ids: Array.from(document.querySelectorAll('.dl-table input[name="id"]')).map(i => i.value),
  next: !!document.querySelector('a[rel="next"]'),
  prev: !!document.querySelector('a[rel="prev"]'),
}))`

type deadPage struct {
	Bytes int      `json:"bytes"`
	Nodes int      `json:"nodes"`
	Rows  int      `json:"rows"`
	IDs   []string `json:"ids"`
	Next  bool     `json:"next"`
	Prev  bool     `json:"prev"`
}

func (b *browser) deadPage(what string) deadPage {
	b.t.Helper()
	raw := run(b, what, chromedp.Evaluate[string](pageProbe, chromedp.EvalAwaitPromise))
	var p deadPage
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		b.t.Fatalf("%s: %v (%s)", what, err, raw)
	}
	return p
}

// TestDeadLettersAtVolume: 500 dead letters render one page of 50 rows of
// a bounded size (under 60 KB of HTML and 1,500 elements) whose Next link
// leads to 50 others; at 390 px the table stacks and nothing scrolls
// sideways; ticking two rows and "Replay selected" starts one bulk replay
// of those two. The reconcile page offers "Look it up now" for a provider
// that can, and the lookup settles the reply. Screenshots at 390 and
// 1366 px go to testdata/out/browser.
func TestDeadLettersAtVolume(t *testing.T) {
	requireEnvironment(t)
	ada := user{name: "ada", role: "admin", password: "correct-horse-battery"}
	s := startConfigured(t, deadConfig, ada)
	const n = 500
	for i := range n {
		h := hook{ID: fmt.Sprintf("m-%03d", i), From: fmt.Sprintf("+1555%07d", i), Text: fmt.Sprintf("Message %d: could you quote a website for my bakery, with online orders and a catering page?", i)}
		if i%3 != 0 {
			h.Name = fmt.Sprintf("Customer %d", i) // the others show their number
		}
		s.postHook(h)
	}
	s.postHookTo("look", hook{ID: "l-1", From: "+15559990001", Name: "Lou Kup", Text: "Is the shop open on Sunday?"})
	eventually(t, 120*time.Second, fmt.Sprintf("%d dead letters and a reply to reconcile", n), func() (bool, string) {
		var dl struct {
			DeadLetters []struct {
				State string `json:"state"`
			} `json:"dead_letters"`
		}
		if err := s.getJSON("/api/v1/dead-letters?kind=outbox", &dl); err != nil {
			return false, err.Error()
		}
		seen := map[string]int{}
		for _, d := range dl.DeadLetters {
			seen[d.State]++
		}
		return seen["failed"] == n && seen["needs_reconciliation"] == 1, fmt.Sprintf("%v", seen)
	})

	b := newBrowser(t)
	b.login(s.url, ada, "/dead-letters", ".dl-table")
	for _, pass := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", desktopWidth, desktopHeight, false}, {"phone", phoneWidth, phoneHeight, true}} {
		b.viewport(pass.width, pass.height, pass.mobile, false)
		b.checkPage(pass.name, int(pass.width), s.url+"/dead-letters") // no sideways scroll, one h1, axe; a screenshot
		b.screen(pass.name + "-first-screen")
		first := b.deadPage("measure the first page")
		t.Logf("%s: the first page of %d dead letters: %d bytes of HTML, %d elements, %d rows", pass.name, n, first.Bytes, first.Nodes, first.Rows)
		if first.Bytes > maxDeadPageBytes || first.Nodes > maxDeadPageNodes {
			t.Errorf("%s: the first page is %d bytes and %d elements; want at most %d and %d", pass.name, first.Bytes, first.Nodes, maxDeadPageBytes, maxDeadPageNodes)
		}
		if first.Rows != 50 || len(first.IDs) != 50 || !first.Next || first.Prev {
			t.Fatalf("%s: %d rows, %d boxes, next %v, prev %v; want 50 rows with boxes and only a Next link", pass.name, first.Rows, len(first.IDs), first.Next, first.Prev)
		}
		b.do("open the next page", chromedp.Click(chromedp.CSS(`a[rel="next"]`)), chromedp.WaitVisible(chromedp.CSS(`a[rel="prev"]`)))
		second := b.deadPage("measure the second page")
		if second.Rows != 50 || !second.Prev || !second.Next {
			t.Errorf("%s: the second page has %d rows, prev %v, next %v; want 50 and both links", pass.name, second.Rows, second.Prev, second.Next)
		}
		for _, id := range second.IDs {
			for _, f := range first.IDs {
				if id == f {
					t.Errorf("%s: %s is on both pages", pass.name, id)
				}
			}
		}
		b.checkPage(pass.name, int(pass.width), b.location())
	}

	// On the phone: tick two rows, replay them; the run's status answers in place.
	b.do("open the first page", chromedp.Navigate(s.url+"/dead-letters"), chromedp.WaitVisible(chromedp.CSS(".dl-table")))
	ids := b.deadPage("read the rows").IDs
	b.do("tick two rows and replay them",
		chromedp.Click(chromedp.CSS(`.dl-table tbody tr:nth-child(1) input[name="id"]`)),
		chromedp.Click(chromedp.CSS(`.dl-table tbody tr:nth-child(2) input[name="id"]`)),
		chromedp.Click(chromedp.CSS(`#selected button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk .bulk-status`)),
	)
	eventually(t, 30*time.Second, "the replay of the two ticked rows to end", func() (bool, string) {
		got, err := b.tryRun(chromedp.Text(chromedp.CSS(`#bulk .bulk-status`)))
		return err == nil && strings.Contains(got, "done") && strings.Contains(got, "2 replayed · 0 skipped · 0 failed · of 2"), got
	})
	status := run(b, "read the status", chromedp.Text(chromedp.CSS(`#bulk .bulk-status`)))
	for _, id := range ids[:2] {
		if !strings.Contains(status, id) {
			t.Errorf("the status does not name %s, a ticked row: %s", id, status)
		}
	}
	b.screen("phone-replayed-selected")

	// One item's details, on their own page.
	b.checkPage("phone", phoneWidth, s.url+"/dead-letters/"+url.PathEscape(ids[2]))
	b.screen("phone-item-first-screen")

	// Reconcile: the provider can look it up, so the page offers it.
	b.checkPage("phone", phoneWidth, s.url+"/reconcile")
	if txt := run(b, "read the reconcile page", chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "Look it up now") || strings.Contains(txt, "cannot be asked again automatically") {
		t.Errorf("the reconcile page of a provider with lookup: want \"Look it up now\" and not \"cannot be asked again\": %.500s", txt)
	}
	b.do("look it up", chromedp.Click(chromedp.CSS(`main form[action$="/lookup"] button`)), chromedp.WaitVisible(chromedp.CSS(`.notice.ok`)))
	if txt := run(b, "read the notice", chromedp.Text(chromedp.CSS(`.notice.ok`))); !strings.Contains(txt, "recorded as sent") {
		t.Errorf("after the lookup: %q, want it recorded as sent", txt)
	}
	b.screenshot("phone-looked-up")
}

// screen saves what the window shows now (not the whole page) as a PNG
// beside the full-page screenshots, and returns its path.
func (b *browser) screen(step string) string {
	b.t.Helper()
	png := run(b, "capture the screen for "+step, chromedp.CaptureScreenshot())
	b.n++
	path := filepath.Join(b.shots, fmt.Sprintf("%s-%02d-%s.png", fileName(b.t.Name()), b.n, step))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", step, err)
		return ""
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// location is the address of the page the browser shows.
func (b *browser) location() string {
	b.t.Helper()
	return run(b, "read the location", chromedp.Location())
}
