package main

import (
	"slices"
	"strings"
	"testing"
)

// TestUserAddClients: --clients stores the person's clients; an id that
// cannot be a client id is refused in a sentence.
func TestUserAddClients(t *testing.T) {
	dir := t.TempDir()
	runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "ann", "--clients", "acme,bolt").wantOK(t)
	u, err := userOf(t, dir, "ann")
	if err != nil || !slices.Equal(u.Clients, []string{"acme", "bolt"}) {
		t.Errorf("ann's clients: %v %v, want acme, bolt", u.Clients, err)
	}
	c := runCLI(t, "correct horse battery\n", nil, "user", "add", "--data", dir, "bob", "--clients", "Acme")
	if c.err == nil || !strings.Contains(c.err.Error(), `--clients: "Acme" is not a client id`) {
		t.Errorf("--clients Acme: %v, want a refusal", c.err)
	}
}
