package views

import (
	"fmt"
	"time"

	"github.com/handoff/handoff/store"
)

// CanaryRow is one client's canary: the drafter's version A beside the
// candidate's B, their draft quality figures over the overview's days,
// and what a person decided.
type CanaryRow struct {
	Client   string            `json:"client"`
	A        string            `json:"a"` // drafter.prompt_version
	B        string            `json:"b"` // drafter.canary.prompt_version
	Share    float64           `json:"share"`
	State    store.CanaryState `json:"state"` // "" running, promoted, rolled_back
	By       string            `json:"by,omitempty"`
	At       *time.Time        `json:"at,omitempty"`
	AFigures QualityRow        `json:"a_figures"`
	BFigures QualityRow        `json:"b_figures"`
	// ADecided and BDecided are how each version's drafts were decided
	// (the overview's drafting figures, over the client's channels).
	ADecided PromptRow `json:"a_decided"`
	BDecided PromptRow `json:"b_decided"`
}

// StateLine says what the canary does now, in words.
func (r CanaryRow) StateLine() string {
	when := ""
	if r.At != nil {
		when = " at " + r.At.UTC().Format("15:04 UTC, 2 Jan")
	}
	switch r.State {
	case store.CanaryPromoted:
		return fmt.Sprintf("Promoted by %s%s: every new turn is drafted by %s.", r.By, when, r.B)
	case store.CanaryRolledBack:
		return fmt.Sprintf("Rolled back by %s%s: every new turn is drafted by %s.", r.By, when, r.A)
	}
	return fmt.Sprintf("Running: %.0f%% of new turns are drafted by %s, the rest by %s.", r.Share*100, r.B, r.A)
}

// Canaries is the overview's canary panel: every client's canary the
// person sees; CSRF and Admin for the promote and roll back buttons.
type Canaries struct {
	Rows  []CanaryRow
	Admin bool
	CSRF  string
}
