package workers

import (
	"context"

	"github.com/handoff/handoff/approvals"
	"github.com/handoff/handoff/store"
)

// AnnounceJob runs the approval surfaces' jobs (approvals.KindAnnounce,
// approvals.KindFollow, approvals.KindRemind): post a waiting draft's
// card, bring a posted card up to its draft, post a reminder. The work is
// the surface's (approvals.Approvals.Run); this is where the queue meets
// it.
type AnnounceJob struct {
	Approvals *approvals.Approvals
}

// Run runs one surface job.
func (j *AnnounceJob) Run(ctx context.Context, job store.Job) error {
	return j.Approvals.Run(ctx, job)
}

// SurfaceKinds are the approval surfaces' job kinds, to add to Kinds'
// when any surface is configured.
func SurfaceKinds(a *approvals.Approvals) map[string]*AnnounceJob {
	j := &AnnounceJob{Approvals: a}
	return map[string]*AnnounceJob{approvals.KindAnnounce: j, approvals.KindFollow: j, approvals.KindRemind: j}
}
