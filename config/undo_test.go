package config

import (
	"strings"
	"testing"
	"time"
)

// TestUndoWindow: undo_window defaults to 10s, 0 turns undo off, and a
// negative, unparsable or overlong value is refused in one sentence that
// names the key.
func TestUndoWindow(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       time.Duration
		err        string
	}{
		{"default", "workers: 3\n", 10 * time.Second, ""},
		{"empty file", "", 10 * time.Second, ""},
		{"set", "undo_window: 3s\n", 3 * time.Second, ""},
		{"off", "undo_window: 0s\n", 0, ""},
		{"negative", "undo_window: -1s\n", 0, "undo_window: -1s is negative; use 0 or more"},
		{"unparsable", "undo_window: soon\n", 0, `undo_window: "soon" is not a duration`},
		{"too long", "undo_window: 2h\n", 0, "undo_window: 2h is longer than 10m"},
		{"not a scalar", "undo_window: [1s]\n", 0, "undo_window: must be a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), func(string) string { return "" })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
				}
				if n := strings.Count(err.Error(), "\n"); n > 0 {
					t.Errorf("the refusal is %d lines, want one sentence: %q", n+1, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c.UndoWindow != tt.want {
				t.Errorf("UndoWindow = %s, want %s", c.UndoWindow, tt.want)
			}
		})
	}
}
