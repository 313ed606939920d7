package browser

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoff/handoff/testkit/corpus"
)

// findHeight is the desktop height the approver's walk measures (1366×768).
const findHeight = 768

// TestFindPeopleAndLeads: people written to in real-shaped messages
// (accents, emoji, Arabic, Hebrew, markup-like text, 2,000 characters)
// are found by part of a name, accents aside, and by trailing or inner
// digits of the number; the lead list names each lead with its latest
// message on one line, and keeps its owner and time in status on screen
// at 390 px; the lead page shows the conversation in order (messages and
// the reply sent), the status history, and the engineering detail folded.
// Every page is held to the page rules (no sideways scroll, one h1,
// axe-core) and saved as a screenshot at 390×844 and 1366×768.
func TestFindPeopleAndLeads(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startConfigured(t, cardConfig, alice)
	text := func(name string) string { return corpus.TextNamed(name).Body }
	zoe := "+15552490978"
	s.postHook(hook{ID: "zoe-1", From: zoe, Name: "Zoë Müller", Text: text("fish")})
	s.approveAndSend(s.waitPending(1)[0])
	s.postHook(hook{ID: "zoe-2", From: zoe, Name: "Zoë Müller", Text: text("emoji")})
	s.postHook(hook{ID: "zoe-3", From: zoe, Name: "Zoë Müller", Text: text("long")})
	for i, name := range []string{"arabic", "hebrew", "fish", "combining", "newlines"} {
		tx := corpus.TextNamed(name)
		s.postHook(hook{ID: "other-" + name, From: fmt.Sprintf("+4420794601%02d", i), Name: tx.From, Text: tx.Body})
	}
	s.waitPending(6) // zoe's turn (two messages) and the five others

	b := newBrowser(t)
	b.viewport(desktopWidth, findHeight, false, false)
	b.login(s.url, alice, "/handoffs", "#lead-list")
	for _, pass := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"phone", phoneWidth, phoneHeight, true}, {"desktop", desktopWidth, findHeight, false}} {
		b.viewport(pass.width, pass.height, pass.mobile, false)
		for _, qw := range [][2]string{{"zoe", "Zoë Müller"}, {"Muller", "Zoë Müller"}, {"0978", "Zoë Müller"}, {"555249", "Zoë Müller"}, {"renee", "Renée"}} {
			q, want := qw[0], qw[1]
			b.checkPage(pass.name, int(pass.width), s.url+"/search?q="+url.QueryEscape(q))
			got := run(b, "read the results of "+q, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#search-results li strong")).map(e => e.textContent.normalize("NFC")).join("|")`))
			if !strings.Contains(got, want) {
				t.Errorf("%s: search %q lists %q, want %s", pass.name, q, got, want)
			}
		}

		b.checkPage(pass.name, int(pass.width), s.url+"/handoffs")
		rows := run(b, "read the lead list", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#lead-list li")).map(li => li.querySelector(".who").textContent.normalize("NFC") + "|" + li.querySelector(".line").textContent)`))
		found := false
		for _, r := range rows {
			name, line, _ := strings.Cut(r, "|")
			if name == "Zoë Müller" {
				found = true
				// The latest message, the 2,000 characters, folded and cut.
				if !strings.HasPrefix(line, "Fish & chips for <2> please") || !strings.HasSuffix(line, "…") || strings.Contains(line, "\n") || len([]rune(line)) > 140 {
					t.Errorf("%s: the lead list shows Zoë's latest message as %q, want its start on one line, cut with …", pass.name, line)
				}
			}
		}
		if !found || len(rows) != 6 {
			t.Errorf("%s: the lead list has rows %q, want 6 with Zoë Müller", pass.name, rows)
		}
		if n := run(b, "count elements made of text", chromedp.Evaluate[int](`document.querySelectorAll("#lead-list .line bdi *, #lead-list .who bdi *").length`)); n != 0 {
			t.Errorf("%s: the lead list's names and messages hold %d element(s): text became markup", pass.name, n)
		}
		// Owner and time in status are in each row, inside the window.
		off := run(b, "measure the rows", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#lead-list .facts-line")).filter(e => {
			const r = e.getBoundingClientRect();
			return r.right > window.innerWidth + 1 || r.width === 0 || e.scrollWidth > e.clientWidth + 1 || !/owner .* · in \w+ /.test(e.textContent.replace(/\s+/g, " "));
		}).map(e => e.textContent.replace(/\s+/g, " "))`))
		if len(off) > 0 {
			t.Errorf("%s: rows whose owner and time in status are missing or off screen: %q", pass.name, off)
		}

		b.checkPage(pass.name, int(pass.width), s.url+"/events/"+url.PathEscape("demo:zoe-2"))
		lines := run(b, "read the conversation", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#lead-conversation li")).map(li => (li.classList.contains("out") ? "reply:" : "msg:") + li.querySelector(".text").textContent.slice(0, 5))`))
		want := []string{"msg:" + text("fish")[:5], "reply:", "msg:" + text("emoji")[:5], "msg:" + text("long")[:5]}
		if len(lines) != len(want) {
			t.Errorf("%s: the lead page's conversation is %q, want %q", pass.name, lines, want)
		} else {
			for i := range want {
				if !strings.HasPrefix(lines[i], want[i]) {
					t.Errorf("%s: line %d of the conversation is %q, want %q…", pass.name, i, lines[i], want[i])
				}
			}
		}
		if open := run(b, "is the engineering detail open", chromedp.Evaluate[bool](`document.querySelector("details#engineering").open`)); open {
			t.Errorf("%s: the engineering detail is open, want it folded", pass.name)
		}
		if n := run(b, "count the status history", chromedp.Evaluate[int](`document.querySelectorAll("#lead-history li").length`)); n < 2 {
			t.Errorf("%s: the status history has %d entries, want the lead's moves", pass.name, n)
		}
		b.do("unfold the engineering detail", chromedp.Click(chromedp.CSS(`details#engineering summary`)), chromedp.WaitVisible(chromedp.CSS(`details#engineering .timeline`)))
		b.screenshot(pass.name + "-lead-engineering")
	}
}
