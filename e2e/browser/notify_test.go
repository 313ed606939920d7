package browser

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// notifySpy stands in for the browser's Notification before the page's
// scripts run (a headless browser shows none): it counts the permission
// asked for and records each notification; the tab reads as not focused,
// as a tab in the background does.
const notifySpy = `(() => {
  window.__asked = 0; window.__notes = [];
  class Spy { constructor(title, opts) { window.__notes.push(title + " | " + (opts && opts.body || "")); } close() {} }
  Spy.permission = "default";
  Spy.requestPermission = () => { window.__asked++; Spy.permission = "granted"; return Promise.resolve("granted"); };
  window.Notification = Spy;
  document.hasFocus = () => false;
})();`

// TestQueueNotifications: opening /drafts asks nothing; the button asks
// once, and then a new draft arriving while the tab is not focused shows
// one notification saying so.
func TestQueueNotifications(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, cardConfig, alice)
	s.postHook(hook{ID: "n-1", From: "+15550000031", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website for my bakery?"})
	s.waitPending(1)

	b := newBrowser(t)
	b.do("install the spy", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: notifySpy})
		return err
	}))
	b.viewport(desktopWidth, laptopHeight, false, false)
	b.login(s.url, alice, "/drafts", "#card[data-draft]")
	b.do("see the button", chromedp.WaitVisible(chromedp.ID("notify")))
	if n := run(b, "count the asks", chromedp.Evaluate[int](`window.__asked`)); n != 0 {
		t.Fatalf("opening the queue asked %d time(s) for notifications; want none before the button", n)
	}
	b.do("press the button", chromedp.Click(chromedp.ID("notify")))
	eventually(t, stepTimeout, "the button to say notifications are on", func() (bool, string) {
		got, err := b.tryRun(chromedp.Text(chromedp.ID("notify")))
		return err == nil && got == "Stop notifying me", got
	})
	if n := run(b, "count the asks", chromedp.Evaluate[int](`window.__asked`)); n != 1 {
		t.Errorf("the button asked %d time(s); want once", n)
	}
	b.viewShot("notify-on")

	s.postHook(hook{ID: "n-2", From: "+15550000032", Name: "Bea Rossi", Text: "Do you also design logos? 🎨"})
	s.waitPending(2)
	var notes []string
	eventually(t, stepTimeout, "a notification of the new draft", func() (bool, string) {
		ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
		defer cancel()
		var err error
		notes, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__notes`))
		return err == nil && len(notes) > 0, fmt.Sprintf("%q %v", notes, err)
	})
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "1 new draft to approve | 2 waiting") {
		t.Errorf("notifications %q; want one: 1 new draft to approve | 2 waiting in the queue", notes)
	}
}
