package browser

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestFlaggedCard: the scripted model answers a German customer in English
// with a price, a date, a time, a phone number and a link that are not in
// the facts (and one amount that is). On a channel with auto_approve the
// draft waits for a person; its card says why, names the customer's
// language and the reply's, and marks each invented figure in the reply,
// escaped (the reply's <b> is text), at 1366 px and at 390 px (screenshots
// of both), without scrolling sideways.
func TestFlaggedCard(t *testing.T) {
	requireEnvironment(t)
	const reply = "Hello Zoë! Yes: a haircut is €45 and colour 1,200.00 EUR. We can see you on 12 March at 8am. " +
		"Call 0800 123 4567 or book at https://salon.example/deals & <b>save</b>."
	m := testkit.NewModel(t)
	m.Answer(func(testkit.ModelCall) testkit.Reply {
		raw, _ := json.Marshal(map[string]any{"reply": reply, "intent": "sales", "name": "Zoë", "email": nil, "phone": nil, "summary": "s", "confidence": 0.9})
		return testkit.JSONReply(string(raw))
	})
	facts := filepath.Join(t.TempDir(), "facts.txt")
	if err := os.WriteFile(facts, []byte("Colour from 1200 EUR. Open Mon–Fri 9:00–17:30.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`undo_window: 0s
drafter: {kind: openai, base_url: %s, model: m, prompt_version: p1, timeout: 10s, facts_file: %s}
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /from, contact: /from, name: /name, text: /text}
    provider: sandbox
    coalesce: 0s
    auto_approve: true
`, m.URL, facts)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, config, alice)
	emoji := corpus.TextNamed("emoji").Body
	s.postHook(hook{ID: "g-1", From: "+15550000001", Name: "Zoë 🌸", Text: "Guten Tag! Ich hätte gern einen Termin für einen Haarschnitt und eine Farbe. Was kostet das? " + emoji})
	d := s.waitPending(1)[0] // auto_approve left it waiting

	b := newBrowser(t)
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.login(s.url, alice, "/drafts?id="+d.ID, "#guard-flags")
	flags := run(b, "read the flags", chromedp.Text(chromedp.CSS("#guard-flags")))
	for _, want := range []string{"Check before sending", "left this one for you", "The customer wrote in German; the reply is in English", "€45 (price)", "https://salon.example/deals (link)"} {
		if !strings.Contains(flags, want) {
			t.Errorf("the flags lack %q: %s", want, flags)
		}
	}
	marks := run(b, "read the marks", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#guard-marked mark')].map(m => m.textContent)`))
	if want := []string{"€45", "12 March", "8am", "0800 123 4567", "https://salon.example/deals"}; strings.Join(marks, "|") != strings.Join(want, "|") {
		t.Errorf("the reply marks %q, want %q (1,200.00 EUR is in the facts)", marks, want)
	}
	if bold := run(b, "look for markup", chromedp.Evaluate[bool](`document.querySelector('#guard-marked b') !== null`)); bold {
		t.Error("the reply's <b> was rendered as markup, not text")
	}
	if got := run(b, "read the reply", chromedp.Text(chromedp.CSS("#guard-marked"))); !strings.Contains(got, "& <b>save</b>.") {
		t.Errorf("the marked reply reads %q", got)
	}
	b.screenshot("flagged-1366")

	b.viewport(phoneWidth, phoneHeight, true, false)
	b.do("reload at 390 px", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#guard-flags")))
	if w := run(b, "measure the width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); len(w) != 2 || w[0] > w[1] {
		t.Errorf("the card scrolls sideways at 390 px: scrollWidth, innerWidth = %v", w)
	}
	b.screenshot("flagged-390")
	b.do("scroll to the decision", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.body.scrollHeight)`), chromedp.Click(chromedp.CSS("#reject-reasons > summary")),
		chromedp.WaitVisible(chromedp.ID("reject-wrong_facts")))
	b.screenshot("flagged-390-reasons")
}
