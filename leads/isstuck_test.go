package leads

import (
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

// TestIsStuck holds one lead to the thresholds of Stuck and FlagStuck.
func TestIsStuck(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	after := map[store.HandoffStatus]time.Duration{store.HandoffReceived: 10 * time.Minute, store.HandoffMatched: 0}
	tests := []struct {
		name   string
		status store.HandoffStatus
		since  time.Duration // before now
		want   bool
	}{
		{"received past its threshold", store.HandoffReceived, 11 * time.Minute, true},
		{"received inside it", store.HandoffReceived, 9 * time.Minute, false},
		{"a threshold of 0 is off", store.HandoffMatched, 48 * time.Hour, false},
		{"no threshold", store.HandoffOwned, 48 * time.Hour, false},
		{"replied is never stuck", store.HandoffReplied, 48 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := store.Handoff{Status: tt.status, Since: now.Add(-tt.since)}
			if got := IsStuck(h, now, after); got != tt.want {
				t.Errorf("IsStuck = %v, want %v", got, tt.want)
			}
		})
	}
}
