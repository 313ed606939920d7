package browser

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/testkit/corpus"
)

// corpusConfig is the demo channel with a lead per conversation id, so
// each corpus message is its own card.
const corpusConfig = `undo_window: 0s
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: sandbox
    coalesce: 0s
`

// postBody delivers a corpus body to POST /hooks/demo as it is and
// insists on 202 accepted.
func (s *server) postBody(b corpus.Body) {
	s.t.Helper()
	resp, err := s.client.Post(s.url+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
	if err != nil {
		s.t.Fatalf("POST /hooks/demo %s: %v", b.Name(), err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(raw), `"accepted"`) {
		s.t.Fatalf("POST /hooks/demo %s: %d %s; want 202 accepted", b.Name(), resp.StatusCode, bytes.TrimSpace(raw))
	}
}

// TestCorpusTextsRender sends corpus messages (markup-like text with &, <b>
// and quotes, emoji with ZWJ sequences and flags, Arabic, Hebrew, combining
// accents, 2,000 characters, several lines), each in another layout, and
// checks that the queue and the card show each exactly as sent
// (textContent; the markup as text, no element made of it), at 1366 px
// and at 390 px, where nothing scrolls sideways; it saves screenshots of
// the queue at both widths.
func TestCorpusTextsRender(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, corpusConfig, alice)
	layouts := corpus.Layouts(corpus.Demo)
	texts := []string{"fish", "emoji", "arabic", "hebrew", "combining", "long", "newlines"}
	bodies := map[string]corpus.Body{} // by event key
	for i, name := range texts {
		id := "render-" + name
		b := corpus.MessageAs(name, layouts[(i+1)%len(layouts)], id, "conv-"+id, "")
		s.postBody(b)
		bodies["demo:"+id] = b
	}
	pending := s.waitPending(len(texts))

	b := newBrowser(t)
	b.viewport(desktopWidth, desktopHeight, false, false)
	b.login(s.url, alice, "/drafts", "#card[data-draft]")
	for _, width := range []int{desktopWidth, phoneWidth} {
		if width == phoneWidth {
			b.viewport(phoneWidth, phoneHeight, true, false)
		}
		for _, d := range pending {
			body := bodies[d.EventKey]
			w := body.Want
			b.do("open the card of "+body.Name(), chromedp.Navigate(s.url+"/drafts?id="+d.ID),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q] #turn blockquote.message`, d.ID))))
			// HTML's parser reads CR LF as LF (HTML's "normalize newlines"),
			// so the page's text has no CR; the API shows it (e2e, web tests).
			shown := strings.ReplaceAll(w.Text, "\r\n", "\n")
			got := run(b, "read the message", chromedp.Evaluate[string](`document.querySelector("#turn blockquote.message").textContent`))
			if got != shown {
				t.Errorf("%d px, %s: the card shows the message as\n%q\nwant exactly\n%q", width, body.Name(), got, shown)
			}
			if n := run(b, "count elements in the message", chromedp.Evaluate[int](`document.querySelectorAll("#turn blockquote.message *").length`)); n != 0 {
				t.Errorf("%d px, %s: the message holds %d element(s): its text became markup", width, body.Name(), n)
			}
			// dir="auto": a right-to-left message reads right to left
			// in a left-to-right page, and the others do not.
			wantDir := "ltr"
			if body.Text == "arabic" || body.Text == "hebrew" {
				wantDir = "rtl"
			}
			if got := run(b, "read the message's direction", chromedp.Evaluate[string](`getComputedStyle(document.querySelector("#turn blockquote.message")).direction`)); got != wantDir {
				t.Errorf("%d px, %s: the message is laid out %s, want %s", width, body.Name(), got, wantDir)
			}
			if got := run(b, "read the name", chromedp.Evaluate[string](`document.querySelector("#card h2").textContent`)); strings.TrimSpace(got) != w.Name {
				t.Errorf("%d px, %s: the card calls the lead %q, want %q", width, body.Name(), got, w.Name)
			}
			line := run(b, "read the queue line", chromedp.Evaluate[string](
				fmt.Sprintf(`document.querySelector('#queue-list li[data-draft=%q] .line').textContent`, d.ID)))
			if want := w.Name + " " + queueLine(w.Text); line != want {
				t.Errorf("%d px, %s: the queue shows\n%q\nwant\n%q", width, body.Name(), line, want)
			}
			if width == phoneWidth {
				if sw := run(b, "measure the width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); len(sw) != 2 || sw[0] > sw[1] {
					t.Errorf("%s: the card scrolls sideways at 390 px: scrollWidth, innerWidth = %v", body.Name(), sw)
				}
			}
			switch body.Text {
			case "fish", "arabic", "long", "emoji":
				b.screenshot(fmt.Sprintf("%s-%d", body.Text, width))
			}
		}
	}
}

// queueLine is what the queue shows of a message: its first line that is
// not blank, cut to 89 characters and an ellipsis when longer than 90.
func queueLine(text string) string {
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); line != "" {
			text = line
			break
		}
	}
	if r := []rune(text); len(r) > 90 {
		return string(r[:89]) + "…"
	}
	return text
}
