package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/handoff/handoff/config"
)

// TestRequestIDEchoedOrMinted: a caller's X-Request-Id comes back as sent,
// so a proxy's log line and ours name the same request; a missing one, or
// one that could forge a log field (too long, not visible ASCII), is
// replaced by a fresh id.
func TestRequestIDEchoedOrMinted(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, config.Default())
	tests := []struct {
		name, sent string
		echoed     bool
	}{
		{"a proxy's id", "req-7f3a9c1e-2b4d", true},
		{"none", "", false},
		{"too long", strings.Repeat("a", 129), false},
		{"a space in it", "id with spaces", false},
		{"not ASCII", "id-\u00e9", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/healthz", "/api/v1/nope"} {
				req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
				if tt.sent != "" {
					req.Header.Set("X-Request-Id", tt.sent)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				got := resp.Header.Get("X-Request-Id")
				switch {
				case tt.echoed && got != tt.sent:
					t.Errorf("GET %s with X-Request-Id %q answered %q, want it echoed", path, tt.sent, got)
				case !tt.echoed && (got == "" || got == tt.sent || len(got) != 26):
					t.Errorf("GET %s with X-Request-Id %q answered %q, want a fresh 26-character id", path, tt.sent, got)
				}
			}
		})
	}
}
