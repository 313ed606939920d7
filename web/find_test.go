package web

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/views"
)

// hookFrom posts a message of name (none when "") from contact (its
// conversation) to channel, in a corpus body (demoMessage), and waits for
// its event.
func hookFrom(t *testing.T, e *testEnv, channel, id, contact, name, text string) {
	t.Helper()
	if code, ans := hookCorpus(t, e, channel, demoMessage(t, id, "", contact, name, text)); code != http.StatusAccepted {
		t.Fatalf("hook: %d %v", code, ans)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		_, err := e.st.EventByKey(channel + ":" + id)
		return err == nil
	}, "the event "+id)
}

// TestSearchPartsKeepToTheClient: a person limited to acme finds acme's
// Zoë Müller by "zoe", "Muller" and the last digits of her number, and
// never bolt's Zoë Müller, whose name and number match just as well; a
// person who sees every client finds both.
func TestSearchPartsKeepToTheClient(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	hookFrom(t, e, "web-a", "za-1", "+15552490978", "Zoë Müller", "hello from acme")
	hookFrom(t, e, "web-b", "zb-1", "+15552490979", "Zoë Müller", "hello from bolt")
	ann := limitedUser(t, e, "ann", store.RoleApprover, "acme")
	all := loggedIn(t, e, "boss", store.RoleAdmin, "")
	for _, q := range []string{"zoe", "Muller", "0978", "555249", "muller zoe"} {
		p := ann.get("/search?q=" + url.QueryEscape(q))
		if p.code != http.StatusOK || !strings.Contains(p.body, "+15552490978") || strings.Contains(p.body, "+15552490979") || strings.Contains(p.body, "hello from bolt") {
			t.Errorf("acme's approver searching %q: %d, want acme's Zoë alone: %.600s", q, p.code, p.body)
		}
	}
	if p := all.get("/search?q=555249"); !strings.Contains(p.body, "+15552490978") || !strings.Contains(p.body, "+15552490979") {
		t.Errorf("an admin searching 555249: %d, want both: %.600s", p.code, p.body)
	}
	if p := ann.get("/search?q=0979"); p.code != http.StatusNotFound {
		t.Errorf("acme's approver searching bolt's last digits: %d, want 404", p.code)
	}
}

// TestLeadListAndPage: the lead list names the lead and shows its latest
// message on one line (escaped) with its owner and time in status; the
// lead's page shows its messages in order, the status history, and the
// engineering detail folded in a details element.
func TestLeadListAndPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	hookFrom(t, e, "demo", "l-1", "+15550001111", "Zoë Müller", "first <b>question</b>")
	hookFrom(t, e, "demo", "l-2", "+15550001111", "", "second\nline & <i>more</i>")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/handoffs")
	for _, w := range []string{"Zoë Müller", html.EscapeString("second line & <i>more</i>"), "· owner ", "· <span title="} {
		if !strings.Contains(p.body, w) {
			t.Errorf("the lead list lacks %q: %.900s", w, p.body)
		}
	}
	if strings.Contains(p.body, "<i>more</i>") {
		t.Error("the lead list renders a message's markup")
	}
	if !strings.Contains(p.body, `href="`+views.EventURL("demo:l-2")+`"`) {
		t.Errorf("the row does not open the lead's page at its latest message: %.900s", p.body)
	}
	p = b.getOK(views.EventURL("demo:l-1"))
	_, conv, _ := strings.Cut(p.body, `id="lead-conversation"`)
	conv, _, _ = strings.Cut(conv, "</section>")
	i, j := strings.Index(conv, "first &lt;b&gt;question"), strings.Index(conv, "second")
	if i < 0 || j < 0 || i > j {
		t.Errorf("the lead page's conversation is not the two messages in order (%d, %d): %.900s", i, j, conv)
	}
	for _, w := range []string{`id="lead-history"`, "message received", `<details id="engineering"`, "Correlation id", "this message"} {
		if !strings.Contains(p.body, w) {
			t.Errorf("the lead page lacks %q", w)
		}
	}
	if strings.Contains(p.body, `<details id="engineering" class="panel engineering" open`) {
		t.Error("the engineering detail is open")
	}
}
