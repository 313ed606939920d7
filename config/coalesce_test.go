package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
)

// TestCoalesce: a channel's quiet period defaults to 10s, the demo's too;
// 0s drafts at once; negative and over an hour are refused with the key.
func TestCoalesce(t *testing.T) {
	if got := config.Default().Channels[0].Coalesce; got != 10*time.Second {
		t.Errorf("the demo channel's coalesce = %v; want 10s", got)
	}
	const head = "channels:\n  - name: web\n    fields: {message_id: /id}\n"
	tests := []struct {
		yaml    string
		want    time.Duration
		wantErr string
	}{
		{yaml: head, want: 10 * time.Second},
		{yaml: head + "    coalesce: 0s\n", want: 0},
		{yaml: head + "    coalesce: 2s\n", want: 2 * time.Second},
		{yaml: head + "    coalesce: -1s\n", wantErr: "channels[0].coalesce"},
		{yaml: head + "    coalesce: 90m\n", wantErr: "longer than the 1h"},
		{yaml: head + "    coalesce: soon\n", wantErr: "is not a duration"},
	}
	for _, tt := range tests {
		cfg, err := config.Parse([]byte(tt.yaml), func(string) string { return "" })
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q) = %v; want an error with %q", tt.yaml, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("Parse(%q): %v", tt.yaml, err)
		case cfg.Channels[0].Coalesce != tt.want:
			t.Errorf("Parse(%q): coalesce %v; want %v", tt.yaml, cfg.Channels[0].Coalesce, tt.want)
		}
	}
}
