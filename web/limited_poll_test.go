package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
)

// TestLimitedPollsAnswer: every poll an approver limited to one client's
// channels makes — the live queue with each of its parameters, the undo
// stack on the queue and elsewhere — answers 200 (never 404), brings
// their own draft, and says nothing of the other client's: a current= of
// the other client's draft gets no stale warning about it.
func TestLimitedPollsAnswer(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, twoClients())
	acme := seedClient(t, e, "acme", "web-a", "a")
	bolt := seedClient(t, e, "bolt", "web-b", "b")
	lee := limitedUser(t, e, "lee", store.RoleApprover, "acme")
	hx := http.Header{"Hx-Request": {"true"}}

	for _, path := range []string{
		"/drafts/live",
		"/drafts/live?current=" + acme.pendingDraft,
		"/drafts/live?empty=1",
		"/drafts/live?channel=web-a&owner=mine",
		"/drafts/live?channel=web-b", // another client's channel: an empty list, not a 404
		"/undo", "/undo?queue=1", "/undo?queue=1&channel=web-a",
	} {
		p := lee.do(http.MethodGet, path, nil, hx)
		if p.code != http.StatusOK {
			t.Errorf("GET %s = %d %.300s; want 200", path, p.code, p.body)
		}
		if strings.Contains(p.body, bolt.marker) || strings.Contains(p.body, bolt.pendingDraft) {
			t.Errorf("GET %s shows the other client's draft: %.600s", path, p.body)
		}
	}
	if p := lee.do(http.MethodGet, "/drafts/live?empty=1", nil, hx); !strings.Contains(p.body, `data-draft="`+acme.pendingDraft+`"`) {
		t.Errorf("the empty queue's poll does not bring lee's own draft: %.600s", p.body)
	}

	// bolt's draft decided elsewhere: lee's poll naming it says nothing of it.
	if code, ans := e.do(t, http.MethodPost, "/api/v1/drafts/"+bolt.pendingDraft+"/approve", "", nil, tokenHeader()); code != http.StatusOK {
		t.Fatalf("approve bolt's draft: %d %v", code, ans)
	}
	if p := lee.do(http.MethodGet, "/drafts/live?current="+url.QueryEscape(bolt.pendingDraft), nil, hx); p.code != http.StatusOK || strings.Contains(p.body, "Already approved") {
		t.Errorf("a poll naming bolt's decided draft = %d %.600s; want 200 and no word of it", p.code, p.body)
	}

}
