package leads

import (
	"time"

	"github.com/handoff/handoff/store"
)

// IsStuck reports whether lead h is stuck at now: in a status a lead can be
// stuck in for longer than its threshold in after, whether the sweep has
// flagged it yet or not (the rule of Stuck and FlagStuck, for one lead).
func IsStuck(h store.Handoff, now time.Time, after map[store.HandoffStatus]time.Duration) bool {
	d, ok := after[h.Status]
	return ok && d > 0 && Open(h.Status) && h.Since.Before(now.Add(-d))
}
