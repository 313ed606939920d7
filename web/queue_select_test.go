package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// hookMessage posts one message to channel's hook.
func hookMessage(t *testing.T, e *testEnv, channel string, b corpus.Body) {
	t.Helper()
	if code, ans := hookCorpus(t, e, channel, b); code != http.StatusAccepted {
		t.Fatalf("hook %s: %d %v", b.Name(), code, ans)
	}
}

// draftOf waits for the draft of eventKey.
func draftOf(t *testing.T, e *testEnv, eventKey string) store.Draft {
	t.Helper()
	var d store.Draft
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		d, err = e.st.DraftByEvent(eventKey)
		return err == nil
	}, "the draft of "+eventKey)
	return d
}

// approveSent approves draft d through the API and waits for its reply to be sent.
func approveSent(t *testing.T, e *testEnv, d store.Draft) string {
	t.Helper()
	code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+d.ID+"/approve", "", nil, http.Header{"Authorization": {"Bearer " + testToken}})
	if code != http.StatusOK {
		t.Fatalf("approve %s: %d %v", d.ID, code, ans)
	}
	id := ans["outbox_id"].(string)
	testkit.Eventually(t, 10*time.Second, func() bool {
		o, err := e.st.OutboxRow(id)
		return err == nil && o.Status == store.OutboxSent
	}, "the reply of "+d.ID+" to be sent")
	return id
}

// TestQueueCardConversation: the card of a lead's second message shows
// the first message and the reply already sent to it, then the turn's
// message, marked, newest last; the lead's name stands in for the
// message that gave none.
func TestQueueCardConversation(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	hookMessage(t, e, "demo", demoMessage(t, "c1", "w-0045", "ada@example.com", "Ada Lovelace", "Where is my refund?"))
	d1 := draftOf(t, e, "demo:c1")
	approveSent(t, e, d1)
	hookMessage(t, e, "demo", demoMessage(t, "c2", "w-0045", "ada@example.com", "", "Any news on it?"))
	d2 := draftOf(t, e, "demo:c2")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/drafts?id=" + d2.ID)
	card := p.body[strings.Index(p.body, `id="card"`):]
	if !strings.Contains(card, `<h2 dir="auto">Ada Lovelace</h2>`) {
		t.Errorf("the card does not call the lead by the name its first message gave: %.300s", card)
	}
	first := strings.Index(card, "Where is my refund?")
	reply := strings.Index(card, d1.Text)
	sent := strings.Index(card, `<span class="chip reply-ok">sent</span>`)
	turn := strings.Index(card, `<span class="chip turn">this turn</span>`)
	now := strings.Index(card, "Any news on it?")
	if !strings.Contains(card, `id="conversation"`) || first < 0 || reply < 0 || sent < 0 || turn < 0 || now < 0 {
		t.Fatalf("the card lacks the conversation (first %d, reply %d, sent %d, turn %d, now %d): %.1500s", first, reply, sent, turn, now, card)
	}
	if !(first < reply && reply < turn && turn < now) {
		t.Errorf("the conversation is not oldest first with the turn last: first %d, reply %d, turn %d, now %d", first, reply, turn, now)
	}
	if strings.Count(card, `class="said out"`) != 1 || strings.Count(card, `class="said in"`) != 1 {
		t.Errorf("want one earlier message and one reply on the card: %.1500s", card)
	}
}

// TestSearchPage finds leads by name, contact, conversation id and the
// text of their messages, through the web, each person only in the
// clients they see.
func TestSearchPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	hookMessage(t, e, "web-a", demoMessage(t, "a1", "w-0045", "ada@acme.example", "Ada Lovelace", "I would like a refund"))
	hookMessage(t, e, "web-b", demoMessage(t, "b1", "w-0046", "king@bolt.example", "Ada King", "Refund, now"))
	draftOf(t, e, "web-a:a1")
	draftOf(t, e, "web-b:b1")
	ann := limitedUser(t, e, "ann", store.RoleApprover, "acme")
	bob := limitedUser(t, e, "bob", store.RoleApprover, "bolt")
	admin := loggedIn(t, e, "root", store.RoleAdmin, "")
	tests := []struct {
		who       string
		b         *browser
		q         string
		code      int
		want, not []string
	}{
		{"ann", ann, "Ada", 200, []string{"Ada Lovelace", "ada@acme.example", "I would like a refund", "matched on name"}, []string{"Ada King"}},
		{"ann", ann, "REFUND", 200, []string{"Ada Lovelace", "matched on message text"}, []string{"Ada King", "Refund, now"}},
		{"ann", ann, "w-004", 200, []string{"Ada Lovelace", "matched on conversation id"}, []string{"Ada King"}},
		{"ann", ann, "lovel", 200, []string{"Ada Lovelace"}, nil},
		{"ann", ann, "king", 404, []string{"Nothing found"}, []string{"Ada King", "king@bolt"}},
		{"bob", bob, "ada", 200, []string{"Ada King"}, []string{"Ada Lovelace"}},
		{"bob", bob, "w-0045", 404, []string{"Nothing found"}, []string{"Lovelace"}},
		{"root", admin, "ada", 200, []string{"Ada King", "Ada Lovelace"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.who+" "+tt.q, func(t *testing.T) {
			p := tt.b.get("/search?q=" + url.QueryEscape(tt.q))
			if p.code != tt.code {
				t.Fatalf("%d, want %d: %.500s", p.code, tt.code, p.body)
			}
			for _, w := range tt.want {
				if !strings.Contains(p.body, w) {
					t.Errorf("the answer lacks %q", w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(p.body, n) {
					t.Errorf("the answer shows %q", n)
				}
			}
			if !strings.Contains(p.body, `id="search-bounds"`) || !strings.Contains(p.body, "newest") {
				t.Error("the page does not say how far the text search looked")
			}
		})
	}
	// An exact conversation id opens the lead's message, as ids do.
	if p := ann.get("/search?q=w-0045"); p.code != http.StatusSeeOther || p.header.Get("Location") != "/events/web-a:a1" {
		t.Errorf("an exact conversation id: %d %s, want 303 to the event", p.code, p.header.Get("Location"))
	}
}

// TestQueueSelectApprove decides three ticked drafts with one POST: the
// two still waiting are approved, each in its own transaction; the one
// rejected meanwhile is named with why, and does not stop the others.
func TestQueueSelectApprove(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	d1 := pending(t, e, "demo", "s1", "one")
	d2 := pending(t, e, "demo", "s2", "two")
	d3 := pending(t, e, "demo", "s3", "three")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	if p := b.getOK("/drafts"); !strings.Contains(p.body, `form="selection" name="id" value="`+d1.ID+`"`) || !strings.Contains(p.body, `id="approve-selected"`) {
		t.Fatalf("the queue has no selection: %.500s", p.body)
	}
	if code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+d3.ID+"/reject", "", nil, http.Header{"Authorization": {"Bearer " + testToken}}); code != http.StatusOK {
		t.Fatalf("reject: %d %v", code, ans)
	}
	// Without the CSRF token nothing is decided.
	if p := b.do(http.MethodPost, "/drafts/selected", url.Values{"id": {d1.ID}, "action": {"approve"}}, nil); p.code != http.StatusForbidden {
		t.Errorf("a selection without the CSRF token: %d, want 403", p.code)
	}
	p := b.hx("/drafts/selected", url.Values{"id": {d1.ID, d2.ID, d3.ID}, "action": {"approve"}})
	if p.code != http.StatusOK {
		t.Fatalf("approve selected: %d %.500s", p.code, p.body)
	}
	if !strings.Contains(p.body, "2 of 3 selected drafts approved; 1 could not be:") || !strings.Contains(p.body, d3.ID+"</a>: ") || !strings.Contains(p.body, "reject") {
		t.Errorf("the answer does not say what was approved and why %s was not: %.800s", d3.ID, p.body)
	}
	for _, d := range []store.Draft{d1, d2} {
		got, err := e.st.Draft(d.ID)
		if err != nil || got.Status != store.DraftApproved || got.Decision.By != "ann" {
			t.Errorf("draft %s after the selection: %s by %+v, %v; want approved by ann", d.ID, got.Status, got.Decision, err)
		}
	}
	if got, _ := e.st.Draft(d3.ID); got.Status != store.DraftRejected {
		t.Errorf("the rejected draft is %s now", got.Status)
	}
	// Rejecting a selection, without htmx: the whole queue answers.
	d4 := pending(t, e, "demo", "s4", "four")
	p = b.post("/drafts/selected", url.Values{"id": {d4.ID}, "action": {"reject"}, "reason": {"spam"}})
	if p.code != http.StatusOK || !strings.Contains(p.body, "1 of 1 selected draft rejected.") {
		t.Errorf("reject selected: %d %.500s", p.code, p.body)
	}
	if got, _ := e.st.Draft(d4.ID); got.Status != store.DraftRejected || got.Decision.Reason != "spam" {
		t.Errorf("draft %s after reject selected: %s %+v", d4.ID, got.Status, got.Decision)
	}
	d5 := pending(t, e, "demo", "s5", "five")
	long := url.Values{"id": {d5.ID}, "action": {"reject"}, "reason": {strings.Repeat("x", 1001)}}
	if p := b.post("/drafts/selected", long); p.code != http.StatusBadRequest || !strings.Contains(p.body, "keep it under 1000") {
		t.Errorf("a selection rejected with a 1001-byte reason: %d %.300s; want one 400 naming the reason", p.code, p.body)
	}
	if got, _ := e.st.Draft(d5.ID); got.Status != store.DraftPending {
		t.Errorf("draft %s after a refused selection: %s, want pending", d5.ID, got.Status)
	}
	for _, bad := range []url.Values{{"action": {"approve"}}, {"id": {d1.ID}, "action": {"send"}}} {
		if p := b.post("/drafts/selected", bad); p.code != http.StatusBadRequest {
			t.Errorf("selection %v: %d, want 400", bad, p.code)
		}
	}
}

// TestQueueSelectConcurrent: two approvers approve the same six drafts at
// once; each draft is approved once, and the two answers together count
// six approvals, the rest named as approved already.
func TestQueueSelectConcurrent(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	var ids []string
	for i := range 6 {
		ids = append(ids, pending(t, e, "demo", fmt.Sprintf("cc%d", i), "hello").ID)
	}
	people := []*browser{loggedIn(t, e, "ann", store.RoleApprover, ""), loggedIn(t, e, "bob", store.RoleApprover, "")}
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		bodies = make([]string, len(people))
	)
	for i, b := range people {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			p := b.hx("/drafts/selected", url.Values{"id": ids, "action": {"approve"}})
			if p.code != http.StatusOK {
				t.Errorf("approver %d: %d %.300s", i, p.code, p.body)
			}
			bodies[i] = p.body
		}()
	}
	close(start)
	wg.Wait()
	done, already := 0, 0
	for _, body := range bodies {
		var n, of int
		if _, err := fmt.Sscanf(body[strings.Index(body, `<p>`)+3:], "%d of %d", &n, &of); err != nil || of != 6 {
			t.Fatalf("an answer without its count: %v %.400s", err, body)
		}
		done += n
		already += strings.Count(body, "</a>: already approved by ")
	}
	if done != 6 || already != 6 {
		t.Errorf("the two answers approved %d drafts together and named %d as approved already, want 6 and 6", done, already)
	}
	for _, id := range ids {
		d, err := e.st.Draft(id)
		if err != nil || d.Status != store.DraftApproved {
			t.Errorf("draft %s: %s, %v", id, d.Status, err)
		}
	}
}

// TestQueueStuckBadge: a lead past its stuck threshold is marked on the
// card and in the list; before it, it is not.
func TestQueueStuckBadge(t *testing.T) {
	t.Parallel()
	var ahead atomic.Int64
	cfg := config.Default()
	e, _ := newEnv(t, cfg, envOptions{now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	pending(t, e, "demo", "st1", "hello")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	if p := b.getOK("/drafts"); strings.Contains(p.body, `chip stuck`) {
		t.Fatalf("a fresh lead is marked stuck: %.300s", p.body)
	}
	ahead.Store(int64(5 * time.Hour)) // past every default threshold
	p := b.getOK("/drafts")
	if !strings.Contains(p.body, `id="card-stuck"`) || !strings.Contains(p.body, `class="current stuck"`) {
		t.Errorf("a lead waiting 5 h is not marked stuck on the card and in the list: %.2000s", p.body)
	}
}

// TestQueueHelpDialog: the queue carries the shortcuts dialog "?" opens.
func TestQueueHelpDialog(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	p := b.getOK("/drafts")
	for _, want := range []string{`<dialog id="help"`, "<kbd>x</kbd>", "<kbd>?</kbd>"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the queue lacks %q", want)
		}
	}
}
