package web

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
)

// TestFavicon: every page's head links the icon by its hashed name; the
// icon is an SVG cached for a year; /favicon.ico, which browsers ask for
// on their own, redirects to it without a session.
func TestFavicon(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	for _, path := range []string{"/", "/drafts", "/handoffs", "/account"} {
		p := b.getOK(path)
		if !strings.Contains(p.body, `<link rel="icon" type="image/svg+xml" href="/static/favicon.`) {
			t.Errorf("%s links no icon", path)
		}
	}
	if p := newBrowser(t, e.url).get("/login"); !strings.Contains(p.body, `rel="icon"`) {
		t.Errorf("the login page links no icon")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(e.url + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(loc, "/static/favicon.") || !strings.HasSuffix(loc, ".svg") {
		t.Fatalf("GET /favicon.ico = %d to %q; want 301 to the hashed icon", resp.StatusCode, loc)
	}
	resp, err = http.Get(e.url + loc)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") || !strings.HasPrefix(string(body), "<svg") {
		t.Errorf("the icon = %d %q %q %.60s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
	}
}
