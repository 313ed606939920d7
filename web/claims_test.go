package web

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

// TestTwoApproversSteered opens the queue as two people: each is shown a
// different draft, and the one who opens the other's draft is told who
// is looking at it.
func TestTwoApproversSteered(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	d1 := pending(t, e, "demo", "c1", "first message")
	d2 := pending(t, e, "demo", "c2", "second message")
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	bob := loggedIn(t, e, "bob", store.RoleApprover, "")

	card := func(b *browser, path string) (string, string) {
		t.Helper()
		p := b.getOK(path)
		m := cardDraft.FindStringSubmatch(p.body)
		if m == nil {
			t.Fatalf("GET %s shows no draft card", path)
		}
		return m[1], p.body
	}
	// login opened /drafts once for each (ann first): ann holds d1, bob d2.
	a, _ := card(ann, "/drafts")
	b, body := card(bob, "/drafts")
	if a != d1.ID || b != d2.ID {
		t.Fatalf("ann is shown %s and bob %s; want ann the oldest %s and bob the next %s", a, b, d1.ID, d2.ID)
	}
	if strings.Contains(body, `id="looked-by"`) {
		t.Error("bob's own card says someone else is looking at it")
	}
	_, body = card(bob, "/drafts?id="+d1.ID)
	if !strings.Contains(body, html.EscapeString("ann is looking at this draft too")) {
		t.Errorf("bob opening ann's draft is not told that ann is looking at it")
	}
}

// TestClaimsPick races many people opening the queue at once: each gets a
// different draft while there are drafts enough, and a claim lapses.
func TestClaimsPick(t *testing.T) {
	cs := newClaims()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ids := []string{"d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"}
	got := make([]int, len(ids))
	var wg sync.WaitGroup
	for k := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[k] = cs.pick(ids, fmt.Sprintf("person-%d", k), now)
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for k, i := range got {
		if i < 0 || seen[i] {
			t.Fatalf("person-%d was given index %d (all: %v); want a different draft for each", k, i, got)
		}
		seen[i] = true
	}
	if i := cs.pick(ids, "late", now); i != -1 {
		t.Errorf("a ninth person was given %d while all eight drafts are open; want -1", i)
	}
	if i := cs.pick(ids, "late", now.Add(claimFor)); i != 0 {
		t.Errorf("after the claims lapsed, pick = %d; want 0", i)
	}
	if other := cs.look("d1", "someone", now.Add(claimFor)); other != "late" {
		t.Errorf("look at d1 just claimed by late = %q; want late", other)
	}
}

// TestEmptyQueuesFillSteered has two people wait on the empty queue; two
// drafts arrive, and each one's next poll brings a different draft onto
// their card.
func TestEmptyQueuesFillSteered(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	ann := loggedIn(t, e, "ann", store.RoleApprover, "")
	bob := loggedIn(t, e, "bob", store.RoleApprover, "")
	d1 := pending(t, e, "demo", "c1", "first message")
	d2 := pending(t, e, "demo", "c2", "second message")

	liveCard := regexp.MustCompile(`data-draft="([^"]+)" hx-swap-oob="true"`)
	poll := func(b *browser, who string) string {
		t.Helper()
		p := b.do(http.MethodGet, "/drafts/live?empty=1", nil, http.Header{"Hx-Request": {"true"}})
		m := liveCard.FindStringSubmatch(p.body)
		if p.code != http.StatusOK || m == nil {
			t.Fatalf("%s's poll of the empty queue: %d %.400s; want a card out of band", who, p.code, p.body)
		}
		return m[1]
	}
	a, b := poll(ann, "ann"), poll(bob, "bob")
	if a != d1.ID || b != d2.ID {
		t.Fatalf("ann's empty card filled with %s and bob's with %s; want ann the oldest %s and bob the next %s", a, b, d1.ID, d2.ID)
	}
}
