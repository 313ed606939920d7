package web

import (
	"fmt"
	"sort"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// statsDays is how many days (UTC) the overview's drafting figures cover.
const statsDays = 7

// draftStats sums the drafts the person may see of the last statsDays
// days (UTC): cost by day, client, channel and prompt version, decisions
// by prompt version, and the clients whose budget for today is spent. It
// reads the figures the draft writes keep (store.DraftFigures: a few keys
// a day), never the drafts.
func (s *Server) draftStats(v store.Visible, now time.Time) (views.DraftStats, error) {
	today := now.UTC().Truncate(24 * time.Hour)
	figures, err := s.st.DraftFigures(store.Everything(), today.AddDate(0, 0, -(statsDays-1)))
	if err != nil {
		return views.DraftStats{}, err
	}
	out := views.DraftStats{Days: statsDays}
	byPrompt := map[string]*views.PromptRow{}
	spentToday := map[string]float64{} // by channel
	for _, f := range figures {
		if f.Day == today.Format(time.DateOnly) {
			spentToday[f.Channel] += f.Cost
		}
		if !v.Channel(f.Channel) {
			continue
		}
		out.Costs = append(out.Costs, views.CostRow{
			Day: f.Day, Client: s.cfg.ClientOf(f.Channel), Channel: f.Channel, PromptVersion: f.PromptVersion,
			Currency: f.Currency, Drafts: f.Drafts, Cost: f.Cost,
		})
		p := byPrompt[f.PromptVersion]
		if p == nil {
			p = &views.PromptRow{PromptVersion: f.PromptVersion}
			byPrompt[f.PromptVersion] = p
		}
		p.Add(f)
	}
	// One row per day, channel and prompt version: the currencies of a
	// day's drafts stay apart, as the store keeps them.
	sort.SliceStable(out.Costs, func(i, j int) bool {
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
		spent := 0.0
		for _, ch := range chans {
			spent += spentToday[ch]
		}
		if spent >= limit {
			out.Paused = append(out.Paused, views.Notice{Tone: "error", Text: fmt.Sprintf(
				"Drafting for %s is paused: %.4f %s of its daily budget of %.4f is spent. Its messages wait and are drafted from 00:00 UTC, or as soon as the budget is raised.",
				cl.Name, spent, s.cfg.Drafter.Price.Currency, limit)})
		}
	}
	return out, nil
}
