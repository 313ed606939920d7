package browser

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestLiveQueue keeps /drafts open while drafts arrive: on the empty
// queue the first one takes the card's place, a second joins the list,
// and the tab's title and the nav count follow, all without a page load.
func TestLiveQueue(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startServer(t, alice)

	b := newBrowser(t)
	b.login(s.url, alice, "/drafts", "#card.empty")
	const marker = `window.__handoffNoReload`
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](marker+` = "set"`))
	if got := run(b, "read the title", chromedp.Title()); strings.HasPrefix(got, "(") {
		t.Errorf("the empty queue's title is %q; want no count", got)
	}

	s.postHook(hook{ID: "m-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website for my bakery?"})
	first := s.waitPending(1)[0]
	b.do("see the first draft arrive on the card",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q]`, first.ID))),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
	)
	b.screenshot("arrived-on-card")

	s.postHook(hook{ID: "m-2", From: "+15550000002", Name: "Bea Rossi", Text: "Do you also design logos?"})
	s.waitPending(2)
	b.do("see the second draft join the list", chromedp.WaitVisible(chromedp.CSS(`#queue-list li:nth-child(2) a`)))
	eventually(t, stepTimeout, "the title to count 2 drafts", func() (bool, string) {
		got, err := b.tryRun(chromedp.Title())
		return err == nil && strings.HasPrefix(got, "(2) "), fmt.Sprintf("title %q (%v)", got, err)
	})
	if got := run(b, "read the nav count", chromedp.Text(chromedp.ID("nav-drafts-count"))); got != "2" {
		t.Errorf("the nav count says %q; want 2", got)
	}
	if got := run(b, "read the card", chromedp.AttributeValue(chromedp.CSS("#card"), "data-draft")); got.Value != first.ID {
		t.Errorf("the card changed to %q while its draft %s still waits; a live update must not take it away", got.Value, first.ID)
	}
	if got := run(b, "read the marker", chromedp.Evaluate[string](`String(`+marker+`)`)); got != "set" {
		t.Fatalf("the page was loaded again (marker %q); the drafts must appear without a reload", got)
	}
	b.screenshot("joined-list")
}

// TestTwoApprovers opens /drafts in two browsers as two people: they are
// shown different drafts, and the second, opening the first one's draft,
// reads who is looking at it.
func TestTwoApprovers(t *testing.T) {
	requireEnvironment(t)
	dana := user{name: "dana", role: "approver", password: "correct-horse-battery"}
	eli := user{name: "eli", role: "approver", password: "battery-staple-horse"}
	s := startServer(t, dana, eli)
	s.postHook(hook{ID: "m-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website?"})
	s.postHook(hook{ID: "m-2", From: "+15550000002", Name: "Bea Rossi", Text: "Do you also design logos?"})
	pending := s.waitPending(2)

	b1, b2 := newBrowser(t), newBrowser(t)
	b1.login(s.url, dana, "/drafts", "#card[data-draft]")
	b2.login(s.url, eli, "/drafts", "#card[data-draft]")
	c1 := run(b1, "read dana's card", chromedp.AttributeValue(chromedp.CSS("#card"), "data-draft")).Value
	c2 := run(b2, "read eli's card", chromedp.AttributeValue(chromedp.CSS("#card"), "data-draft")).Value
	if c1 == c2 || c1 != pending[0].ID || c2 != pending[1].ID {
		t.Fatalf("dana is shown %s and eli %s; want different drafts: dana the oldest %s and eli the next %s", c1, c2, pending[0].ID, pending[1].ID)
	}
	for name, b := range map[string]*browser{dana.name: b1, eli.name: b2} {
		if n := run(b, "count claim warnings", chromedp.Evaluate[int](`document.querySelectorAll("#looked-by").length`)); n != 0 {
			t.Errorf("%s's own card says someone else is looking at it", name)
		}
	}
	b1.screenshot("dana-own-card")
	b2.screenshot("eli-own-card")
	b2.do("open dana's draft", chromedp.Navigate(s.url+"/drafts?id="+c1), chromedp.WaitVisible(chromedp.ID("looked-by")))
	if got := run(b2, "read the claim", chromedp.Text(chromedp.ID("looked-by"))); !strings.Contains(got, "dana is looking at this draft") {
		t.Errorf("eli's card of dana's draft says %q; want it to say dana is looking at it", got)
	}
	b2.screenshot("looked-by")
}
