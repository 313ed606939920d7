package jobs

import (
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs/provider"
	"github.com/handoff/handoff/store"
)

// Kinds wires every job kind of handoff from the config.
func Kinds(st *store.Store, cfg *config.Config, d Drafter, providers map[string]provider.Provider) (map[string]Kind, *DraftJob) {
	auto := map[string]string{}
	for _, ch := range cfg.Channels {
		if ch.AutoApprove {
			auto[ch.Name] = ch.Provider
		}
	}
	senders := make(map[string]Sender, len(providers))
	for name, p := range providers {
		senders[name] = p
	}
	draft := &DraftJob{Store: st, Drafter: d, Router: NewRouter(cfg.Routing), AutoApprove: auto, MaxAttempts: cfg.Retry.MaxAttempts, DrafterName: cfg.Drafter.Kind}
	return map[string]Kind{
		KindDraft:   draft,
		KindDeliver: &DeliverJob{Store: st, Providers: senders},
	}, draft
}
