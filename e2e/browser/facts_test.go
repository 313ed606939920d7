package browser

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// TestFactsPageAndCitedCard: an admin edits the client's facts on its
// page (version 2, its diff shown, the facts' <b> as text), then the next
// draft is written from version 2, the scripted model citing two of its
// entries, and the card shows them; both pages at 1366 px and at 390 px
// (screenshots of each), without scrolling sideways.
func TestFactsPageAndCitedCard(t *testing.T) {
	requireEnvironment(t)
	m := testkit.NewModel(t)
	m.Answer(testkit.CiteFacts("Hi Zoë! A haircut is €35 and colour starts at 1,200.00 EUR; we are open Mon–Fri 9:00–17:30.", "haircut", "colour"))
	file := filepath.Join(t.TempDir(), "facts.md")
	if err := os.WriteFile(file, []byte("- Haircut €35\n- Open Mon–Fri 9:00–17:30\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`undo_window: 0s
drafter: {kind: openai, base_url: %s, model: m, prompt_version: p1, timeout: 10s, facts_file: %s}
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /from, contact: /from, name: /name, text: /text}
    provider: sandbox
    coalesce: 0s
`, m.URL, file)
	ada := user{name: "ada", role: "admin", password: "correct-horse-battery"}
	s := startConfigured(t, config, ada)

	b := newBrowser(t)
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.login(s.url, ada, "/clients/default/facts", "#facts-form")
	if got := run(b, "read the current facts", chromedp.Text(chromedp.CSS("#facts-shown"))); !strings.Contains(got, "Current facts: version 1") || !strings.Contains(got, "F1") {
		t.Errorf("the facts page shows %q", got)
	}
	edited := "- Haircut €35\n- Colour from 1,200.00 EUR & <b>toner</b> included\n- Open Mon–Fri 9:00–17:30\n- " + corpus.TextNamed("arabic").Body
	b.do("edit and save",
		chromedp.SetValue(chromedp.CSS("#facts-text"), edited),
		chromedp.Click(chromedp.CSS("#facts-save")),
		chromedp.WaitVisible(chromedp.CSS("#facts-diff")),
	)
	if got := run(b, "read the diff", chromedp.Text(chromedp.CSS("#facts-diff"))); !strings.Contains(got, "Changes from version 1 to version 2") || !strings.Contains(got, "Colour from 1,200.00 EUR & <b>toner</b> included") {
		t.Errorf("the diff reads %q", got)
	}
	if n := run(b, "count the added lines", chromedp.Evaluate[int](`document.querySelectorAll('#facts-diff .diff-add').length`)); n != 2 {
		t.Errorf("the diff adds %d lines, want 2", n)
	}
	if bold := run(b, "look for markup", chromedp.Evaluate[bool](`document.querySelector('#facts-shown b, #facts-diff b') !== null`)); bold {
		t.Error("the facts' <b> was rendered as markup")
	}
	b.screenshot("facts-1366")
	b.viewport(phoneWidth, phoneHeight, true, false)
	b.do("reload at 390 px", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#facts-diff")))
	if w := run(b, "measure the width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); len(w) != 2 || w[0] > w[1] {
		t.Errorf("the facts page scrolls sideways at 390 px: scrollWidth, innerWidth = %v", w)
	}
	b.screenshot("facts-390")

	s.postHook(hook{ID: "fc-1", From: "+15550000001", Name: "Zoë 🌸", Text: "How much are a haircut and a colour? " + corpus.TextNamed("emoji").Body})
	d := s.waitPending(1)[0]
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.do("open the card", chromedp.Navigate(s.url+"/drafts?id="+d.ID), chromedp.WaitVisible(chromedp.CSS("#cited-facts")))
	cited := run(b, "read the cited facts", chromedp.Text(chromedp.CSS("#cited-facts")))
	for _, want := range []string{"Written from facts version 2", "F1", "Haircut €35", "F3", "Colour from 1,200.00 EUR & <b>toner</b> included"} {
		if !strings.Contains(cited, want) {
			t.Errorf("the cited facts lack %q: %s", want, cited)
		}
	}
	if reply := run(b, "read the reply", chromedp.Value(chromedp.ID("draft-text"))); strings.Contains(reply, "[F") {
		t.Errorf("the reply keeps its citation marks: %q", reply)
	}
	b.screenshot("cited-1366")
	b.viewport(phoneWidth, phoneHeight, true, false)
	b.do("reload the card at 390 px", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#cited-facts")))
	if w := run(b, "measure the card's width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); len(w) != 2 || w[0] > w[1] {
		t.Errorf("the card scrolls sideways at 390 px: scrollWidth, innerWidth = %v", w)
	}
	b.do("scroll to the cited facts", chromedp.ScrollIntoView(chromedp.CSS("#cited-facts")))
	b.screenshot("cited-390")
}
