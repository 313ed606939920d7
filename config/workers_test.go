package config

import (
	"strings"
	"testing"
)

// TestDraftWorkers: draft_workers sets the draft pool; unset, the template
// drafter gets 128 and a model server workers; out of range is one sentence.
func TestDraftWorkers(t *testing.T) {
	const openai = "drafter: {kind: openai, base_url: \"http://127.0.0.1:11434/v1\", model: m}\n"
	tests := []struct {
		name, yaml string
		want       int
		err        string
	}{
		{"template default", "workers: 3\n", 128, ""},
		{"model server default", "workers: 3\n" + openai, 3, ""},
		{"set, template", "draft_workers: 16\n", 16, ""},
		{"set, model server", "draft_workers: 2\n" + openai, 2, ""},
		{"zero", "draft_workers: 0\n", 0, "config: draft_workers: must be between 1 and 256, not 0"},
		{"too many", "draft_workers: 300\n", 0, "draft_workers: must be between 1 and 256, not 300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), func(string) string { return "" })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.DraftConcurrency(); got != tt.want {
				t.Errorf("DraftConcurrency = %d, want %d", got, tt.want)
			}
		})
	}
}
