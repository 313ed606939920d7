package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// settable is a server clock a test moves.
type settable struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settable) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *settable) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// holdingEnv is the demo process with approvals held for a minute, so
// nothing is sent unless a test moves the server's clock past the window
// (the runner's own clock is the wall's: a job due a minute on is not run
// during a test).
func holdingEnv(t *testing.T, clock *settable) *testEnv {
	t.Helper()
	cfg := config.Default()
	cfg.UndoWindow = time.Minute
	o := envOptions{undo: true}
	if clock != nil {
		o.now = clock.Now
	}
	e, _ := newEnv(t, cfg, o)
	return e
}

// TestUndoAPI: an approval answers when it goes out; undo inside the
// window puts the draft back in the queue and takes the row and its job
// away; a second undo is a 409 in one sentence.
func TestUndoAPI(t *testing.T) {
	t.Parallel()
	e := holdingEnv(t, nil)
	d := pending(t, e, "demo", "undo-api", "do you ship to Lisbon?")
	code, ans := apiPost(t, e, "/api/v1/drafts/"+d.ID+"/approve", "")
	if code != http.StatusOK || ans["status"] != "approved" {
		t.Fatalf("approve: %d %v", code, ans)
	}
	until, err := time.Parse(time.RFC3339Nano, ans["undo_until"].(string))
	approved, derr := e.st.Draft(d.ID)
	if err != nil || derr != nil || approved.Decision == nil || !until.Equal(approved.Decision.At.Add(time.Minute)) {
		t.Fatalf("approve's undo_until = %v (%v); want the approval's time plus the one-minute window (%+v, %v)", ans["undo_until"], err, approved.Decision, derr)
	}
	outboxID := ans["outbox_id"].(string)

	code, ans = apiPost(t, e, "/api/v1/drafts/"+d.ID+"/undo", "")
	if code != http.StatusOK || ans["status"] != "undone" || ans["outbox_id"] != outboxID || ans["undone_by"] != "api-token" {
		t.Fatalf("undo: %d %v; want 200 undone by api-token", code, ans)
	}
	if _, err := e.st.OutboxRow(outboxID); err == nil {
		t.Errorf("the outbox row %s is still there after the undo", outboxID)
	}
	got, err := e.st.Draft(d.ID)
	if err != nil || got.Status != store.DraftPending {
		t.Errorf("draft after the undo = %s, %v; want pending", got.Status, err)
	}
	code, list := e.do(t, http.MethodGet, "/api/v1/drafts", "", nil, http.Header{"Authorization": {"Bearer " + testToken}})
	if code != http.StatusOK || !strings.Contains(fmt.Sprint(list), d.ID) {
		t.Errorf("the queue after the undo does not list %s: %d %v", d.ID, code, list)
	}

	code, ans = apiPost(t, e, "/api/v1/drafts/"+d.ID+"/undo", "")
	if code != http.StatusConflict || !strings.Contains(ans["error"].(string), "there is no approval to undo") {
		t.Errorf("second undo: %d %v; want 409 saying there is no approval to undo", code, ans)
	}
	if code, ans := apiPost(t, e, "/api/v1/drafts/dnope/undo", ""); code != http.StatusNotFound || !strings.Contains(ans["error"].(string), `there is no draft "dnope"`) {
		t.Errorf("undo of an unknown draft: %d %v; want 404", code, ans)
	}
}

// TestUndoFromTheQueue: approving in the dashboard answers the next card
// with the undo stack swapped in, "Sending to Person undo-q1 in 60 s ·
// Undo"; the stack is read from the server, so it is on the next draft's
// page (j), on a reload and on another page, and its poll says the same;
// its Undo on the queue brings the draft's card back, waiting again. Once
// the window is over the entry is gone, and an undo is refused with a
// sentence that replaces only the stack (the card stays).
func TestUndoFromTheQueue(t *testing.T) {
	t.Parallel()
	clock := &settable{now: time.Now().UTC()}
	e := holdingEnv(t, clock)
	first := pending(t, e, "demo", "undo-q1", "first message")
	second := pending(t, e, "demo", "undo-q2", "second message")
	b := loggedIn(t, e, "dana", store.RoleApprover, "")

	entry := `hx-post="/drafts/` + first.ID + `/undo"`
	p := b.hx("/drafts/"+first.ID+"/approve", nil)
	if p.code != http.StatusOK || !strings.Contains(p.body, `id="undo-stack"`) || !strings.Contains(p.body, `hx-swap-oob="true"`) ||
		!strings.Contains(p.body, "Sending to Person undo-q1") || !strings.Contains(p.body, `<span class="undo-left">in 60 s</span>`) || !strings.Contains(p.body, entry) {
		t.Fatalf("approve answer: %d, want the next card with the undo stack: %.1500s", p.code, p.body)
	}
	if !strings.Contains(p.body, `data-draft="`+second.ID+`"`) {
		t.Errorf("approve answer does not bring the next draft %s in: %.600s", second.ID, p.body)
	}
	if strings.Contains(p.body, "undo-q1@example.com") {
		t.Errorf("the stack names the number, not the customer: %.1500s", p.body)
	}

	// j (the next draft's page), a reload, another page and the poll all
	// show the entry, its seconds counted by the server's clock.
	clock.Set(clock.Now().Add(20 * time.Second))
	for _, path := range []string{"/drafts?id=" + second.ID, "/drafts", "/handoffs", "/"} {
		if got := b.getOK(path); !strings.Contains(got.body, entry) || !strings.Contains(got.body, "in 40 s") || !strings.Contains(got.body, `hx-trigger="every 1s"`) {
			t.Errorf("GET %s does not offer the undo with 40 s left: %.2500s", path, got.body)
		}
	}
	if got := b.getOK("/undo?queue=1"); !strings.Contains(got.body, entry) || !strings.Contains(got.body, `hx-target="#card"`) {
		t.Errorf("the stack's poll on the queue: %.800s", got.body)
	}
	if got := b.getOK("/undo"); !strings.Contains(got.body, entry) || !strings.Contains(got.body, `hx-target="#undo-stack"`) {
		t.Errorf("the stack's poll elsewhere: %.800s", got.body)
	}
	// Another person's stack does not hold dana's approval.
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	if got := ann.getOK("/drafts"); strings.Contains(got.body, entry) {
		t.Errorf("ann's page offers dana's undo: %.800s", got.body)
	}

	clock.Set(clock.Now().Add(10 * time.Second))
	u := b.hx("/drafts/"+first.ID+"/undo", url.Values{"from": {"queue"}})
	if u.code != http.StatusOK || !strings.Contains(u.body, `data-draft="`+first.ID+`"`) || !strings.Contains(u.body, "Undone: the reply to Person undo-q1 was not sent") {
		t.Fatalf("undo answer: %d, want the undone draft's card: %.1500s", u.code, u.body)
	}
	if strings.Contains(u.body, entry) {
		t.Errorf("the undo's answer still offers the undo: %.1500s", u.body)
	}
	if d, err := e.st.Draft(first.ID); err != nil || d.Status != store.DraftPending {
		t.Errorf("draft after the dashboard's undo = %s, %v; want pending", d.Status, err)
	}
	if csrf := b.do(http.MethodPost, "/drafts/"+first.ID+"/undo", nil, http.Header{"Hx-Request": {"true"}}); csrf.code != http.StatusForbidden {
		t.Errorf("undo without the CSRF token: %d, want 403", csrf.code)
	}

	// Approved again, and the window passes before Undo is pressed.
	if p := b.hx("/drafts/"+first.ID+"/approve", nil); p.code != http.StatusOK || !strings.Contains(p.body, entry) {
		t.Fatalf("approve again: %d %.600s", p.code, p.body)
	}
	clock.Set(clock.Now().Add(time.Minute))
	if got := b.getOK("/undo"); strings.Contains(got.body, entry) || strings.Contains(got.body, "hx-trigger") {
		t.Errorf("the stack after the window still offers the undo, or still polls: %.800s", got.body)
	}
	late := b.hx("/drafts/"+first.ID+"/undo", url.Values{"from": {"queue"}})
	if late.code != http.StatusConflict || late.header.Get("HX-Retarget") != "#undo-stack" ||
		!strings.Contains(late.body, "the undo window ended at") || strings.Contains(late.body, `id="card"`) {
		t.Errorf("late undo: %d retarget %q, want 409 replacing only the stack with the sentence: %.800s", late.code, late.header.Get("HX-Retarget"), late.body)
	}
	if d, err := e.st.Draft(first.ID); err != nil || d.Status != store.DraftApproved {
		t.Errorf("draft after the refused undo = %s, %v; want approved", d.Status, err)
	}
	// The next approval has a window of its own.
	if p := b.hx("/drafts/"+second.ID+"/approve", nil); p.code != http.StatusOK || !strings.Contains(p.body, `hx-post="/drafts/`+second.ID+`/undo"`) {
		t.Errorf("approving the second draft: %d, want its entry: %.400s", p.code, p.body)
	}
}
