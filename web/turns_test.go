package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// turnHook posts the corpus body b to the demo channel and returns the
// stored event, which must be what b's Want says.
func turnHook(t *testing.T, e *testEnv, b corpus.Body) store.Event {
	t.Helper()
	if code, ans := hookCorpus(t, e, "demo", b); code != http.StatusAccepted {
		t.Fatalf("hook %s: %d %v", b.Name(), code, ans)
	}
	return wantStored(t, e, "demo", b)
}

func turnDraft(t *testing.T, e *testEnv, key string) store.Draft {
	t.Helper()
	var d store.Draft
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		d, err = e.st.DraftByEvent(key)
		return err == nil
	}, "the draft of "+key)
	return d
}

// TestApproveSupersededNamesCurrent: approving a draft that a newer message
// superseded answers 409 naming the turn's current draft, which can be
// approved; the timeline of the newer message says which draft answers it.
func TestApproveSupersededNamesCurrent(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	// Two messages of one customer, whose name has markup in it.
	m1 := corpus.MessageAs("fish", "pretty2", "m1", "c1", "ada@example.com")
	e1 := turnHook(t, e, m1)
	d1 := turnDraft(t, e, e1.Key)
	e2 := turnHook(t, e, corpus.MessageAs("fish", "python", "m2", "c1", "ada@example.com"))
	ada := html.EscapeString(m1.Want.Name)
	code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+d1.ID+"/approve", "", nil, tokenHeader())
	if code != http.StatusConflict || ans["current_draft_id"] != store.DraftID(e2.ID) || ans["draft_id"] != d1.ID || !strings.Contains(fmt.Sprint(ans["error"]), store.DraftID(e2.ID)) {
		t.Fatalf("approve the superseded draft = %d %v; want 409 naming %s", code, ans, store.DraftID(e2.ID))
	}
	d2 := turnDraft(t, e, e2.Key)
	if len(d2.Answers) != 2 || d2.Answers[0] != e1.Key || d2.Answers[1] != e2.Key {
		t.Errorf("current draft answers %v; want both messages", d2.Answers)
	}
	// The card of the superseded draft names the customer, not two ids,
	// and its Next draft goes to their current draft; so does the refusal
	// of an approval from the queue.
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	current := `id="card-next" class="button primary" href="/drafts?id=` + d2.ID + `"`
	p := b.getOK("/drafts?id=" + d1.ID)
	if !strings.Contains(p.body, ada+" wrote again, so this draft no longer answers the conversation. Their current draft waits for approval") || !strings.Contains(p.body, current) || strings.Contains(p.body, "superseded by d0") {
		t.Errorf("the superseded draft's card does not name %s or link %s: %.4000s", ada, d2.ID, p.body)
	}
	if p := b.hx("/drafts/"+d1.ID+"/approve", nil); p.code != http.StatusConflict || !strings.Contains(p.body, ada+" wrote again") || !strings.Contains(p.body, current) {
		t.Errorf("approving the superseded draft from the queue: %d %.3000s", p.code, p.body)
	}
	if code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+d2.ID+"/approve", "", nil, tokenHeader()); code != http.StatusOK || ans["outbox_id"] != "c1:"+d2.ID {
		t.Fatalf("approve the current draft = %d %v; want 200 with outbox c1:%s", code, ans, d2.ID)
	}
	code, ans = e.do(t, http.MethodGet, "/api/v1/drafts?status=superseded", "", nil, tokenHeader())
	if list, _ := ans["drafts"].([]any); code != http.StatusOK || len(list) != 1 {
		t.Errorf("superseded drafts = %d %v; want the one", code, ans)
	}
	if got := series(scrape(t, e), "handoff_drafts"); got["status=superseded"] != 1 || got["status=approved"] != 1 || got["status=pending_approval"] != 0 {
		t.Errorf("handoff_drafts = %v; want 1 superseded, 1 approved, none waiting", got)
	}
	p = b.getOK("/drafts?id=" + d1.ID)
	if !strings.Contains(p.body, ada+" wrote again") || !strings.Contains(p.body, "it has been answered or closed since") {
		t.Errorf("the superseded draft's card once the current one is approved: %.4000s", p.body)
	}
}

// TestReplyNeedsRecipientAndClose: a lead without a contact cannot be
// approved (409 saying why, and the card offers no approval but closing),
// and closing it without a reply ends it; a second close answers the first.
func TestReplyNeedsRecipientAndClose(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	ev := turnHook(t, e, withoutMembers(t, corpus.MessageAs("emoji", "pretty4", "n1", "anon-1", ""), "from"))
	d := turnDraft(t, e, ev.Key)
	code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", "", nil, tokenHeader())
	if code != http.StatusConflict || !strings.Contains(fmt.Sprint(ans["error"]), "without a contact") {
		t.Fatalf("approve without a contact = %d %v; want 409 saying the lead has no contact", code, ans)
	}
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/drafts?id=" + d.ID)
	if !strings.Contains(p.body, `id="no-recipient"`) || strings.Contains(p.body, `id="approve"`) || !strings.Contains(p.body, `id="close-lead"`) {
		t.Errorf("card of a lead without a contact: want the reason, no approve button, the close form: %.3000s", p.body)
	}
	if p := b.post("/events/"+url.PathEscape(ev.Key)+"/close", url.Values{"reason": {"no way to answer"}, "back": {"/drafts"}}); p.code != http.StatusSeeOther || p.header.Get("Location") != "/drafts" {
		t.Fatalf("close from the card = %d %s; want 303 back to /drafts", p.code, p.header.Get("Location"))
	}
	h, err := e.st.Handoff(store.LeadKey("demo", "anon-1"))
	if err != nil || h.Status != leads.Closed || h.Closed == nil || h.Closed.By != "ann" || h.Closed.Reason != "no way to answer" {
		t.Fatalf("lead = %+v, %v; want closed by ann", h, err)
	}
	code, ans = e.do(t, http.MethodPost, "/api/v1/events/"+url.PathEscape(ev.Key)+"/close", "application/json", []byte(`{"reason":"again"}`), tokenHeader())
	if code != http.StatusOK || ans["status"] != "already_closed" {
		t.Errorf("close again = %d %v; want 200 already_closed", code, ans)
	}
	if v, ok := gauge(t, scrape(t, e), "handoff_leads_closed_total"); !ok || v != 1 {
		t.Errorf("handoff_leads_closed_total = %v (%v); want 1", v, ok)
	}
	if p := b.getOK("/events/" + url.PathEscape(ev.Key)); !strings.Contains(p.body, `id="lead-closed"`) || strings.Contains(p.body, `id="lead-actions"`) {
		t.Errorf("timeline of the closed lead: want the closing said, no actions: %.3000s", p.body)
	}
	if p := b.post("/events/"+url.PathEscape(ev.Key)+"/close", url.Values{"reason": {"x"}, "back": {"//evil.example/"}}); p.code != http.StatusSeeOther || p.header.Get("Location") != "/events/"+url.PathEscape(ev.Key) {
		t.Errorf("close with an outside back = %d %s; want 303 to the event's own page", p.code, p.header.Get("Location"))
	}
}

// TestRejectThenReplyMyself: after a rejection a person writes the reply
// from the event page; it is sent once, through the same outbox.
func TestRejectThenReplyMyself(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	ev := turnHook(t, e, corpus.MessageAs("hebrew", "crlf", "r1", "c9", "ada@example.com"))
	d := turnDraft(t, e, ev.Key)
	if code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+d.ID+"/reject", "application/json", []byte(`{"reason":"wrong"}`), tokenHeader()); code != http.StatusOK {
		t.Fatalf("reject = %d %v", code, ans)
	}
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	if p := b.getOK("/events/" + url.PathEscape(ev.Key)); !strings.Contains(p.body, `id="send-own"`) || !strings.Contains(p.body, `id="redraft"`) {
		t.Fatalf("timeline after a rejection offers no way on: %.3000s", p.body)
	}
	p := b.post("/events/"+url.PathEscape(ev.Key)+"/reply", url.Values{"text": {"Yes, 10 to 4 on Sundays."}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("reply = %d %.500s", p.code, p.body)
	}
	cur, err := e.st.DraftByEvent(ev.Key)
	if err != nil || cur.Version != 2 || cur.Author != "ann" || cur.Status != store.DraftApproved {
		t.Fatalf("draft after the reply = %+v, %v; want version 2 by ann, approved", cur, err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		o, err := e.st.OutboxRow("c9:" + cur.ID)
		return err == nil && o.Status == store.OutboxSent && o.Text == "Yes, 10 to 4 on Sundays."
	}, "the written reply to be sent")
	code, ans := e.do(t, http.MethodPost, "/api/v1/events/"+url.PathEscape(ev.Key)+"/reply", "application/json", []byte(`{"text":"twice?"}`), tokenHeader())
	if code != http.StatusConflict {
		t.Errorf("a second reply = %d %v; want 409, the turn is answered", code, ans)
	}
	msgs, err := e.st.SandboxMessages(100)
	if err != nil || len(msgs) != 1 {
		t.Errorf("sandbox received %d messages, %v; want 1", len(msgs), err)
	}
}

// TestQueueSaysDraftingFails: with the model answering 500, the queue does
// not say "all caught up": it says how many messages wait for a draft, that
// drafting fails, since when and the last error, and names the leads out
// of attempts, whose timeline offers "draft again".
func TestQueueSaysDraftingFails(t *testing.T) {
	t.Parallel()
	model := testkit.NewModel(t)
	model.Always(testkit.ErrorReply(http.StatusInternalServerError, "the model is overloaded", ""))
	cfg := config.Default()
	cfg.Drafter = config.Drafter{Kind: "openai", BaseURL: model.URL, Model: "m", PromptVersion: "p1", Timeout: 5 * time.Second}
	cfg.Retry.MaxAttempts = 2
	e := newTestEnv(t, cfg)
	turnHook(t, e, corpus.MessageAs("short", "pretty2", "f1", "c1", "ada@example.com"))
	turnHook(t, e, corpus.MessageAs("slashes", "goescaped", "f2", "c1", "ada@example.com"))
	h, err := e.st.Handoff(store.LeadKey("demo", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	e1 := store.Event{Key: h.TurnDraft} // the event that drafts the turn
	testkit.Eventually(t, 10*time.Second, func() bool {
		d, err := e.st.DraftingFor(store.Everything())
		return err == nil && len(d.Failed) == 1 && d.Failed[0] == e1.Key
	}, "the turn's draft job to run out of attempts")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/drafts")
	for _, want := range []string{`id="drafting-failing"`, "2 messages from 1 lead are waiting for a draft", "Drafting is failing for 1 of them since", "500", e1.Key} {
		if !strings.Contains(p.body, want) {
			t.Errorf("queue does not show %q: %.3000s", want, p.body)
		}
	}
	if strings.Contains(p.body, "All caught up") {
		t.Errorf("queue says all caught up while drafting fails")
	}
	if p := b.getOK("/events/" + url.PathEscape(e1.Key)); !strings.Contains(p.body, `id="redraft"`) {
		t.Errorf("timeline of the failed lead offers no \"draft again\": %.3000s", p.body)
	}
}
