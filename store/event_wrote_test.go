package store

import (
	"testing"
	"time"
)

// TestEventWrote: the window counts from the provider's time when it is
// earlier than our receipt, and never from a time later than the receipt
// (a provider clock ahead of ours cannot stretch a window).
func TestEventWrote(t *testing.T) {
	recv := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	early, late := recv.Add(-3*time.Minute), recv.Add(time.Hour)
	for _, c := range []struct {
		sent *time.Time
		want time.Time
	}{{nil, recv}, {&early, early}, {&late, recv}, {&recv, recv}} {
		if got := (Event{ReceivedAt: recv, SentAt: c.sent}).Wrote(); !got.Equal(c.want) {
			t.Errorf("Wrote with sent_at %v = %v, want %v", c.sent, got, c.want)
		}
	}
}
