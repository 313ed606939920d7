package config

// defaultTemplateDraftWorkers is how many draft jobs run at once with the
// template drafter when draft_workers is unset. A template draft is a few
// microseconds of drafting around two commit rounds (the claim, the save),
// and the group commit folds concurrent rounds into one, so drafting
// throughput grows with the drafts in flight until the commits are full:
// BenchmarkDraftBacklog (jobs) drains a backlog about twice as fast with
// 128 at once as with 64, and 256 adds little more (README, Performance).
const defaultTemplateDraftWorkers = 128

// DraftConcurrency is how many draft jobs run at once: draft_workers when
// set; otherwise workers for a drafter that calls a model server (the
// calls it is sent at once), and 128 for the template drafter.
func (c *Config) DraftConcurrency() int {
	switch {
	case c.DraftWorkers > 0:
		return c.DraftWorkers
	case c.Drafter.Kind == "template":
		return defaultTemplateDraftWorkers
	default:
		return c.Workers
	}
}
