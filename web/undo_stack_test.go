package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// TestLeadActionsAnswer: "Send my reply", "Close without reply" and "Draft
// again" from the queue each say what they did, in words, on the next
// page, and move the queue on to another customer's draft; a reply and a
// close are on the undo stack, and undoing the close reopens the lead with
// its draft waiting again.
func TestLeadActionsAnswer(t *testing.T) {
	t.Parallel()
	clock := &settable{now: time.Now().UTC()}
	e := holdingEnv(t, clock)
	da := pending(t, e, "demo", "la", "do you ship to Lisbon?")
	db := pending(t, e, "demo", "lb", "spam spam")
	dc := pending(t, e, "demo", "lc", "what are your hours?")
	b := loggedIn(t, e, "dana", store.RoleApprover, "")
	follow := func(what string, p page, want string) page {
		t.Helper()
		if p.code != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Fatalf("%s = %d to %q, want 303 to %s: %.300s", what, p.code, p.header.Get("Location"), want, p.body)
		}
		return b.getOK(want)
	}

	p := follow("send my reply", b.post("/events/"+url.PathEscape(da.EventKey)+"/reply", url.Values{"text": {"Yes, we do."}, "back": {"/drafts?id=" + da.ID}}), "/drafts?id="+db.ID)
	if !strings.Contains(p.body, "Your reply to Person la goes out at") || !strings.Contains(p.body, "Sending to Person la") || strings.Contains(p.body, "Already rejected") {
		t.Errorf("the page after Send my reply: %.4000s", p.body)
	}
	mine, err := e.st.DraftByEvent(da.EventKey)
	if err != nil || mine.Status != store.DraftApproved || !strings.Contains(p.body, `hx-post="/drafts/`+mine.ID+`/undo"`) {
		t.Errorf("the written reply %s (%v) is not on the stack: %.4000s", mine.ID, err, p.body)
	}
	if again := b.getOK("/drafts"); strings.Contains(again.body, "Your reply to Person la") {
		t.Errorf("the sentence is said twice: %.2000s", again.body)
	}

	p = follow("close", b.post("/events/"+url.PathEscape(db.EventKey)+"/close", url.Values{"reason": {"spam"}, "back": {"/drafts?id=" + db.ID}}), "/drafts?id="+dc.ID)
	lead := store.LeadKey(db.Channel, db.ConversationID)
	if h, err := e.st.Handoff(lead); err != nil || h.Status != "closed" {
		t.Fatalf("lead %s = %s, %v; want closed", lead, h.Status, err)
	}
	reopen := "/handoffs/" + url.PathEscape(lead) + "/reopen"
	if !strings.Contains(p.body, "Closed Person lb without a reply. Undo below reopens it") || !strings.Contains(p.body, `hx-post="`+reopen+`"`) || strings.Contains(p.body, "Already rejected by dana") {
		t.Errorf("the page after Close: %.4000s", p.body)
	}
	u := b.hx(reopen, nil)
	if u.code != http.StatusOK || !strings.Contains(u.body, "Undone: Person lb is open again, and the draft waits for approval.") || strings.Contains(u.body, `hx-post="`+reopen+`"`) {
		t.Errorf("undo the close: %d %.1000s", u.code, u.body)
	}
	if h, err := e.st.Handoff(lead); err != nil || h.Status == "closed" || h.TurnDraft != db.EventKey {
		t.Errorf("lead after the undo = %s turn %q, %v; want open with its turn", h.Status, h.TurnDraft, err)
	}
	if d, err := e.st.Draft(db.ID); err != nil || d.Status != store.DraftPending {
		t.Errorf("draft after the undone close = %s, %v; want pending", d.Status, err)
	}

	p = follow("draft again", b.post("/events/"+url.PathEscape(dc.EventKey)+"/redraft", url.Values{"instruction": {"shorter"}, "back": {"/drafts?id=" + dc.ID}}), "/drafts?id="+db.ID)
	if !strings.Contains(p.body, "A new draft for Person lc is being written with your instruction “shorter”") || !strings.Contains(p.body, "The template drafter ignores instructions") {
		t.Errorf("the page after Draft again: %.4000s", p.body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		d, err := e.st.DraftByEvent(dc.EventKey)
		return err == nil && d.Version == 2
	}, "the new draft")

	// A close after the window cannot be undone: 409 in a sentence.
	if p := b.post("/events/"+url.PathEscape(db.EventKey)+"/close", url.Values{"reason": {"spam"}, "back": {"/drafts"}}); p.code != http.StatusSeeOther {
		t.Fatalf("close again = %d", p.code)
	}
	clock.Set(clock.Now().Add(2 * time.Minute))
	late := b.hx(reopen, nil)
	if late.code != http.StatusConflict || late.header.Get("HX-Retarget") != "#undo-stack" || !strings.Contains(late.body, "the undo window of this close ended at") {
		t.Errorf("late undo of the close: %d %q %.600s", late.code, late.header.Get("HX-Retarget"), late.body)
	}
}

// TestUndoRejectAndSelection: a rejection on the queue is on the stack and
// its Undo brings the draft back; approving a selection holds every reply
// and puts each on the stack.
func TestUndoRejectAndSelection(t *testing.T) {
	t.Parallel()
	e := holdingEnv(t, nil)
	d1 := pending(t, e, "demo", "rs1", "one")
	d2 := pending(t, e, "demo", "rs2", "two")
	b := loggedIn(t, e, "dana", store.RoleApprover, "")

	p := b.hx("/drafts/"+d1.ID+"/reject", url.Values{"reason": {"off"}})
	if p.code != http.StatusOK || !strings.Contains(p.body, "Rejected the draft for Person rs1") || !strings.Contains(p.body, `hx-post="/drafts/`+d1.ID+`/undo"`) {
		t.Fatalf("reject answer: %d %.1500s", p.code, p.body)
	}
	u := b.hx("/drafts/"+d1.ID+"/undo", url.Values{"from": {"queue"}})
	if u.code != http.StatusOK || !strings.Contains(u.body, `data-draft="`+d1.ID+`"`) || !strings.Contains(u.body, "Undone: the draft for Person rs1 waits for approval again.") {
		t.Fatalf("undo the rejection: %d %.1500s", u.code, u.body)
	}
	code, ans := apiPost(t, e, "/api/v1/drafts/"+d1.ID+"/undo", "")
	if code != http.StatusConflict || !strings.Contains(ans["error"].(string), "not rejected; there is no rejection to undo") && !strings.Contains(ans["error"].(string), "there is no approval to undo") {
		t.Errorf("a second undo: %d %v", code, ans)
	}

	sel := b.hx("/drafts/selected", url.Values{"action": {"approve"}, "id": {d1.ID, d2.ID}})
	if sel.code != http.StatusOK || !strings.Contains(sel.body, "Sending to Person rs1") || !strings.Contains(sel.body, "Sending to Person rs2") || !strings.Contains(sel.body, `hx-swap-oob="true"`) {
		t.Fatalf("approve selected: %d %.2000s", sel.code, sel.body)
	}
	page := b.getOK("/handoffs")
	if !strings.Contains(page.body, `hx-post="/drafts/`+d1.ID+`/undo"`) || !strings.Contains(page.body, `hx-post="/drafts/`+d2.ID+`/undo"`) || strings.Count(page.body, `id="undo"`) != 1 {
		t.Errorf("another page's stack after the selection: %.3000s", page.body)
	}
	// Away from the queue, an Undo answers the stack, saying what it did.
	u = b.hx("/drafts/"+d2.ID+"/undo", nil)
	if u.code != http.StatusOK || !strings.Contains(u.body, `id="undo-stack"`) || !strings.Contains(u.body, "Undone: the reply to Person rs2 was not sent") || strings.Contains(u.body, `id="card"`) {
		t.Errorf("undo from another page: %d %.1500s", u.code, u.body)
	}
	// Without htmx (a plain form post), the undo goes to the draft's card
	// and the next page's stack says what it did, once.
	plain := b.post("/drafts/"+d1.ID+"/undo", nil)
	if plain.code != http.StatusSeeOther || plain.header.Get("Location") != "/drafts?id="+d1.ID {
		t.Fatalf("plain undo = %d to %q, want 303 to the draft", plain.code, plain.header.Get("Location"))
	}
	if next := b.getOK("/drafts?id=" + d1.ID); !strings.Contains(next.body, "Undone: the reply to Person rs1 was not sent") {
		t.Errorf("the page after a plain undo does not say it: %.3000s", next.body)
	}
	if again := b.getOK("/drafts?id=" + d1.ID); strings.Contains(again.body, "Undone: the reply to Person rs1") {
		t.Errorf("the sentence is said twice: %.2000s", again.body)
	}
}
