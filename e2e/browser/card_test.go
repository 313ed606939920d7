package browser

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// cardConfig is the demo without an undo window (an approved reply goes
// at once), each sender one conversation.
const cardConfig = `undo_window: 0s
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /from, contact: /from, name: /name, text: /text}
    provider: sandbox
    coalesce: 0s
`

// approveAndSend approves d through the API and waits until its reply is sent.
func (s *server) approveAndSend(d draft) {
	s.t.Helper()
	code, raw, err := s.request(http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", nil)
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("approve %s: %d %s %v", d.ID, code, raw, err)
	}
	var row struct {
		OutboxID string `json:"outbox_id"`
	}
	if err := json.Unmarshal(raw, &row); err != nil {
		s.t.Fatal(err)
	}
	eventually(s.t, stepTimeout, "the reply of "+d.ID+" to be sent", func() (bool, string) {
		var o outboxRow
		err := s.getJSON("/api/v1/outbox/"+row.OutboxID, &o)
		return err == nil && o.Status == "sent", fmt.Sprintf("%+v %v", o, err)
	})
}

// TestCardConversation opens the card of a lead's second message: the
// first message and the reply sent to it come before the turn's message,
// which is marked, at 1366 px and at 390 px (screenshots of both), and
// nothing scrolls sideways at 390 px.
func TestCardConversation(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, cardConfig, alice)
	s.postHook(hook{ID: "c-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Hi! I returned the blue kettle last week. Where is my refund for order 1042?"})
	first := s.waitPending(1)[0]
	s.approveAndSend(first)
	s.postHook(hook{ID: "c-2", From: "+15550000001", Text: "Thanks. It is still not on my card; could you check again?"})
	second := s.waitPending(1)[0]

	b := newBrowser(t)
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.login(s.url, alice, "/drafts?id="+second.ID, "#conversation")
	conv := run(b, "read the conversation", chromedp.Text(chromedp.CSS("#card")))
	for _, want := range []string{"Where is my refund for order 1042?", first.Text, "sent", "this turn", "still not on my card"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the card lacks %q: %s", want, conv)
		}
	}
	if i, j := strings.Index(conv, first.Text), strings.Index(conv, "still not on my card"); i < 0 || j < i {
		t.Errorf("the reply (%d) is not before the turn's message (%d)", i, j)
	}
	if got := run(b, "read the name", chromedp.Text(chromedp.CSS("#card h2"))); got != "Ada Lovelace" {
		t.Errorf("the card calls the lead %q; want the name its first message gave", got)
	}
	b.screenshot("conversation-1366")

	b.viewport(phoneWidth, phoneHeight, true, false)
	b.do("reload at 390 px", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#conversation")))
	if w := run(b, "measure the width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); len(w) != 2 || w[0] > w[1] {
		t.Errorf("the card scrolls sideways at 390 px: scrollWidth, innerWidth = %v", w)
	}
	b.screenshot("conversation-390")
}

// TestQueueHelpAndSelection: "?" opens the shortcuts and Escape closes
// them, the keys still work after; x ticks the card's draft, j moves on,
// x ticks the next, and "Approve selected" approves both with one post.
func TestQueueHelpAndSelection(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, cardConfig, alice)
	s.postHook(hook{ID: "m-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Could you quote a website?"})
	s.postHook(hook{ID: "m-2", From: "+15550000002", Name: "Bea Rossi", Text: "Do you design logos?"})
	s.postHook(hook{ID: "m-3", From: "+15550000003", Name: "Cy Young", Text: "Are you open on Sunday?"})
	pending := s.waitPending(3)

	b := newBrowser(t)
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.login(s.url, alice, "/drafts", "#card[data-draft]")
	b.do("press ?", press("?"), chromedp.WaitVisible(chromedp.CSS("dialog#help[open]")))
	if got := run(b, "read the dialog", chromedp.Text(chromedp.CSS("dialog#help"))); !strings.Contains(got, "Keyboard shortcuts") || !strings.Contains(got, "approve the draft as written") {
		t.Errorf("the help dialog says %q", got)
	}
	b.screenshot("help")
	b.do("press a inside the dialog, then Escape", press("a"), press(kb.Escape), chromedp.WaitNotPresent(chromedp.CSS("dialog#help[open]")))
	if got, _ := s.drafts("approved"); len(got) != 0 {
		t.Fatalf("a key pressed while the help was open approved %d draft(s)", len(got))
	}

	cur := run(b, "read the card", chromedp.AttributeValue(chromedp.CSS("#card"), "data-draft")).Value
	b.do("press x", press("x"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#queue-list input.pick[value=%q]:checked`, cur))))
	b.do("press j", press("j"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft]:not([data-draft=%q])`, cur))))
	next := run(b, "read the next card", chromedp.AttributeValue(chromedp.CSS("#card"), "data-draft")).Value
	b.do("press x on the next draft", press("x"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#queue-list input.pick[value=%q]:checked`, next))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#queue-list input.pick[value=%q]:checked`, cur))))
	if got := run(b, "read the count", chromedp.Text(chromedp.ID("selected-count"))); got != "2 selected." {
		t.Errorf("the selection says %q; want 2 selected", got)
	}
	b.screenshot("two-selected")
	b.do("approve selected", chromedp.Click(chromedp.ID("approve-selected")), chromedp.WaitVisible(chromedp.ID("selection-result")))
	if got := run(b, "read the answer", chromedp.Text(chromedp.ID("selection-result"))); !strings.Contains(got, "2 of 2 selected drafts approved.") {
		t.Errorf("the answer says %q", got)
	}
	b.screenshot("approved-selected")
	approved, err := s.drafts("approved")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range approved {
		got[d.ID] = d.Decision != nil && d.Decision.By == "alice"
	}
	if len(approved) != 2 || !got[cur] || !got[next] {
		t.Errorf("approved %v; want %s and %s, by alice", got, cur, next)
	}
	if left := s.waitPending(1); left[0].ID == cur || left[0].ID == next || !strings.Contains(strings.Join([]string{pending[0].ID, pending[1].ID, pending[2].ID}, " "), left[0].ID) {
		t.Errorf("the draft left waiting is %s", left[0].ID)
	}
}
