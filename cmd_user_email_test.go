package main

import (
	"strings"
	"testing"
)

// TestUserEmail: --email on user add and user change sets the address the
// approval surfaces know a person by, refuses one that is not a bare
// address or is another person's (in any case) in a sentence, and "" removes it.
func TestUserEmail(t *testing.T) {
	dir := t.TempDir()
	runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "dana", "--email", "dana@acme.test").wantOK(t)
	if u, err := userOf(t, dir, "dana"); err != nil || u.Email != "dana@acme.test" {
		t.Fatalf("dana's email: %q %v", u.Email, err)
	}
	runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "bea").wantOK(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"user", "change", "--data", dir, "bea", "--email", "Bea <bea@beta.test>"}, `--email "Bea <bea@beta.test>" is not a bare email address`},
		{[]string{"user", "change", "--data", dir, "bea", "--email", "DANA@acme.test"}, "the email DANA@acme.test is dana's already; each person needs an address of their own"},
		{[]string{"user", "change", "--data", dir, "bea"}, "user change needs --email ADDRESS"},
		{[]string{"user", "change", "--data", dir, "nobody", "--email", "x@y.test"}, `there is no user named "nobody"`},
		{[]string{"user", "add", "--data", dir, "cy", "--email", "not-an-address"}, `--email "not-an-address" is not a bare email address`},
	} {
		r := runCLI(t, "correct horse battery\n", nil, c.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, r.err, c.want)
		}
	}
	runCLI(t, "", nil, "user", "change", "--data", dir, "bea", "--email", "bea@beta.test").wantOK(t)
	runCLI(t, "", nil, "user", "change", "--data", dir, "dana", "--email", "").wantOK(t)
	if u, _ := userOf(t, dir, "bea"); u.Email != "bea@beta.test" {
		t.Errorf("bea's email = %q", u.Email)
	}
	if u, _ := userOf(t, dir, "dana"); u.Email != "" {
		t.Errorf("dana's email after --email \"\" = %q", u.Email)
	}
}
