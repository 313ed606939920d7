package browser

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// undoConfig is the demo channel drafting at once, sending to the sandbox,
// with approvals held for window.
func undoConfig(window string) string {
	return "undo_window: " + window + `
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /from}
    provider: sandbox
    coalesce: 0s
`
}

// TestUndoInsideTheWindow approves with a and sees the undo stack name the
// customer, "Sending to Ada Lovelace in N s · Undo", over the next draft;
// moves on with j and reloads the page, and the entry is still there, its
// seconds counting down (read from the server: screenshots at 1366 and 390
// px); then presses u: the draft is back on the card and in the queue, its
// reply's outbox row is gone, and the provider got nothing.
func TestUndoInsideTheWindow(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, undoConfig("1m"), alice)
	s.postHook(hook{ID: "u-1", From: "+15550000011", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website for my bakery?"})
	s.waitPending(1)
	s.postHook(hook{ID: "u-2", From: "+15550000012", Name: "Bea Rossi", Text: "Do you also design logos?"})
	s.waitPending(2)
	s.postHook(hook{ID: "u-3", From: "+15550000013", Name: "Chen Wei", Text: "Are you open on Saturdays?"})
	drafts := s.waitPending(3)
	first, second, third := drafts[0], drafts[1], drafts[2]

	b := newBrowser(t)
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.login(s.url, alice, "/drafts", fmt.Sprintf(`#card[data-draft=%q] #approve`, first.ID))

	b.do("press a",
		press("a"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q]`, second.ID))),
		chromedp.WaitVisible(chromedp.CSS(`#undo-stack #undo`)),
	)
	entry := func() string { return run(b, "read the stack", chromedp.Text(chromedp.ID("undo-stack"))) }
	if got := entry(); !strings.Contains(got, "Sending to Ada Lovelace") || !strings.Contains(got, "in ") || !strings.Contains(got, "Undo") || strings.Contains(got, "+15550000011") {
		t.Errorf("the stack says %q; want the customer's name, the seconds left and Undo, not the number", got)
	}

	b.do("press j",
		press("j"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q]`, third.ID))),
		chromedp.WaitVisible(chromedp.CSS(`#undo-stack #undo`)),
	)
	if got := entry(); !strings.Contains(got, "Sending to Ada Lovelace") {
		t.Errorf("after j the stack says %q; want Ada's reply still undoable", got)
	}
	b.screenshot("undo-stack-after-j-1366")
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#undo-stack #undo`)))
	before := entry()
	if !strings.Contains(before, "Sending to Ada Lovelace") {
		t.Errorf("after a reload the stack says %q; want Ada's reply still undoable", before)
	}
	eventually(t, stepTimeout, "the stack to count the seconds down", func() (bool, string) {
		got, err := b.tryRun(chromedp.Text(chromedp.CSS("#undo-stack .undo-left")))
		return err == nil && got != "" && !strings.Contains(before, got), fmt.Sprintf("seconds left %q, first %q (%v)", got, before, err)
	})
	b.viewport(phoneWidth, phoneHeight, true, false)
	b.do("see the stack at 390 px", chromedp.WaitVisible(chromedp.CSS(`#undo-stack #undo`)))
	if w := run(b, "measure the page", chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`)); w > 0 {
		t.Errorf("with the stack the page scrolls %d px sideways at %d px", w, phoneWidth)
	}
	b.screenshot("undo-stack-after-reload-390")
	b.viewport(desktopWidth, desktopHeight, false, false)

	const marker = `window.__handoffNoReload`
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](marker+` = "set"`))
	b.do("press u",
		press("u"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q] #approve`, first.ID))),
	)
	if got := run(b, "read the notice", chromedp.Text(chromedp.CSS("#card .notice.ok"))); !strings.Contains(got, "Undone: the reply to Ada Lovelace was not sent") {
		t.Errorf("after u, the notice says %q; want it to say Ada's reply was not sent", got)
	}
	if got := run(b, "read the marker", chromedp.Evaluate[string](`String(`+marker+`)`)); got != "set" {
		t.Fatalf("the page was loaded again (marker %q); Undo must not reload it", got)
	}
	if n := run(b, "look for the Undo button", chromedp.Evaluate[int](`document.querySelectorAll("#undo").length`)); n != 0 {
		t.Errorf("after the undo the stack still offers Undo (%d buttons)", n)
	}
	b.screenshot("undone")

	waiting := s.waitPending(3)
	if waiting[0].ID != first.ID {
		t.Errorf("the queue after the undo starts with %s; want the undone draft %s back at its place", waiting[0].ID, first.ID)
	}
	row := first.ConversationID + ":" + first.ID // the outbox id (store.OutboxID)
	if code, _, err := s.request(http.MethodGet, "/api/v1/outbox/"+url.PathEscape(row), nil); err != nil || code != http.StatusNotFound {
		t.Errorf("GET the undone reply's outbox row %s: %d, %v; want 404", row, code, err)
	}
	msgs, err := s.sandbox()
	if err != nil || len(msgs) != 0 {
		t.Errorf("the provider holds %d messages (%v) after the undo; want 0", len(msgs), err)
	}
}

// TestUndoWindowPasses approves with a under a one-second window and waits
// on the provider: exactly one message arrives, and the stack's entry goes
// once its window ends (the stack's poll), leaving no Undo.
func TestUndoWindowPasses(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, undoConfig("1s"), alice)
	s.postHook(hook{ID: "w-1", From: "+15550000021", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website for my bakery?"})
	s.waitPending(1)
	s.postHook(hook{ID: "w-2", From: "+15550000022", Name: "Bea Rossi", Text: "Do you also design logos?"})
	drafts := s.waitPending(2)

	b := newBrowser(t)
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.login(s.url, alice, "/drafts", fmt.Sprintf(`#card[data-draft=%q] #approve`, drafts[0].ID))
	b.do("press a",
		press("a"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q]`, drafts[1].ID))),
	)
	var msgs []sandboxMessage
	eventually(t, 15*time.Second, "one message at the provider", func() (bool, string) {
		var err error
		msgs, err = s.sandbox()
		return err == nil && len(msgs) >= 1, fmt.Sprintf("%d messages (%v)", len(msgs), err)
	})
	eventually(t, stepTimeout, "the stack to drop the entry", func() (bool, string) {
		n, err := b.tryRun(chromedp.Evaluate[string](`String(document.querySelectorAll("#undo-stack .undo-entry").length)`))
		return err == nil && n == "0", fmt.Sprintf("%s entries (%v)", n, err)
	})
	b.screenshot("undo-window-over")
	if len(msgs) != 1 || msgs[0].Repeats != 0 || msgs[0].To != "+15550000021" {
		t.Fatalf("the provider holds %+v; want exactly one message to +15550000021", msgs)
	}
	// The late Undo is refused: the row is sent.
	code, body, err := s.request(http.MethodPost, "/api/v1/drafts/"+url.PathEscape(drafts[0].ID)+"/undo", nil)
	if err != nil || code != http.StatusConflict || !strings.Contains(string(body), "can no longer be undone") {
		t.Errorf("POST undo after the window: %d %s, %v; want 409", code, body, err)
	}
	if again, err := s.sandbox(); err != nil || len(again) != 1 {
		t.Errorf("the provider holds %d messages (%v); want still 1", len(again), err)
	}
}
