package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
)

// TestQueueLookedByEndsWithDecision: bob opens the draft ann has open and
// reads that she is looking at it; ann approves it, and bob's next poll
// deletes the sentence (and says it was approved), instead of leaving
// "ann is looking at this draft too" on a decided draft. A decision
// posted without htmx releases the claim too.
func TestQueueLookedByEndsWithDecision(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	d1 := pending(t, e, "demo", "c1", "first message")
	d2 := pending(t, e, "demo", "c2", "second message")
	ann := loggedIn(t, e, "ann", store.RoleApprover, "") // login opens /drafts: ann holds d1
	bob := loggedIn(t, e, "bob", store.RoleApprover, "")
	hx := http.Header{"Hx-Request": {"true"}}

	if p := bob.getOK("/drafts?id=" + d1.ID); !strings.Contains(p.body, html.EscapeString("ann is looking at this draft too")) {
		t.Fatalf("bob opening ann's draft is not told that ann is looking at it")
	}
	p := bob.do(http.MethodGet, "/drafts/live?current="+d1.ID, nil, hx)
	if p.code != http.StatusOK || !strings.Contains(p.body, `id="looked-by" class="notice warn" hx-swap-oob="true">ann is looking`) {
		t.Fatalf("bob's poll while ann looks: %d %.600s; want the sentence again, out of band", p.code, p.body)
	}
	if r := ann.hx("/drafts/"+d1.ID+"/approve", url.Values{"action": {"approve"}}); r.code != http.StatusOK {
		t.Fatalf("ann approves: %d %.300s", r.code, r.body)
	}
	p = bob.do(http.MethodGet, "/drafts/live?current="+d1.ID, nil, hx)
	if p.code != http.StatusOK || !strings.Contains(p.body, `<p id="looked-by" hx-swap-oob="delete"></p>`) || !strings.Contains(p.body, "Already approved by ann") {
		t.Fatalf("bob's poll after ann approved: %d %.800s; want the sentence deleted and the approval said", p.code, p.body)
	}
	if strings.Contains(p.body, "ann is looking") {
		t.Errorf("bob's poll after ann approved still says ann is looking at it")
	}

	// Without htmx (a plain form post) the claim goes as well.
	ann.getOK("/drafts?id=" + d2.ID)
	if r := ann.post("/drafts/"+d2.ID+"/reject", url.Values{"reason": {"spam"}}); r.code != http.StatusSeeOther {
		t.Fatalf("ann rejects with a plain post: %d %.300s; want 303", r.code, r.body)
	}
	e.srv.claims.mu.Lock()
	_, held := e.srv.claims.m[d2.ID]
	e.srv.claims.mu.Unlock()
	if held {
		t.Errorf("the claim on %s outlived its rejection", d2.ID)
	}
}

// TestQueueFooterInWords: the queue's footer counts the drafts in words
// ("1 waiting · 0 approved …", not pending_approval), and the answer to an
// approval brings it up to date out of band.
func TestQueueFooterInWords(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	d := pending(t, e, "demo", "f1", "first message")
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := ann.getOK("/drafts")
	if !strings.Contains(p.body, "1 waiting · 0 approved · 0 rejected · 0 replaced by a newer draft") || strings.Contains(p.body, "pending_approval") {
		t.Errorf("the footer does not count in words: %s", footer(p.body))
	}
	r := ann.hx("/drafts/"+d.ID+"/approve", url.Values{"action": {"approve"}})
	if r.code != http.StatusOK || !strings.Contains(r.body, `id="draft-counts" class="muted small" hx-swap-oob="true">0 waiting · 1 approved · 0 rejected · 0 replaced by a newer draft`) {
		t.Errorf("the approval's answer: %d %s; want the footer again, out of band, counting the approval", r.code, footer(r.body))
	}
}

func footer(body string) string {
	i := strings.Index(body, `id="draft-counts"`)
	if i < 0 {
		return "(no footer)"
	}
	return body[i:min(len(body), i+300)]
}

// TestQueueSaysMoreAfterList: with more drafts waiting than the list holds
// (20), the list ends saying how many wait after it, with the next page;
// the live poll says it too, and a filtered view, which cannot count them
// cheaply, says that more wait. The shortcuts' dialog lists u, and
// "Approve selected" is not the page's primary button.
func TestQueueSaysMoreAfterList(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	for i := range queuePage + 3 {
		pending(t, e, "demo", fmt.Sprintf("m%02d", i), fmt.Sprintf("message %d", i))
	}
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := ann.getOK("/drafts")
	if !strings.Contains(p.body, `id="queue-more" class="more" data-more="3"`) || !strings.Contains(p.body, "3 more drafts wait after these.") || !strings.Contains(p.body, `>Next page →</a>`) {
		t.Errorf("the full list does not end with what waits after it: %.600s", after(p.body, `id="queue-more"`))
	}
	live := ann.do(http.MethodGet, "/drafts/live", nil, http.Header{"Hx-Request": {"true"}})
	if !strings.Contains(live.body, `data-more="3"`) {
		t.Errorf("the poll does not say 3 wait after the list: %.600s", after(live.body, `id="queue-more"`))
	}
	if f := ann.getOK("/drafts?channel=demo"); !strings.Contains(f.body, "More drafts wait after these.") {
		t.Errorf("the filtered full list does not say more wait: %.600s", after(f.body, `id="queue-more"`))
	}
	if !strings.Contains(p.body, "<dt><kbd>u</kbd></dt>") {
		t.Error("the shortcuts' dialog leaves out u")
	}
	if !strings.Contains(p.body, `<button id="approve-selected" type="submit"`) {
		t.Errorf("Approve selected is styled as the primary action: %.200s", after(p.body, `id="approve-selected"`))
	}
}

func after(body, mark string) string {
	i := strings.Index(body, mark)
	if i < 0 {
		return "(no " + mark + ")"
	}
	return body[i:]
}
