package views

import (
	"context"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
)

// TestPluralsInWords: counts read "1 message", "2 messages", never
// "message(s)": the drafting notice, the empty queue and the selection's
// summary.
func TestPluralsInWords(t *testing.T) {
	for _, tc := range []struct {
		messages, leads int
		want            string
	}{
		{1, 1, "1 message from 1 lead is waiting for a draft."},
		{2, 1, "2 messages from 1 lead are waiting for a draft."},
		{2000, 3, "2,000 messages from 3 leads are waiting for a draft."},
	} {
		var b strings.Builder
		if err := DraftingNotice(store.Drafting{Messages: tc.messages, Leads: tc.leads}).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) || strings.Contains(b.String(), "(s)") {
			t.Errorf("%d messages, %d leads: %s; want %q", tc.messages, tc.leads, b.String(), tc.want)
		}
	}
	for _, tc := range []struct {
		done, refused int
		want          string
	}{
		{1, 0, "1 of 1 selected draft approved."},
		{2, 1, "2 of 3 selected drafts approved; 1 could not be:"},
	} {
		r := Selection{Action: "approve", Done: make([]string, tc.done)}
		for range tc.refused {
			r.Refused = append(r.Refused, Refusal{})
		}
		if got := r.summary(); got != tc.want {
			t.Errorf("summary = %q; want %q", got, tc.want)
		}
	}
}
