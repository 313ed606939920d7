package web

import (
	"fmt"
	"sort"
	"time"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// statsDays and statsScan bound the overview's drafting figures: a week of
// drafts, at most this many read.
const (
	statsDays = 7
	statsScan = 20000
)

// draftStats sums the drafts the person may see of the last statsDays
// days (UTC): cost by day, client, channel and prompt version, decisions
// by prompt version, and the clients whose budget for today is spent.
func (s *Server) draftStats(v store.Visible, now time.Time) (views.DraftStats, error) {
	today := now.UTC().Truncate(24 * time.Hour)
	costs, more, err := s.st.DraftCosts(today.AddDate(0, 0, -(statsDays-1)), statsScan)
	if err != nil {
		return views.DraftStats{}, err
	}
	out := views.DraftStats{Days: statsDays, Partial: more}
	type costKey struct{ day, channel, version, currency string }
	byCost := map[costKey]*views.CostRow{}
	byPrompt := map[string]*views.PromptRow{}
	for _, d := range costs {
		if !v.Channel(d.Channel) || d.Drafter == "person" {
			continue
		}
		k := costKey{d.CreatedAt.UTC().Format(time.DateOnly), d.Channel, d.PromptVersion, d.Currency}
		r := byCost[k]
		if r == nil {
			r = &views.CostRow{Day: k.day, Client: s.cfg.ClientOf(d.Channel), Channel: d.Channel, PromptVersion: d.PromptVersion, Currency: d.Currency}
			byCost[k] = r
		}
		r.Drafts++
		r.Cost += d.Cost
		p := byPrompt[d.PromptVersion]
		if p == nil {
			p = &views.PromptRow{PromptVersion: d.PromptVersion}
			byPrompt[d.PromptVersion] = p
		}
		p.Drafts++
		switch {
		case d.Status == store.DraftApproved && d.Edited:
			p.Edited++
		case d.Status == store.DraftApproved:
			p.Unchanged++
		case d.Status == store.DraftRejected:
			p.Rejected++
		case d.Status == store.DraftPending:
			p.Waiting++
		}
	}
	for _, r := range byCost {
		out.Costs = append(out.Costs, *r)
	}
	sort.Slice(out.Costs, func(i, j int) bool {
		a, b := out.Costs[i], out.Costs[j]
		if a.Day != b.Day {
			return a.Day > b.Day
		}
		if a.Channel != b.Channel {
			return a.Channel < b.Channel
		}
		return a.PromptVersion < b.PromptVersion
	})
	for _, p := range byPrompt {
		out.Prompts = append(out.Prompts, *p)
	}
	sort.Slice(out.Prompts, func(i, j int) bool { return out.Prompts[i].PromptVersion < out.Prompts[j].PromptVersion })
	for _, cl := range s.cfg.ClientList() {
		limit := s.cfg.BudgetOf(cl.ID)
		chans := s.cfg.ClientChannels(cl.ID)
		if limit <= 0 || len(chans) == 0 || !v.Channel(chans[0]) {
			continue
		}
		spent, err := jobs.SpentSince(s.st, today, chans)
		if err != nil {
			return views.DraftStats{}, err
		}
		if spent >= limit {
			out.Paused = append(out.Paused, views.Notice{Tone: "error", Text: fmt.Sprintf(
				"Drafting for %s is paused: %.4f %s of its daily budget of %.4f is spent. Its messages wait and are drafted from 00:00 UTC, or as soon as the budget is raised.",
				cl.Name, spent, s.cfg.Drafter.Price.Currency, limit)})
		}
	}
	return out, nil
}
