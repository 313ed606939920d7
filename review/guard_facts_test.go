package review_test

import (
	"strings"
	"testing"

	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/testkit/corpus"
)

// FuzzGuardHoldsFactsFigures: a reply that states the facts of the
// version it was written from, entry by entry as the model is given them,
// has no figure flagged, whatever the facts say (prices, amounts, dates,
// times, phone numbers, links; corpus texts): the guard checks the draft
// against its own facts version.
func FuzzGuardHoldsFactsFigures(f *testing.F) {
	for _, s := range []string{
		"- Haircut €35\n- Colour from 1,200.00 EUR\n- Open Mon–Fri 9:00–17:30",
		"* Call +44 20 7946 0958 or 020 7946 0958\n* Book at https://salon.example/menu/fish&chips?size=large",
		"Closed on 24 December and 1/1; late opening until 8pm on 12 March\n• Deposit: $50.00 (USD 50)",
		"- Prices in CHF 1'250.50 and 3.000,00 € & <b>more</b>\r\n- Open 09h00–18h30",
	} {
		f.Add(s)
	}
	for _, tx := range corpus.Texts() {
		f.Add("- " + tx.Body + "\n- " + tx.Name)
	}
	rv := review.New(nil, testConfig())
	f.Fuzz(func(t *testing.T, text string) {
		if facts.Check(text) != nil {
			return
		}
		entries, _ := facts.Entries(text, nil, 1)
		saved := make([]string, len(entries))
		for i, e := range entries {
			saved[i] = e.Text
		}
		// The version's text is what was typed, as Save keeps it.
		version := strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"))
		for _, reply := range []string{strings.Join(saved, "\n"), strings.Join(saved, "\n\n")} {
			g := rv.Guard(reply, review.GuardInput{Channel: "web", Facts: version, Customer: "hi"})
			if len(g.Figures) > 0 {
				t.Fatalf("a reply stating its facts is flagged: %+v\nfacts %q\nreply %q", g.Figures, version, reply)
			}
		}
	})
}

// TestGuardChecksTheDraftsVersion: the figures are checked against the
// facts the guard is given (the draft's version), not any other: a price
// held by version 2 is flagged against version 1.
func TestGuardChecksTheDraftsVersion(t *testing.T) {
	rv := review.New(nil, testConfig())
	reply := "Colour is 1,200.00 EUR & a haircut €35."
	v1, v2 := "- Haircut €35", "- Haircut €35\n- Colour from 1200 EUR"
	if g := rv.Guard(reply, review.GuardInput{Channel: "web", Facts: v2, Customer: "hi"}); len(g.Figures) != 0 {
		t.Errorf("against version 2: %+v, want nothing flagged", g.Figures)
	}
	if g := rv.Guard(reply, review.GuardInput{Channel: "web", Facts: v1, Customer: "hi"}); len(g.Figures) != 1 || g.Figures[0].Text != "1,200.00 EUR" {
		t.Errorf("against version 1: %+v, want the colour's price", g.Figures)
	}
}
