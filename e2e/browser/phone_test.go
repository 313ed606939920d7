package browser

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// phone is the viewport of a common phone (CSS pixels); desktop is a
// common laptop screen.
const (
	phoneWidth, phoneHeight     = 390, 844
	desktopWidth, desktopHeight = 1366, 900
)

// layoutProbe measures the page as a person sees it: how wide the
// document is against the window, how many h1 it has, and the widest
// element that sticks out on the right (to name the culprit when the
// page scrolls sideways).
const layoutProbe = `((w) => {
  const de = document.documentElement;
  let worst = "", right = w;
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.right > right + 0.5) {
      right = r.right;
      worst = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "");
    }
  }
  return JSON.stringify({scroll: de.scrollWidth, inner: window.innerWidth, h1: document.querySelectorAll("h1").length, worst: worst, right: Math.round(right)});
})`

// layout is what layoutProbe answers.
type layout struct {
	Scroll int    `json:"scroll"`
	Inner  int    `json:"inner"`
	H1     int    `json:"h1"`
	Worst  string `json:"worst"`
	Right  int    `json:"right"`
}

// TestEveryPageFitsAPhone opens every page of the dashboard, as an admin
// who sees them all, at 390 px and at 1366 px: no page may scroll
// sideways (scrollWidth <= innerWidth), every page has exactly one h1,
// and on /drafts at 390×844 the message, the reply and the Approve /
// Reject buttons are all inside the first screen. It saves a screenshot
// of each page at both widths.
func TestEveryPageFitsAPhone(t *testing.T) {
	requireEnvironment(t)
	ada := user{name: "ada", role: "admin", password: "correct-horse-battery"}
	s := startServer(t, ada)
	for _, h := range []hook{
		{ID: "m-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website for my bakery? We open in March and need online orders, a menu and a page for catering."},
		{ID: "m-2", From: "+15550000002", Name: "", Text: "Do you also design logos? Our budget is around 800 EUR."},
	} {
		s.postHook(h)
	}
	pending := s.waitPending(2)
	eventKey := pending[0].EventKey

	pages := []string{
		"/", "/drafts", "/drafts?owner=mine", "/handoffs", "/clients", "/search?q=" + url.QueryEscape(eventKey),
		"/events/" + eventKey, "/account", "/dead-letters", "/reconcile", "/keys", "/backups", "/users",
		"/settings", "/audit",
	}

	b := newBrowser(t)
	b.do("phone viewport", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile))
	b.login(s.url, ada, "/drafts", "#card[data-draft]")

	// The queue on a phone: the whole decision on the first screen.
	type box struct{ Top, Bottom, Right float64 }
	for _, sel := range []string{"#card blockquote.message", "#draft-text", "#approve", "#approve-edit", "#reject"} {
		r := run(b, "measure "+sel, chromedp.Evaluate[box](fmt.Sprintf(
			`(r => ({Top: r.top, Bottom: r.bottom, Right: r.right}))(document.querySelector(%q).getBoundingClientRect())`, sel)))
		if r.Bottom > phoneHeight || r.Right > phoneWidth {
			t.Errorf("/drafts at %dx%d: %s ends at y=%.0f, x=%.0f; want it inside the first screen", phoneWidth, phoneHeight, sel, r.Bottom, r.Right)
		}
	}

	check := func(width int, path string) {
		t.Helper()
		b.do("open "+path, chromedp.Navigate(s.url+path), chromedp.WaitReady(chromedp.CSS("main")))
		l := run(b, "measure "+path, chromedp.Evaluate[string](fmt.Sprintf("%s(%d)", layoutProbe, width)))
		var got layout
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// A mobile browser zooms out to show a page that is too wide, so
		// innerWidth grows with the page: both are held to the device width.
		if got.Scroll > got.Inner || got.Inner > width {
			t.Errorf("%s at %d px scrolls sideways: scrollWidth %d, innerWidth %d (widest: %s reaching x=%d)", path, width, got.Scroll, got.Inner, got.Worst, got.Right)
		}
		if got.H1 != 1 {
			t.Errorf("%s has %d h1 elements; want exactly one", path, got.H1)
		}
		b.screenshot(fmt.Sprintf("%d-%s", width, strings.Trim(fileName(path), "-")))
	}
	for _, p := range pages {
		check(phoneWidth, p)
	}
	b.do("desktop viewport", chromedp.EmulateViewport(desktopWidth, desktopHeight))
	for _, p := range pages {
		check(desktopWidth, p)
	}

	// Logged out: the login page.
	b.do("log out", chromedp.Navigate(s.url+"/drafts"), chromedp.Click(chromedp.CSS(`.me button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.login`)))
	b.do("phone viewport", chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile))
	check(phoneWidth, "/login")
}
