package leads

import (
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// StuckAfter is how long a lead may stay in each status before it is
// stuck: the one reading of the stuck thresholds, for the cron job
// (workers.Maintenance.FlagStuck), the dashboard and the metrics.
func StuckAfter(cfg *config.Config) map[store.HandoffStatus]time.Duration {
	return map[store.HandoffStatus]time.Duration{
		Received: cfg.Stuck.Received,
		Matched:  cfg.Stuck.Matched,
		Owned:    cfg.Stuck.Owned,
	}
}
