// Package workers holds handoff's job kinds, the code the queue runs: the
// draft job (the drafter, routing, the context and budget bounds, then
// review's Record), the digest job, the bulk replay and the cron tasks
// (Maintenance). It stands above the concepts it uses (review, delivery,
// leads, the drafter and the providers) and below app, which wires it;
// the queue itself (jobs) and every concept's job args sit below it, so
// no concept imports it. The delivery job is delivery.Job, registered here.
package workers

import (
	"github.com/handoff/handoff/approvals"
	"golang.org/x/sync/semaphore"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
)

// Kinds wires every job kind of handoff from the config, each under the
// kind its arguments name (the args are the concepts': review.DraftArgs,
// delivery.DeliverArgs, delivery.BulkReplayArgs). The delivery job is
// delivery.Job itself: it speaks the queue's errors.
func Kinds(st *store.Store, cfg *config.Config, d Drafter, providers map[string]provider.Provider) (map[string]jobs.Kind, *DraftJob) {
	senders := make(map[string]delivery.Sender, len(providers))
	for name, p := range providers {
		senders[name] = p
	}
	draft := &DraftJob{Store: st, Review: review.New(st, cfg), Drafter: d, Router: NewRouter(cfg.Routing), DrafterName: cfg.Drafter.Kind,
		ContextTokens: cfg.Drafter.ContextTokens, Budget: budgetOf(cfg), BodyWait: cfg.Limits.BodyWait, Client: cfg.ClientOf}
	if n := cfg.Limits.BodiesInFlight; n > 0 {
		draft.Bodies, draft.BodiesSize = semaphore.NewWeighted(n), n
	}
	deliver := &delivery.Job{Store: st, Providers: senders} // app sets its log
	return map[string]jobs.Kind{
		review.DraftArgs{}.Kind():     draft,
		delivery.DeliverArgs{}.Kind(): deliver,
		// The outbound events: the same job in a pool of its own, so a
		// subscriber that hangs never holds a reply's worker.
		delivery.EventArgs{}.Kind(): deliver,
		// app sets its clock, its Wake and its log, and hands its outbox to web.
		delivery.BulkReplayArgs{}.Kind(): &BulkReplayJob{Store: st, Outbox: delivery.New(st, cfg).Judging(DeadKinds())},
	}, draft
}

// DeadKinds are the dead-letter rules of the job kinds declared above
// delivery (delivery.Judging): the draft job's are review's. Delivery has
// its own kinds' rules; a kind without any (the digest) is replayed as it is.
func DeadKinds() delivery.DeadKinds {
	card := approvals.DeadCard{}
	return delivery.DeadKinds{review.KindDraft: review.DeadDraft{},
		approvals.KindAnnounce: card, approvals.KindFollow: card, approvals.KindRemind: card}
}
