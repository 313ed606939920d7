package views

import (
	"fmt"
	"strconv"

	"github.com/handoff/handoff/store"
)

// DraftStats is the overview's drafting figures: what drafts cost and how
// people decided them, per prompt version, over the last days.
type DraftStats struct {
	Days    int // how many days the figures cover
	Costs   []CostRow
	Prompts []PromptRow
	// Paused are the clients whose daily budget is spent.
	Paused []Notice
}

// CostRow is the drafts of one day, client, channel and prompt version.
type CostRow struct {
	Day, Client, Channel, PromptVersion, Currency string
	Drafts                                        int
	Cost                                          float64
}

// PromptRow is how the drafts of one prompt version were decided. Own
// replies, drafts asked for again and closes are counted as themselves,
// not as rejections.
type PromptRow struct {
	PromptVersion string `json:"prompt_version"`
	Drafts        int    `json:"drafts"`
	Unchanged     int    `json:"approved_unchanged"`
	Edited        int    `json:"edited"`
	Rejected      int    `json:"rejected"`
	Waiting       int    `json:"waiting"`
	OwnReplies    int    `json:"own_replies"`
	DraftedAgain  int    `json:"drafted_again"`
	Closed        int    `json:"closed"`
}

// Add counts figure f's drafts and their outcomes into p.
func (p *PromptRow) Add(f store.DraftFigure) {
	p.Drafts += f.Drafts
	p.Edited += f.Edited
	p.Unchanged += f.Unchanged
	p.Rejected += f.Rejected
	p.OwnReplies += f.OwnReplies
	p.DraftedAgain += f.DraftedAgain
	p.Closed += f.Closed
	p.Waiting += f.Waiting
}

// Rate is n of the judged drafts as a percentage ("–" when none is): those
// approved, edited, rejected, replaced by a person's own reply or asked
// for again. A draft whose lead was closed without a reply says nothing
// of the prompt, so it is not in the rates.
func (p PromptRow) Rate(n int) string {
	decided := p.Unchanged + p.Edited + p.Rejected + p.OwnReplies + p.DraftedAgain
	if decided == 0 {
		return "–"
	}
	return strconv.Itoa(n*100/decided) + "%"
}

// money is an amount with its currency; the template drafter's drafts have none.
func money(v float64, currency string) string {
	if currency == "" {
		return fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%.4f %s", v, currency)
}
