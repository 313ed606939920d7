package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// TestSetupChecksTheLinkFirst: a POST to a setup link is judged by the
// link before anything else, so a made-up, expired or used link, and every
// link once a person exists, is a 410 that never reaches the password's
// hashing. The proof is in the order: with a password that would be refused
// (too short, common) the answer is still the link's 410, not the
// password's 400; a live link with that password gets the 400.
func TestSetupChecksTheLinkFirst(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Now()}
	e, _ := newEnv(t, nil, envOptions{now: clk.Now})
	const secret = "setup-secret-for-the-order-0123456789"
	if made, err := e.st.CreateSetupLink(context.Background(), users.HashSecret(secret), clk.Now().Add(time.Hour)); err != nil || !made {
		t.Fatalf("CreateSetupLink: %v %v", made, err)
	}
	b := newBrowser(t, e.url)
	post := func(token, pw string) page {
		return b.do(http.MethodPost, "/setup/"+token, url.Values{"name": {"owner"}, "password": {pw}}, nil)
	}
	gone := func(what string, p page) {
		t.Helper()
		if p.code != http.StatusGone || !strings.Contains(p.body, "already used or has expired") {
			t.Errorf("%s: %d %.200s, want 410 with the link's sentence", what, p.code, p.body)
		}
	}
	for _, pw := range []string{"short", "password1234", "a long setup passphrase"} {
		gone("a made-up link, password "+pw, post("made-up-link", pw))
	}
	if p := post(secret, "password1234"); p.code != http.StatusBadRequest || !strings.Contains(p.body, "common") {
		t.Errorf("the live link with a common password: %d %.200s, want 400", p.code, p.body)
	}
	// The first admin's password follows the admins' rule: not built on
	// the product's or the person's name.
	for _, pw := range []string{"handoff12345", "qwertyuiopas"} {
		if p := post(secret, pw); p.code != http.StatusBadRequest || !strings.Contains(p.body, "easy to guess") {
			t.Errorf("the live link with %q: %d %.200s, want 400 easy to guess", pw, p.code, p.body)
		}
	}
	// A person made another way (handoff user add): every link is dead.
	addUser(t, e.st, "ann", store.RoleAdmin, "", "ann-password-long")
	for _, pw := range []string{"short", "a long setup passphrase"} {
		gone("the live link once a person exists, password "+pw, post(secret, pw))
		gone("a made-up link once a person exists, password "+pw, post("made-up-link", pw))
	}
	if users, _ := e.st.Users(); len(users) != 1 {
		t.Errorf("users %+v, want ann alone", users)
	}
}
