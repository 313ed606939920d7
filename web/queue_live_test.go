package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
)

// TestQueueLive polls GET /drafts/live as an open queue does: the answer
// refreshes the list and the count out of band, brings the first draft
// onto an empty card, warns when the card's draft was decided elsewhere,
// and an unchanged queue answers 304 to its own ETag.
func TestQueueLive(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	hx := http.Header{"Hx-Request": {"true"}}

	p := b.do(http.MethodGet, "/drafts/live?empty=1", nil, hx)
	if p.code != http.StatusOK || !strings.Contains(p.body, `id="queue-list" class="queue-list" hx-swap-oob="true"`) || strings.Contains(p.body, `id="card"`) {
		t.Fatalf("poll of an empty queue: %d %.400s; want 200 with the list out of band and no card", p.code, p.body)
	}
	etag := p.header.Get("ETag")
	if etag == "" || p.header.Get("Cache-Control") != "private, no-cache" {
		t.Fatalf("poll: ETag %q, Cache-Control %q; want a tag and private, no-cache", etag, p.header.Get("Cache-Control"))
	}
	if again := b.do(http.MethodGet, "/drafts/live?empty=1", nil, http.Header{"If-None-Match": {etag}}); again.code != http.StatusNotModified || again.body != "" {
		t.Fatalf("the same poll with If-None-Match %s: %d %q; want 304 with no body", etag, again.code, again.body)
	}

	d1 := pending(t, e, "demo", "l1", "first message")
	p = b.do(http.MethodGet, "/drafts/live?empty=1", nil, http.Header{"If-None-Match": {etag}})
	if p.code != http.StatusOK || !strings.Contains(p.body, `data-draft="`+d1.ID+`" hx-swap-oob="true"`) {
		t.Fatalf("after a draft arrived, the empty card's poll: %d %.600s; want the card of %s out of band", p.code, p.body, d1.ID)
	}
	t.Logf("poll answer with one draft and its card: %d bytes (uncompressed)", len(p.body))
	if p.header.Get("ETag") == etag {
		t.Errorf("the ETag stayed %s after a draft arrived", etag)
	}
	if !strings.Contains(p.body, `id="nav-drafts-count" hx-swap-oob="true" class="count">1<`) {
		t.Errorf("the poll does not count 1 waiting draft: %.600s", p.body)
	}

	// The card shows d1; another person rejects it meanwhile.
	other := loggedIn(t, e, "bob", store.RoleApprover, "")
	if r := other.hx("/drafts/"+d1.ID+"/reject", url.Values{"reason": {"spam"}}); r.code != http.StatusOK {
		t.Fatalf("bob rejects: %d %.300s", r.code, r.body)
	}
	p = b.do(http.MethodGet, "/drafts/live?current="+d1.ID, nil, hx)
	if p.code != http.StatusOK || !strings.Contains(p.body, `id="card-live" hx-swap-oob="true"`) || !strings.Contains(p.body, "Already rejected by bob") {
		t.Fatalf("poll of a card decided elsewhere: %d %.600s; want a warning that bob rejected it", p.code, p.body)
	}
}
