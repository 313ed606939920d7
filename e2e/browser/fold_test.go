package browser

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/testkit/corpus"
)

// laptopHeight is a common laptop screen's height (1366×768), the one the
// approver's-day walk measured Approve on.
const laptopHeight = 768

// foldCard is one card of TestDecisionInView: the lead's conversation
// (messages answered one by one) and then its open turn.
type foldCard struct {
	name    string
	history []string // corpus texts answered and sent before the turn
	turn    []string // corpus texts of the open turn, in a row
}

// foldDraft is a waiting draft with the turn it answers (the API's answers).
type foldDraft struct {
	ID             string   `json:"id"`
	ConversationID string   `json:"conversation_id"`
	Answers        []string `json:"answers"`
}

// turnDraft waits until conversation's waiting draft answers n messages
// (a burst supersedes its drafts until the last one answers all of it).
func (s *server) turnDraft(conversation string, n int) foldDraft {
	s.t.Helper()
	var got foldDraft
	eventually(s.t, 30*time.Second, fmt.Sprintf("the draft of %s answering %d message(s)", conversation, n), func() (bool, string) {
		var page struct {
			Drafts []foldDraft `json:"drafts"`
		}
		if err := s.getJSON("/api/v1/drafts?status=pending_approval&limit=100", &page); err != nil {
			return false, err.Error()
		}
		for _, d := range page.Drafts {
			if d.ConversationID == conversation {
				got = d
				return len(d.Answers) == n, fmt.Sprintf("%s answers %d", d.ID, len(d.Answers))
			}
		}
		return false, "no draft waits for " + conversation
	})
	return got
}

// box is an element's bounding box in the viewport (CSS pixels).
type box struct {
	Top, Bottom, Left, Right float64
}

// boxOf measures sel's bounding box and the viewport.
const boxOf = `((sel) => { const r = document.querySelector(sel).getBoundingClientRect();
  return {Top: r.top, Bottom: r.bottom, Left: r.left, Right: r.right, W: window.innerWidth, H: window.innerHeight}; })`

type viewBox struct {
	box
	W, H float64
}

func (b *browser) measure(sel string) viewBox {
	b.t.Helper()
	return run(b, "measure "+sel, chromedp.Evaluate[viewBox](fmt.Sprintf("%s(%q)", boxOf, sel)))
}

// inView says whether r lies wholly inside the viewport.
func (r viewBox) inView() bool {
	return r.Top >= 0 && r.Left >= 0 && r.Bottom <= r.H && r.Right <= r.W && r.Bottom > r.Top
}

// viewShot saves what the viewport shows (the first screen, not the whole
// page) and returns its path.
func (b *browser) viewShot(step string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Errorf("screenshot %s: %v", step, err)
		return ""
	}
	b.n++
	path := filepath.Join(b.shots, fmt.Sprintf("%s-%02d-%s.png", fileName(b.t.Name()), b.n, step))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", step, err)
		return ""
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// TestDecisionInView opens cards with earlier conversation, with three
// messages in the turn, with a 2,000-character message, and with all of
// these at once (corpus texts: markup-like text, emoji, RTL, several
// lines), at 1366×768 and 390×844, light and dark: on load Approve's
// bounding box lies inside the viewport, and so do the draft's text and
// Reject. Nothing scrolls sideways. "show all" unfolds the earlier
// conversation and "show more" a long message (no script: <details>),
// and after both Approve is still in view; the a key still approves.
func TestDecisionInView(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, corpusConfig, alice)
	cards := []foldCard{
		{name: "history", history: []string{"fish", "long", "arabic", "newlines"}, turn: []string{"emoji"}},
		{name: "burst", turn: []string{"newlines", "hebrew", "slashes"}},
		{name: "long", turn: []string{"long"}},
		{name: "everything", history: []string{"long", "emoji", "hebrew"}, turn: []string{"fish", "long", "arabic"}},
	}
	layouts := corpus.Layouts(corpus.Demo)
	ids := map[string]string{} // card name → its waiting draft
	n := 0
	for _, c := range cards {
		conv := "conv-fold-" + c.name
		from := fmt.Sprintf("+1555010%04d", len(ids))
		for i, text := range c.history {
			n++
			s.postBody(corpus.MessageAs(text, layouts[n%len(layouts)], fmt.Sprintf("fold-%s-h%d", c.name, i), conv, from))
			s.approveAndSendID(s.turnDraft(conv, 1).ID)
		}
		for i, text := range c.turn {
			n++
			s.postBody(corpus.MessageAs(text, layouts[n%len(layouts)], fmt.Sprintf("fold-%s-t%d", c.name, i), conv, from))
		}
		ids[c.name] = s.turnDraft(conv, len(c.turn)).ID
	}

	b := newBrowser(t)
	b.viewport(desktopWidth, laptopHeight, false, false)
	b.login(s.url, alice, "/drafts", "#card[data-draft]")
	for _, pass := range []struct {
		name          string
		width, height int64
		mobile, dark  bool
	}{
		{"1366", desktopWidth, laptopHeight, false, false},
		{"1366-dark", desktopWidth, laptopHeight, false, true},
		{"390", phoneWidth, phoneHeight, true, false},
		{"390-dark", phoneWidth, phoneHeight, true, true},
	} {
		b.viewport(pass.width, pass.height, pass.mobile, pass.dark)
		for _, c := range cards {
			id := ids[c.name]
			b.do("open the card "+c.name, chromedp.Navigate(s.url+"/drafts?id="+id),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q] #approve`, id))))
			for _, sel := range []string{"#approve", "#approve-edit", "#reject", "#draft-text"} {
				r := b.measure(sel)
				t.Logf("%s %s: %s top=%.0f bottom=%.0f (viewport %.0fx%.0f)", pass.name, c.name, sel, r.Top, r.Bottom, r.W, r.H)
				if !r.inView() {
					t.Errorf("%s, card %s: %s spans y=%.0f..%.0f, x=%.0f..%.0f; want it inside the %.0fx%.0f viewport on load",
						pass.name, c.name, sel, r.Top, r.Bottom, r.Left, r.Right, r.W, r.H)
				}
			}
			// The turn's first message starts above the pinned decision:
			// at least its first lines are on the first screen.
			msg, dec := b.measure("#turn blockquote.message"), b.measure("#card .decide")
			t.Logf("%s %s: the turn's first message starts at y=%.0f, the decision at y=%.0f", pass.name, c.name, msg.Top, dec.Top)
			if msg.Top+40 > dec.Top {
				t.Errorf("%s, card %s: the turn's first message starts at y=%.0f, under the decision at y=%.0f; want its first lines in view", pass.name, c.name, msg.Top, dec.Top)
			}
			if sw := run(b, "measure the width", chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); len(sw) != 2 || sw[0] > sw[1] {
				t.Errorf("%s, card %s: the page scrolls sideways: scrollWidth, innerWidth = %v", pass.name, c.name, sw)
			}
			b.viewShot(c.name + "-" + pass.name)
		}
	}

	// Unfold everything on the fullest card: the text is all there, and
	// the decision is still in view.
	b.viewport(desktopWidth, laptopHeight, false, false)
	id := ids["everything"]
	b.do("open the fullest card", chromedp.Navigate(s.url+"/drafts?id="+id), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	before := b.measure(`#turn .fold blockquote.message`)
	b.do("show all the conversation", chromedp.Click(chromedp.CSS(`#conversation details.older > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#conversation details.older[open] li`)))
	b.do("show all of the long message", chromedp.Click(chromedp.CSS(`#turn .fold details.more > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#turn .fold details.more[open]`)))
	after := b.measure(`#turn .fold blockquote.message`)
	if after.Bottom-after.Top <= before.Bottom-before.Top {
		t.Errorf("show more left the long message %.0f px tall (folded: %.0f px); want it taller", after.Bottom-after.Top, before.Bottom-before.Top)
	}
	if r := b.measure("#approve"); !r.inView() {
		t.Errorf("with everything unfolded, Approve spans y=%.0f..%.0f; want it still in view (%.0f px high)", r.Top, r.Bottom, r.H)
	}
	shown := run(b, "read the card", chromedp.Text(chromedp.CSS("#card")))
	if strings.Count(shown, "Fish & chips for <2> please") < 2 {
		t.Errorf("the unfolded card does not show the long texts")
	}
	b.viewShot("everything-unfolded-1366")
	// Without a script (the page's own disabled): the folds still open,
	// and the decision is still in view, at 390 px.
	b.viewport(phoneWidth, phoneHeight, true, false)
	b.do("disable the page's scripts", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	b.do("open the fullest card without scripts", chromedp.Navigate(s.url+"/drafts?id="+id), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	if r := b.measure("#approve"); !r.inView() {
		t.Errorf("without scripts at 390 px, Approve spans y=%.0f..%.0f; want it in view (%.0f px high)", r.Top, r.Bottom, r.H)
	}
	b.do("show all without scripts", chromedp.Click(chromedp.CSS(`#conversation details.older > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#conversation details.older[open] li`)))
	b.viewShot("everything-noscript-390")
	b.do("enable the page's scripts", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
		return err
	}))
	b.viewport(desktopWidth, laptopHeight, false, false)
	b.do("open the fullest card again", chromedp.Navigate(s.url+"/drafts?id="+id), chromedp.WaitVisible(chromedp.CSS(`#approve`)))

	b.do("press a", press("a"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card:not([data-draft=%q])`, id))))
	approved, err := s.drafts("approved")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(approved), id) {
		t.Errorf("a did not approve %s", id)
	}
}

// approveAndSendID is approveAndSend of the draft with id.
func (s *server) approveAndSendID(id string) {
	s.t.Helper()
	s.approveAndSend(draft{ID: id})
}
