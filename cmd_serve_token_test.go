package main

import (
	"strings"
	"testing"
)

// TestServeRefusesShortAPIToken: serve will not start with a short
// HANDOFF_API_TOKEN, and says so without repeating it.
func TestServeRefusesShortAPIToken(t *testing.T) {
	const short = "abc-short-token"
	c := runCLI(t, "", map[string]string{"HANDOFF_API_TOKEN": short}, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0")
	c.wantErr(t, "HANDOFF_API_TOKEN is 15 characters long and must be at least 32")
	for _, out := range []string{c.err.Error(), c.stdout.String(), c.stderr.String()} {
		if strings.Contains(out, short) {
			t.Errorf("the refusal repeats the token: %q", out)
		}
	}
}
