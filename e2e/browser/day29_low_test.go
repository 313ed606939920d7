package browser

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/testkit/corpus"
)

// lowConfig is the demo (a channel whose provider never knows whether it
// sent, so its replies need reconciling) plus a WhatsApp channel whose
// provider has one template: the corpus's WhatsApp messages were written
// on 2026-01-01, so their 24-hour reply window is long closed.
var lowConfig = `undo_window: 0s
channels:
  - name: demo
    fields: {message_id: /id, conversation_id: /conversation_id, contact: /from, name: /name, text: /text}
    provider: amb
    coalesce: 0s
  - {name: ` + corpus.Channel("whatsapp") + `, preset: whatsapp, signature: {secret: "` + corpus.Secret("whatsapp") + `"}, provider: wa, coalesce: 0s}
providers:
  - {name: amb, kind: sandbox, fail: ambiguous, lookup: false, timeout: 1s}
  - name: wa
    kind: whatsapp
    api_base: "http://127.0.0.1:9"
    phone_number_id: "1234567890"
    token_env: LOW_WA_TOKEN
    timeout: 1s
    templates: [{name: follow_up, language: en_US, parameters: ["{name}"]}]
retry: {max_attempts: 1, base_delay: 10ms, max_delay: 10ms}
`

// TestLowItemsAtBothWidths walks the Low items of the approver's second
// pass in real Chromium at 390×844 and 1366×768, with screenshots: the
// header keeps the brand, the search and the person on one row with a
// long name (the navigation the second), nothing scrolls sideways; every
// page links the icon and /favicon.ico is an SVG; /reconcile titles each
// reply by its customer and its table's headers wrap between words only;
// /audit has its filter and pager; a card whose reply window closed
// offers no Approve, only the ways out.
func TestLowItemsAtBothWidths(t *testing.T) {
	requireEnvironment(t)
	t.Setenv("LOW_WA_TOKEN", "wa-token-value-never-used") // nothing is sent to WhatsApp here
	admin := user{name: "administrator-with-a-long-name", role: "admin", password: "correct-horse-battery"}
	s := startConfigured(t, lowConfig, admin)

	// A reply that needs reconciling: approved through the API, its send ambiguous.
	s.postBody(corpus.MessageAs("fish", "pretty2", "rc-1", "conv-rc-1", "+15550300001"))
	d := s.waitPending(1)[0]
	code, body, err := s.request("POST", "/api/v1/drafts/"+d.ID+"/approve", nil)
	var approved struct {
		OutboxID string `json:"outbox_id"`
	}
	if err != nil || code != 200 || json.Unmarshal(body, &approved) != nil {
		t.Fatalf("approve %s: %d %s %v", d.ID, code, body, err)
	}
	eventually(t, 30*time.Second, "the reply to need reconciling", func() (bool, string) {
		var row struct{ Status string }
		err := s.getJSON("/api/v1/outbox/"+url.PathEscape(approved.OutboxID), &row)
		return err == nil && row.Status == "needs_reconciliation", fmt.Sprint(row.Status, err)
	})
	// A WhatsApp message of January: its window closed long ago.
	wa := corpus.Bodies("whatsapp")[0]
	hdr, raw := wa.Signed(s.url+"/hooks/"+corpus.Channel("whatsapp"), time.Now())
	req, _ := http.NewRequest("POST", s.url+"/hooks/"+corpus.Channel("whatsapp"), bytes.NewReader(raw))
	req.Header = hdr
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ans, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(ans), `"status":"accepted"`) { // Meta is answered 200
		t.Fatalf("POST the WhatsApp message: %d %s", resp.StatusCode, ans)
	}
	closed := s.waitPending(1)[0]

	b := newBrowser(t)
	for _, w := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"phone", phoneWidth, phoneHeight, true}, {"desktop", desktopWidth, laptopHeight, false}} {
		b.viewport(w.width, w.height, w.mobile, false)
		if w.name == "phone" {
			b.login(s.url, admin, "/drafts?id="+closed.ID, "#card")
		} else {
			b.do("open the closed window's card", chromedp.Navigate(s.url+"/drafts?id="+closed.ID), chromedp.WaitVisible(chromedp.ID("card")))
		}

		// The header: brand, search and the person on one row.
		type box struct{ Top, Bottom, Left, Right float64 }
		type head struct {
			Brand, Search, Me, Nav box
			Scroll, Width          float64
			Icon                   string
		}
		h := run(b, "measure the header", chromedp.Evaluate[head](`(() => {
		  const r = s => { const b = document.querySelector(s).getBoundingClientRect(); return {Top: b.top, Bottom: b.bottom, Left: b.left, Right: b.right}; };
		  const icon = document.querySelector('link[rel="icon"]');
		  return {Brand: r(".top .brand"), Search: r(".top .search"), Me: r(".top .me"), Nav: r(".top nav"),
		    Scroll: document.documentElement.scrollWidth, Width: window.innerWidth, Icon: icon ? icon.getAttribute("href") : ""};
		})()`))
		mid := func(x box) float64 { return (x.Top + x.Bottom) / 2 }
		if abs(mid(h.Brand)-mid(h.Search)) > 6 || abs(mid(h.Brand)-mid(h.Me)) > 6 {
			t.Errorf("%s: the brand (%.0f), the search (%.0f) and the person (%.0f) are not on one row", w.name, mid(h.Brand), mid(h.Search), mid(h.Me))
		}
		if h.Me.Right > h.Width+0.5 || h.Scroll > h.Width+0.5 {
			t.Errorf("%s: the header runs past the screen (person ends at %.0f, page %.0f wide, screen %.0f)", w.name, h.Me.Right, h.Scroll, h.Width)
		}
		if w.name == "phone" && h.Nav.Top < h.Brand.Bottom-1 {
			t.Errorf("phone: the navigation is not the second row (%.0f above %.0f)", h.Nav.Top, h.Brand.Bottom)
		}
		if !strings.HasPrefix(h.Icon, "/static/favicon.") {
			t.Errorf("%s: the page links no icon (%q)", w.name, h.Icon)
		}

		// The closed window's card: the draft shown, no Approve; the ways out.
		type card struct {
			Approve, Edit, Reply, Redraft, Template, Reject, Close, Draft bool
			Text                                                          string
		}
		c := run(b, "read the closed window's card", chromedp.Evaluate[card](`(() => {
		  const has = s => !!document.querySelector("#card " + s);
		  return {Approve: has("#approve"), Edit: has("#approve-edit"), Reply: has("#send-own"), Redraft: has("#redraft"),
		    Template: has("#send-template"), Reject: has("#reject"), Close: has("#close-lead"), Draft: has("#draft-unsendable"),
		    Text: document.getElementById("reply-window").innerText};
		})()`))
		if c.Approve || c.Edit || c.Reply || c.Redraft || !c.Template || !c.Reject || !c.Close || !c.Draft || !strings.Contains(c.Text, "reply window closed") {
			t.Errorf("%s: the closed window's card = %+v; want no Approve, Edit, own reply or redraft, and the template, Reject, close and the draft", w.name, c)
		}
		b.do("press a", press("a"))
		b.viewShot(w.name + "-closed-window")
		if got, err := s.drafts("approved"); err != nil || len(got) != 1 { // the reconciled one only
			t.Errorf("%s: after a on the closed window's card, approved drafts = %d, %v; want only the earlier one", w.name, len(got), err)
		}

		// /reconcile: titled by the customer; headers wrap between words only.
		b.do("open /reconcile", chromedp.Navigate(s.url+"/reconcile"), chromedp.WaitVisible(chromedp.CSS("article.reconcile")))
		r := run(b, "read /reconcile", chromedp.Evaluate[rec](reconcileWords))
		if !strings.HasPrefix(r.Title, "Reply to "+corpus.TextNamed("fish").From) || len(r.Broken) > 0 {
			t.Errorf("%s: /reconcile's row is titled %q, and these header words break across lines: %v; want the customer, no broken word", w.name, r.Title, r.Broken)
		}
		b.screenshot(w.name + "-reconcile")

		// /audit: the filter and the pager.
		b.do("open /audit", chromedp.Navigate(s.url+"/audit?who="+admin.name), chromedp.WaitVisible(chromedp.ID("audit-summary")))
		sum := run(b, "read the audit summary", chromedp.Text(chromedp.ID("audit-summary")))
		if !strings.Contains(sum, "matching the filter") {
			t.Errorf("%s: /audit?who=… says %q", w.name, sum)
		}
		if n := run(b, "count the filter's fields", chromedp.Evaluate[int](`document.querySelectorAll('form[action="/audit"] input').length`)); n != 3 {
			t.Errorf("%s: the audit filter has %d fields; want who, action, text", w.name, n)
		}
		b.viewShot(w.name + "-audit")
	}

	// Between the two, where the table is squeezed the most before it
	// stacks (641 px), its headers still wrap between words only, also
	// when a provider answered at length (a real provider's error body).
	longAnswer := strings.Repeat("upstream connect error or disconnect/reset before headers; reset reason: connection timeout ", 4)
	for _, width := range []int64{660, 768, 900} {
		b.viewport(width, 900, false, false)
		b.do("open /reconcile", chromedp.Navigate(s.url+"/reconcile"), chromedp.WaitVisible(chromedp.CSS("article.reconcile")),
			chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("article.reconcile td[data-label=Answer]").forEach(td => td.textContent = `+strconv.Quote(longAnswer)+`)`))
		if os.Getenv("LOW_SHOTS") != "" {
			b.screenshot(fmt.Sprintf("squeezed-reconcile-%d", width))
		}
		if sw := run(b, "measure the page's width", chromedp.Evaluate[float64](`document.documentElement.scrollWidth`)); sw > float64(width)+0.5 {
			t.Errorf("%d px: /reconcile is %.0f px wide: it scrolls sideways", width, sw)
		}
		if r := run(b, "read /reconcile", chromedp.Evaluate[rec](reconcileWords)); len(r.Broken) > 0 {
			t.Errorf("%d px: these header words of /reconcile break across lines: %v", width, r.Broken)
			b.screenshot(fmt.Sprintf("reconcile-%d", width))
		}
	}

	// The icon itself.
	b.do("open /favicon.ico", chromedp.Navigate(s.url+"/favicon.ico"), chromedp.WaitVisible(chromedp.CSS("svg")))
	if loc := run(b, "where the icon is", chromedp.Location()); !strings.Contains(loc, "/static/favicon.") {
		t.Errorf("/favicon.ico went to %s", loc)
	}
	b.viewShot("favicon")
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

type rec struct {
	Title  string
	Broken []string
}

// reconcileWords reads the first reply's title on /reconcile and the words
// of its attempts' table headers that are split across two lines.
const reconcileWords = `(() => {
		  const broken = [];
		  for (const th of document.querySelectorAll("article.reconcile th")) {
		    const text = th.firstChild; if (!text) continue;
		    let at = 0;
		    for (const word of th.textContent.split(" ")) {
		      const rg = document.createRange(); rg.setStart(text, at); rg.setEnd(text, at + word.length);
		      const lines = new Set([...rg.getClientRects()].map(q => Math.round(q.top)));
		      if (lines.size > 1) broken.push(word);
		      at += word.length + 1;
		    }
		  }
		  return {Title: document.querySelector("article.reconcile h2").innerText, Broken: broken};
		})()`
