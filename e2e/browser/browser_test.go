package browser

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestApproveWithKeyboard works the approval queue with the keyboard alone,
// as the shortcuts on the page promise: a approves, e then Ctrl+Enter
// approves an edit, r then Enter rejects with a reason. Each decision
// brings the next draft in place without loading the page again, and the
// API and the sandbox provider then show exactly what was decided.
func TestApproveWithKeyboard(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startServer(t, alice)
	for _, h := range []hook{
		{ID: "m-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website for my bakery?"},
		{ID: "m-2", From: "+15550000002", Name: "Bea Rossi", Text: "Do you also design logos? Our budget is around 800 EUR."},
		{ID: "m-3", From: "+15550000003", Name: "Cy Young", Text: "Buy cheap followers now!!! Visit our site."},
	} {
		s.postHook(h)
	}
	pending := s.waitPending(3) // oldest first, the queue's order
	first, second, third := pending[0], pending[1], pending[2]

	b := newBrowser(t)
	b.login(s.url, alice, "/drafts", "#card[data-draft]")
	if got := run(b, "read the card's draft", chromedp.AttributeValue(chromedp.CSS("#card"), "data-draft")); got.Value != first.ID {
		t.Fatalf("the queue opens on draft %q; want the oldest waiting draft %s", got.Value, first.ID)
	}
	b.do("see the shortcuts and three waiting drafts",
		chromedp.WaitVisible(chromedp.CSS("p.keys")),
		chromedp.WaitVisible(chromedp.CSS(`#queue-list li:nth-child(3) a`)),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
	)
	b.screenshot("queue")

	// A full page load would clear this; a swap of the card keeps it.
	const marker = `window.__handoffNoReload`
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](marker+` = "set before the first key"`))
	stillSamePage := func(after string) {
		t.Helper()
		if got := run(b, "read the marker", chromedp.Evaluate[string](`String(`+marker+`)`)); got != "set before the first key" {
			t.Fatalf("after %s the page was loaded again (window marker is %q): the next draft must slide in without a full page load", after, got)
		}
	}

	// a: approve as drafted.
	b.do("press a",
		press("a"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q]`, second.ID))),
		chromedp.WaitVisible(chromedp.CSS(`#card .notice.ok`)),
	)
	stillSamePage("a")
	if got := run(b, "read the notice", chromedp.Text(chromedp.CSS("#card .notice.ok"))); !strings.Contains(got, "Approved by alice") {
		t.Errorf("after a, the notice says %q; want it to say \"Approved by alice\"", got)
	}
	b.do("see the list and count follow", chromedp.WaitVisible(chromedp.CSS(`#queue-list li:nth-child(2) a`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#queue-list li:nth-child(3)`)))
	if got := run(b, "read the nav count", chromedp.Text(chromedp.ID("nav-drafts-count"))); got != "2" {
		t.Errorf("after a, the Drafts count in the navigation says %q; want 2", got)
	}
	b.screenshot("approved")

	// e: edit the reply (select all, type over it), then Ctrl+Enter.
	const edited = "Hi Bea, yes we do logos too. Ruth from our design team will call you today with options."
	b.do("press e, select all, type the edit",
		press("e"),
		chromedp.WaitReady(chromedp.CSS("#draft-text:focus")),
		press("a", chromedp.ModifierCtrl),
	)
	// The undo stack polls itself every second while the first approval
	// can be undone, and the live queue every few: a settle of either must
	// leave the reply focused, or the rest of the typing becomes shortcuts
	// ("u" undid the first approval in CI). Wait for the undo stack's next
	// swap with the reply focused, then look where the focus is.
	if got := run(b, "wait for the undo stack to settle while the reply is focused", chromedp.Evaluate[string](`new Promise(function (done) {
		var timer = setTimeout(function () { done("the undo stack did not settle within 5 s"); }, 5000);
		document.addEventListener("htmx:afterSettle", function once(ev) {
			if (!document.getElementById("undo-stack")) return;
			document.removeEventListener("htmx:afterSettle", once);
			clearTimeout(timer);
			setTimeout(function () { done(document.activeElement ? document.activeElement.id : ""); }, 0);
		});
	})`, chromedp.EvalAwaitPromise)); got != "draft-text" {
		t.Fatalf("after the undo stack's poll the focus is on %q; want it to stay in the reply (draft-text) while the person types", got)
	}
	sel := run(b, "read the selection", chromedp.Evaluate[string](
		`(t => t.selectionStart + "-" + t.selectionEnd + "/" + t.value.length)(document.getElementById("draft-text"))`))
	if n := len([]rune(second.Text)); sel != fmt.Sprintf("0-%d/%d", n, n) {
		v := run(b, "read the reply", chromedp.Value(chromedp.ID("draft-text")))
		t.Fatalf("Ctrl+A in the reply selected %s (start-end/length); want all of the %d characters of the draft %q (field: %q)", sel, n, second.Text, v)
	}
	b.do("type the edit", press(edited))
	if got := run(b, "read the reply", chromedp.Value(chromedp.ID("draft-text"))); got != edited {
		t.Fatalf("the reply field holds %q after typing; want %q", got, edited)
	}
	b.screenshot("edit-typed")
	b.do("press Ctrl+Enter",
		press(kb.Enter, chromedp.ModifierCtrl),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q]`, third.ID))),
	)
	stillSamePage("Ctrl+Enter")
	if got := run(b, "read the notice", chromedp.Text(chromedp.CSS("#card .notice.ok"))); !strings.Contains(got, "with your edit") {
		t.Errorf("after Ctrl+Enter, the notice says %q; want it to say the edit was approved", got)
	}
	b.screenshot("edit-approved")

	// r: give a reason, Enter rejects.
	const reason = "spam, not a lead"
	b.do("press r, type a reason",
		press("r"),
		chromedp.WaitReady(chromedp.CSS("#reject-reason:focus")),
		press(reason),
	)
	b.screenshot("reject-typed")
	b.do("press Enter",
		press(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#card.empty`)),
	)
	stillSamePage("r and Enter")
	if got := run(b, "read the empty card", chromedp.Text(chromedp.CSS("#card.empty"))); !strings.Contains(got, "Rejected by alice") || !strings.Contains(got, "All caught up") {
		t.Errorf("after the rejection, the card says %q; want \"Rejected by alice\" and \"All caught up\"", got)
	}
	b.screenshot("rejected")

	// What the API says was decided.
	approved, err := s.drafts("approved")
	if err != nil {
		t.Fatal(err)
	}
	rejected, err := s.drafts("rejected")
	if err != nil {
		t.Fatal(err)
	}
	left, err := s.drafts("pending_approval")
	if err != nil {
		t.Fatal(err)
	}
	if len(approved) != 2 || len(rejected) != 1 || len(left) != 0 {
		t.Fatalf("drafts: %d approved, %d rejected, %d pending; want 2, 1, 0", len(approved), len(rejected), len(left))
	}
	wantText := map[string]string{first.ID: first.Text, second.ID: edited}
	outboxIDs := map[string]string{} // outbox id → the reply it must carry
	for _, d := range approved {
		want, ok := wantText[d.ID]
		if !ok {
			t.Errorf("draft %s is approved; only %s (as drafted) and %s (edited) were", d.ID, first.ID, second.ID)
			continue
		}
		if d.Decision == nil || d.Decision.By != alice.name || d.Decision.Edited != (d.ID == second.ID) {
			t.Errorf("draft %s decision %+v; want by %s, edited=%v", d.ID, d.Decision, alice.name, d.ID == second.ID)
		}
		if wantID := d.ConversationID + ":" + d.ID; d.OutboxID != wantID {
			t.Errorf("draft %s outbox id %q; want %q", d.ID, d.OutboxID, wantID)
		}
		var o outboxRow
		if err := s.getJSON("/api/v1/outbox/"+d.OutboxID, &o); err != nil {
			t.Errorf("outbox row of draft %s: %v", d.ID, err)
			continue
		}
		if o.DraftID != d.ID || o.Text != want || o.ApprovedBy != alice.name {
			t.Errorf("outbox %s: draft %q, text %q, approved by %q; want %q, %q, %q", o.ID, o.DraftID, o.Text, o.ApprovedBy, d.ID, want, alice.name)
		}
		outboxIDs[d.OutboxID] = want
	}
	if r := rejected[0]; r.ID != third.ID || r.OutboxID != "" || r.Decision == nil || r.Decision.Reason != reason || r.Decision.By != alice.name {
		t.Errorf("rejected draft %s: outbox %q, decision %+v; want %s with no outbox, rejected by %s with reason %q", r.ID, r.OutboxID, r.Decision, third.ID, alice.name, reason)
	}

	// What the sandbox provider received: the two approved replies, once each.
	var msgs []sandboxMessage
	eventually(t, 20*time.Second, "the sandbox provider to receive the 2 approved replies", func() (bool, string) {
		msgs, err = s.sandbox()
		if err != nil {
			return false, err.Error()
		}
		return len(msgs) >= 2, fmt.Sprintf("%d messages: %+v", len(msgs), msgs)
	})
	if len(msgs) != 2 {
		t.Fatalf("the sandbox received %d messages %+v; want exactly the 2 approved replies", len(msgs), msgs)
	}
	for _, m := range msgs {
		want, ok := outboxIDs[m.Ref]
		switch {
		case !ok:
			t.Errorf("sandbox message %+v has client_ref %q, not one of the approved outbox ids", m, m.Ref)
		case m.Text != want || m.Repeats != 0:
			t.Errorf("sandbox message %s: text %q, repeats %d; want %q, sent once", m.Ref, m.Text, m.Repeats, want)
		}
		delete(outboxIDs, m.Ref)
	}
}

// TestCrossSitePostRefused has a page on another site submit an approval
// form to handoff in a browser that holds a live session. Even with the
// session's CSRF token leaked into the form, the approval must be refused
// and the draft stay pending; the same form from handoff's own origin then
// goes through, so it is the cross-site origin alone that was refused.
func TestCrossSitePostRefused(t *testing.T) {
	requireEnvironment(t)
	alice := user{name: "alice", role: "approver", password: "correct-horse-battery"}
	s := startServer(t, alice)
	s.postHook(hook{ID: "m-1", From: "+15550000001", Name: "Ada Lovelace", Text: "Hi! Could you quote a new website?"})
	d := s.waitPending(1)[0]

	b := newBrowser(t)
	b.login(s.url, alice, "/drafts", fmt.Sprintf(`#card[data-draft=%q]`, d.ID))
	csrf := run(b, "read the CSRF token", chromedp.Evaluate[string](`document.querySelector('meta[name="csrf-token"]').content`))
	if csrf == "" {
		t.Fatal("the queue page has no csrf-token meta")
	}

	approveURL := s.url + "/drafts/" + d.ID + "/approve"
	const evilText = "Your order is cancelled; claim a refund at http://evil.example/"
	form := func(id string) string {
		return fmt.Sprintf(`<form id=%q method="post" action=%q>`+
			`<input type="hidden" name="csrf" value=%q><input type="hidden" name="action" value="edit">`+
			`<input name="text" value=%q></form>`, id, approveURL, csrf, evilText)
	}
	served := make(chan struct{}, 1)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>You won!</title><h1>Claim your prize</h1>%s`+
			`<script>document.getElementById("f").submit()</script>`, form("f"))
		select {
		case served <- struct{}{}:
		default:
		}
	}))
	defer evil.Close()
	// 127.0.0.1 and localhost are different sites, not only different origins.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	b.do("open the other site's page", chromedp.Navigate(evilURL))
	select {
	case <-served:
	default:
		t.Fatalf("the browser was sent to %s but the page was never served", evilURL)
	}
	landed := waitLocation(t, b, approveURL)
	status := run(b, "read the answer's status", chromedp.Evaluate[int](`performance.getEntriesByType("navigation")[0].responseStatus`))
	body := run(b, "read the answer", chromedp.Text(chromedp.CSS("body")))
	b.screenshot("refused")
	t.Logf("the cross-site POST landed on %s with %d: %q", landed, status, strings.Join(strings.Fields(body), " "))
	if status != http.StatusForbidden && status != http.StatusUnauthorized {
		t.Errorf("the cross-site POST was answered %d; want it refused (403, or 401 when the cookie was withheld)", status)
	}

	var page struct {
		Drafts []draft `json:"drafts"`
	}
	if err := s.getJSON("/api/v1/drafts?status=approved", &page); err != nil {
		t.Fatal(err)
	}
	if still := s.waitPending(1)[0]; still.ID != d.ID || still.Status != "pending_approval" || len(page.Drafts) != 0 {
		t.Fatalf("after the cross-site POST: pending %s (%s), %d approved; want %s still pending_approval and nothing approved", still.ID, still.Status, len(page.Drafts), d.ID)
	}

	// The control: the very same form, posted from handoff's own page, is
	// accepted, so the session and the token were live and the refusal
	// above was the cross-site check's doing.
	b.do("post the same form from the queue page",
		chromedp.Navigate(s.url+"/drafts"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#card[data-draft=%q]`, d.ID))),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
			`document.body.insertAdjacentHTML("beforeend", %s); document.getElementById("same").submit()`, jsString(form("same")))),
		chromedp.WaitVisible(chromedp.CSS(`#card.empty`)),
	)
	b.screenshot("same-origin-control")
	eventually(t, 10*time.Second, "the same-origin approval to show in the API", func() (bool, string) {
		got, err := s.drafts("approved")
		if err != nil {
			return false, err.Error()
		}
		return len(got) == 1 && got[0].ID == d.ID && got[0].Decision != nil && got[0].Decision.Text == evilText,
			fmt.Sprintf("approved: %+v", got)
	})
}

// waitLocation polls the tab until it shows a loaded document at want.
// A navigation in flight destroys the page's JavaScript context, so a
// failed read is tried again until the deadline.
func waitLocation(t *testing.T, b *browser, want string) string {
	t.Helper()
	var last string
	eventually(t, stepTimeout, "the browser to land on "+want, func() (bool, string) {
		got, err := b.tryRun(chromedp.Evaluate[string](`location.href + " " + document.readyState`))
		if err != nil {
			return false, fmt.Sprintf("last: %v", err)
		}
		last = got
		return got == want+" complete", "last: " + got
	})
	return strings.TrimSuffix(last, " complete")
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
