package leads

import (
	"testing"
	"time"

	"github.com/handoff/handoff/store"
)

// TestIsStuck holds one lead to the thresholds of Stuck and FlagStuck.
func TestIsStuck(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	after := map[store.HandoffStatus]time.Duration{Received: 10 * time.Minute, Matched: 0}
	tests := []struct {
		name   string
		status store.HandoffStatus
		since  time.Duration // before now
		want   bool
	}{
		{"received past its threshold", Received, 11 * time.Minute, true},
		{"received inside it", Received, 9 * time.Minute, false},
		{"a threshold of 0 is off", Matched, 48 * time.Hour, false},
		{"no threshold", Owned, 48 * time.Hour, false},
		{"replied is never stuck", Replied, 48 * time.Hour, false},
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
