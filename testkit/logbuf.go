package testkit

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Log is a log destination that a server's goroutines write while the
// test reads it: give it to slog.NewJSONHandler (Lines decodes that) or
// slog.NewTextHandler (then read String).
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Lines are the entries logged so far whose msg is msg, decoded from a JSON
// handler's lines; a line that is not JSON fails the test.
func (l *Log) Lines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if entry["msg"] == msg {
			out = append(out, entry)
		}
	}
	return out
}
