package browser

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/testkit/corpus"
)

// clientsConfig is the demo split between two clients: web-a is acme's,
// web-b is bolt's.
const clientsConfig = `undo_window: 0s
clients:
  - {id: acme, name: Acme}
  - {id: bolt, name: Bolt}
channels:
  - name: web-a
    client: acme
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: sandbox
    coalesce: 0s
  - name: web-b
    client: bolt
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: sandbox
    coalesce: 0s
`

// pollLog records the status of every answer to the live queue's poll
// in window.__polls.
const pollLog = `window.__polls = [];
document.addEventListener("htmx:afterRequest", (ev) => {
  const p = ev.detail.pathInfo && ev.detail.pathInfo.requestPath || "";
  if (p.startsWith("/drafts/live")) window.__polls.push(ev.detail.xhr.status);
});`

// TestLimitedQueueLive: an approver limited to one client keeps /drafts
// open; a message of the other client's channel and then one of their own
// arrive: their own draft comes onto the card without a reload, the
// other's never shows, and every poll answered 200 or 304 (not 404).
func TestLimitedQueueLive(t *testing.T) {
	requireEnvironment(t)
	lee := user{name: "lee", role: "approver", password: "correct-horse-battery", clients: "acme"}
	s := startConfigured(t, clientsConfig, lee)

	b := newBrowser(t)
	b.viewport(desktopWidth, laptopHeight, false, false)
	b.login(s.url, lee, "/drafts", "#card.empty")
	b.do("log the polls", chromedp.Evaluate[chromedp.Void](pollLog))
	s.postBodyTo("web-b", corpus.MessageAs("hebrew", "compact", "bolt-1", "conv-bolt-1", ""))
	s.postBodyTo("web-a", corpus.MessageAs("emoji", "pretty2", "acme-1", "conv-acme-1", ""))
	pending := s.waitPending(2)
	var own string
	for _, d := range pending {
		if d.EventKey == "web-a:acme-1" {
			own = d.ID
		}
	}
	if own == "" {
		t.Fatalf("no draft of web-a:acme-1 among %+v", pending)
	}
	b.do("see acme's draft arrive on the card", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q] #approve`, own))))
	polls := run(b, "read the polls", chromedp.Evaluate[[]int](`window.__polls`))
	if len(polls) == 0 {
		t.Fatal("the card changed, but no poll was logged")
	}
	for _, code := range polls {
		if code != 200 && code != 304 {
			t.Errorf("a poll of the limited approver's queue answered %d (all: %v); want 200 or 304", code, polls)
			break
		}
	}
	if list := run(b, "read the list", chromedp.Text(chromedp.ID("queue-list"))); strings.Contains(list, "שלום") {
		t.Errorf("the limited approver's list shows the other client's message: %q", list)
	}
	b.viewShot("limited-live")
}

// postBodyTo is postBody on another channel's hook.
func (s *server) postBodyTo(channel string, b corpus.Body) {
	s.t.Helper()
	resp, err := s.client.Post(s.url+"/hooks/"+channel, b.ContentType, strings.NewReader(string(b.Raw)))
	if err != nil {
		s.t.Fatalf("POST /hooks/%s %s: %v", channel, b.Name(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		s.t.Fatalf("POST /hooks/%s %s: %d; want 202", channel, b.Name(), resp.StatusCode)
	}
}

// TestQueueNewBelow fills the list (20 drafts, a right-to-left message
// from a person with a left-to-right name among them), then three more
// arrive while /drafts is open: the list ends saying "3 new drafts
// below". The right-to-left message keeps its order in the list: its
// first word is at the right end of its line, the ellipsis at the left.
func TestQueueNewBelow(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, corpusConfig, alice)
	arabic := corpus.TextNamed("arabic").Body
	s.postHook(hook{ID: "rtl-1", From: "+15550200000", Name: "Ada Lovelace", Text: arabic + " " + arabic})
	for i := 1; i < queuePageSize; i++ {
		s.postBody(corpus.Message(i, fmt.Sprintf("fill-%02d", i), fmt.Sprintf("conv-fill-%02d", i), fmt.Sprintf("+1555020%04d", i)))
	}
	s.waitPending(queuePageSize)

	b := newBrowser(t)
	b.viewport(desktopWidth, laptopHeight, false, false)
	b.login(s.url, alice, "/drafts", "#card[data-draft]")
	if n := run(b, "count the more line", chromedp.Evaluate[int](`document.querySelectorAll("#queue-more").length`)); n != 0 {
		t.Errorf("with exactly %d drafts the list says more wait after it", queuePageSize)
	}
	// The right-to-left line: laid out right to left, its first letter
	// at the right end, cut on the left.
	type rtl struct {
		Dir                        string
		First, BoxRight, LineRight float64
		Scroll, Client             float64
	}
	got := run(b, "measure the right-to-left line", chromedp.Evaluate[rtl](`(() => {
	  const li = [...document.querySelectorAll("#queue-list li")].find(li => li.textContent.includes("Ada Lovelace"));
	  const bdi = li.querySelector(".line bdi");
	  const r = document.createRange(); r.setStart(bdi.firstChild, 0); r.setEnd(bdi.firstChild, 1);
	  return {Dir: getComputedStyle(bdi).direction, First: r.getBoundingClientRect().right, BoxRight: bdi.getBoundingClientRect().right, LineRight: bdi.parentElement.getBoundingClientRect().right,
	    Scroll: bdi.scrollWidth, Client: bdi.clientWidth};
	})()`))
	if got.Dir != "rtl" || got.Scroll <= got.Client || got.BoxRight-got.First > 2 || got.First-got.BoxRight > 2 || got.First > got.LineRight+1 {
		t.Errorf("the right-to-left line: direction %s, its first letter ends at x=%.0f, its box at x=%.0f, the line at x=%.0f, %0.f of %.0f px shown; want rtl, the first letter at the box's right end inside the line, and the line cut",
			got.Dir, got.First, got.BoxRight, got.LineRight, got.Client, got.Scroll)
	}

	for i := range 3 {
		s.postBody(corpus.Message(40+i, fmt.Sprintf("new-%d", i), fmt.Sprintf("conv-new-%d", i), fmt.Sprintf("+1555030%04d", i)))
	}
	s.waitPending(queuePageSize + 3)
	b.do("see the list say 3 new drafts below", chromedp.WaitVisible(chromedp.CSS(`#queue-more .more-new`)))
	eventually(t, stepTimeout, "the list to say 3 new drafts below", func() (bool, string) {
		got, err := b.tryRun(chromedp.Text(chromedp.ID("queue-more")))
		return err == nil && strings.Contains(got, "3 new drafts below.") && strings.Contains(got, "3 more drafts wait after these."), got
	})
	b.do("scroll to the list's end", chromedp.ScrollIntoView(chromedp.ID("queue-more")))
	b.viewShot("new-below")
}

// queuePageSize is how many drafts the queue's list holds (web.queuePage).
const queuePageSize = 20
