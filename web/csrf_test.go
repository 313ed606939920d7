package web

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// TestCSRFMaskedPerResponse: gzipped pages that reflect the request (the
// search box holds the query) must not carry the session's CSRF token
// byte for byte (BREACH). The tokens a page renders are masked afresh for
// each response, so two answers to the same request share none; the session's token itself
// appears in neither; each masked token is accepted, a tampered one is not.
func TestCSRFMaskedPerResponse(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	d1 := pending(t, e, "demo", "m1", "first")
	d2 := pending(t, e, "demo", "m2", "second")
	b := loggedIn(t, e, "ann", store.RoleApprover, "")

	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	var cookie string
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == sessionCookie {
			cookie = c.Value
		}
	}
	sess, err := e.st.Session(users.HashSecret(cookie))
	if err != nil || sess.CSRF == "" {
		t.Fatalf("the session of ann's cookie: %+v %v", sess, err)
	}

	// Every place a page puts a token: the meta, hx-headers, form fields.
	tokens := regexp.MustCompile(`content="([A-Za-z0-9_-]{40,})"|X-CSRF-Token&#34;:&#34;([A-Za-z0-9_-]+)&#34;|name="csrf" value="([A-Za-z0-9_-]+)"`)
	rendered := func(path string) []string {
		t.Helper()
		p := b.get(path)
		if !strings.Contains(p.body, "nothing-like-this") {
			t.Fatalf("GET %s: %d, the page does not show the query: %.300s", path, p.code, p.body)
		}
		if strings.Contains(p.body, sess.CSRF) {
			t.Fatalf("GET %s shows the session's CSRF token unmasked", path)
		}
		var out []string
		for _, m := range tokens.FindAllStringSubmatch(p.body, -1) {
			out = append(out, m[1]+m[2]+m[3])
		}
		if len(out) < 3 {
			t.Fatalf("GET %s renders %d CSRF tokens (%v); want the meta, hx-headers and the logout form's at least", path, len(out), out)
		}
		return out
	}
	const q = "/search?q=nothing-like-this" // "nothing found", the query in the box
	first, second := rendered(q), rendered(q)
	inFirst := map[string]bool{}
	for _, tok := range first {
		inFirst[tok] = true
	}
	for _, tok := range second {
		if inFirst[tok] {
			t.Errorf("the token %s is in both answers; want a fresh mask for each response", tok)
		}
	}
	for _, tok := range append(first, second...) {
		if !csrfMatches(tok, sess.CSRF) {
			t.Errorf("rendered token %s does not unmask to the session's", tok)
		}
	}

	raw, err := base64.RawURLEncoding.DecodeString(first[0])
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	tampered := base64.RawURLEncoding.EncodeToString(raw)
	approve := func(id, tok string) int {
		t.Helper()
		return b.do(http.MethodPost, "/drafts/"+id+"/approve", url.Values{"action": {"approve"}},
			http.Header{"Hx-Request": {"true"}, "X-Csrf-Token": {tok}}).code
	}
	if code := approve(d1.ID, tampered); code != http.StatusForbidden {
		t.Errorf("approval with a tampered masked token: %d; want 403", code)
	}
	if got, err := e.st.Draft(d1.ID); err != nil || got.Status != store.DraftPending {
		t.Fatalf("draft %s after the tampered token: %+v %v; want still pending", d1.ID, got.Status, err)
	}
	if code := approve(d1.ID, first[0]); code != http.StatusOK {
		t.Errorf("approval with the first page's token: %d; want 200", code)
	}
	if code := approve(d2.ID, second[len(second)-1]); code != http.StatusOK {
		t.Errorf("approval with the second page's token: %d; want 200", code)
	}
}

func TestCSRFMatches(t *testing.T) {
	const token = "k3D9x-Qz0_vT8mN1pLr6sWb2yHc4jFa7eGu5iOo9KdE"
	masked := maskCSRF(token)
	flip := func(s string, at int) string {
		raw, _ := base64.RawURLEncoding.DecodeString(s)
		raw[at] ^= 0x20
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	tests := []struct {
		name, got, token string
		want             bool
	}{
		{"masked", masked, token, true},
		{"masked again", maskCSRF(token), token, true},
		{"bare, from a page rendered before masking", token, token, true},
		{"pad changed", flip(masked, 0), token, false},
		{"masked half changed", flip(masked, len(token)), token, false},
		{"another session's", maskCSRF(strings.ToUpper(token)), token, false},
		{"cut short", masked[:len(masked)-4], token, false},
		{"empty", "", token, false},
		{"a session without a token", maskCSRF(""), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := csrfMatches(tt.got, tt.token); got != tt.want {
				t.Errorf("csrfMatches(%q, %q) = %v; want %v", tt.got, tt.token, got, tt.want)
			}
		})
	}
}

// TestCSRFWhereItComesFrom: the token is taken from the X-CSRF-Token header
// or the form body, never from the query string (a URL is logged, kept in
// the history and sent on as a Referer).
func TestCSRFWhereItComesFrom(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	b := loggedIn(t, e, "ann", store.RoleApprover, "")
	b.getOK("/drafts")
	tok := b.csrf
	cases := []struct {
		name   string
		query  string
		form   url.Values
		header http.Header
		want   int
	}{
		{"in the query string", "?csrf=" + url.QueryEscape(tok), url.Values{"action": {"reject"}}, nil, http.StatusForbidden},
		{"in the query string, the body's empty", "?csrf=" + url.QueryEscape(tok), url.Values{"action": {"reject"}, "csrf": {""}}, nil, http.StatusForbidden},
		{"in the form body", "", url.Values{"action": {"reject"}, "csrf": {tok}}, nil, http.StatusOK},
		{"in the header", "", url.Values{"action": {"reject"}}, http.Header{"X-Csrf-Token": {tok}}, http.StatusOK},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := pending(t, e, "demo", fmt.Sprintf("csrf-%d", i), "where the token comes from")
			h := http.Header{"Hx-Request": {"true"}}
			for k, v := range tc.header {
				h[k] = v
			}
			if p := b.do(http.MethodPost, "/drafts/"+d.ID+"/reject"+tc.query, tc.form, h); p.code != tc.want {
				t.Fatalf("reject with the token %s: %d %.200s, want %d", tc.name, p.code, p.body, tc.want)
			}
			got, err := e.st.Draft(d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if refused := tc.want == http.StatusForbidden; refused != (got.Status == store.DraftPending) {
				t.Errorf("after %s: draft %s", tc.name, got.Status)
			}
		})
	}
}
