package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWaitPageCheck reads the background page check out of a server's
// log: its duration, its damage, or nothing when none was started.
func TestWaitPageCheck(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      pageCheck
	}{
		{"sound", `{"level":"INFO","msg":"listening","addr":"127.0.0.1:1"}
{"level":"INFO","msg":"checking the database's pages in the background"}
{"level":"INFO","msg":"the database's pages are sound","took":4865364154}
`, pageCheck{took: 4865364154 * time.Nanosecond}},
		{"damaged", `{"level":"INFO","msg":"checking the database's pages in the background"}
{"level":"ERROR","msg":"the database is damaged; restore a backup","err":"store: x failed its page check: page 9 is damaged"}
`, pageCheck{problem: "store: x failed its page check: page 9 is damaged"}},
		{"none started", `{"level":"INFO","msg":"listening","addr":"127.0.0.1:1"}
`, pageCheck{}},
		{"started, not finished", `{"level":"INFO","msg":"listening","addr":"127.0.0.1:1"}
{"level":"INFO","msg":"checking the database's pages in the background"}
`, pageCheck{timedOut: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "serve.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			// A short bound: the unfinished check is what times out.
			got, err := waitPageCheck(context.Background(), path, 50*time.Millisecond, false)
			if err != nil || got != tc.want {
				t.Errorf("waitPageCheck = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
