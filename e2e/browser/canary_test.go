package browser

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

const canaryConfig = `undo_window: 0s
drafter:
  template: "Hi {{.Name}}, A here."
  canary: {prompt_version: v2, template: "Hello {{.Name}}, this is B.", share: 0.5}
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /from, contact: /from, name: /name, text: /text}
    provider: sandbox
    coalesce: 0s
`

// TestCanaryPanelShown: an admin's overview shows the canary's two
// versions side by side with Promote and Roll back at a phone's width and
// a desktop's, with no sideways scroll; Promote answers in words on the
// same page and the panel then says who promoted it.
func TestCanaryPanelShown(t *testing.T) {
	requireEnvironment(t)
	ada := user{name: "ada", role: "admin", password: "correct-horse-battery"}
	s := startConfigured(t, canaryConfig, ada)
	for i, name := range []string{"Ada Lovelace", "Bea Rossi", "Cy Young", "Zoë Müller"} {
		s.postHook(hook{ID: fmt.Sprintf("m-%d", i), From: fmt.Sprintf("+1555000000%d", i), Name: name, Text: "Do you also design logos? Our budget is around 800 EUR."})
	}
	s.waitPending(4)
	b := newBrowser(t)
	b.login(s.url, ada, "/", "#canary")
	for _, w := range []int64{390, 1366} {
		b.viewport(w, 900, w < 500, false)
		b.do("open the overview", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#canary")))
		wide := run(b, "measure the page", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth + 1`))
		if wide {
			t.Errorf("at %d px the overview scrolls sideways", w)
		}
		b.do("scroll to the canary", chromedp.ScrollIntoView(chromedp.CSS("#canary")))
		b.screenshot(fmt.Sprintf("canary-%d", w))
	}
	panel := run(b, "read the panel", chromedp.Text(chromedp.CSS("#canary")))
	for _, want := range []string{"Running: 50% of new turns are drafted by v2, the rest by v1.", "v1 (A)", "v2 (B)", "Promote v2", "Roll back to v1"} {
		if !strings.Contains(panel, want) {
			t.Errorf("the canary panel lacks %q: %q", want, panel)
		}
	}
	b.do("promote", chromedp.Click(chromedp.CSS(`#canary button[id^="canary-promote-"]`)), chromedp.WaitVisible(chromedp.CSS("main .notice.ok")))
	if got := run(b, "read the notice", chromedp.Text(chromedp.CSS("main .notice.ok"))); !strings.Contains(got, "Promoted v2 for") {
		t.Errorf("after Promote the notice says %q", got)
	}
	if got := run(b, "read the panel", chromedp.Text(chromedp.CSS("#canary"))); !strings.Contains(got, "Promoted by ada") {
		t.Errorf("after Promote the panel says %q; want who promoted it", got)
	}
	b.do("scroll to the canary", chromedp.ScrollIntoView(chromedp.CSS("#canary")))
	b.screenshot("canary-promoted")
}
