package leads

import (
	"testing"

	"github.com/handoff/handoff/store"
)

// TestStatusLists holds the declared lists to what the pages, the API's
// filter and the stuck rules read from them.
func TestStatusLists(t *testing.T) {
	if got, want := Names(Statuses, ""), "received, matched, owned, replied, closed"; got != want {
		t.Errorf("Names(Statuses) = %q, want %q", got, want)
	}
	if got, want := Names(OpenStatuses, "or"), "received, matched or owned"; got != want {
		t.Errorf("Names(OpenStatuses, or) = %q, want %q", got, want)
	}
	for _, s := range OpenStatuses {
		if !Valid(s) {
			t.Errorf("open status %s is not one of Statuses", s)
		}
	}
	cases := []struct {
		s           store.HandoffStatus
		open, valid bool
	}{
		{Received, true, true}, {Matched, true, true}, {Owned, true, true},
		{Replied, false, true}, {Closed, false, true}, {"", false, false}, {"lost", false, false},
	}
	for _, c := range cases {
		if got := Open(c.s); got != c.open {
			t.Errorf("Open(%q) = %v, want %v", c.s, got, c.open)
		}
		if got := Valid(c.s); got != c.valid {
			t.Errorf("Valid(%q) = %v, want %v", c.s, got, c.valid)
		}
	}
}

// TestTurnOpen: a lead's turn is open while a draft answers it, or, on a
// lead from before turns were kept, while its status waits for an answer.
func TestTurnOpen(t *testing.T) {
	cases := []struct {
		name string
		h    store.Handoff
		want bool
	}{
		{"a turn drafted", store.Handoff{Turn: 2, TurnDraft: "web:m2", Status: Owned}, true},
		{"the turn answered", store.Handoff{Turn: 2, Status: Owned}, false},
		{"an old lead, owned", store.Handoff{Status: Owned}, true},
		{"an old lead, replied", store.Handoff{Status: Replied}, false},
		{"an old lead, closed", store.Handoff{Status: Closed}, false},
	}
	for _, c := range cases {
		if got := TurnOpen(c.h); got != c.want {
			t.Errorf("%s: TurnOpen = %v, want %v", c.name, got, c.want)
		}
	}
}
