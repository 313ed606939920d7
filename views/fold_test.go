package views

import (
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
)

func TestGrouped(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 2000: "2,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestIsLong(t *testing.T) {
	newlines := "Hello,\nI have two questions:\n\t1. opening hours?\r\n\t2. parking?\n\nThanks,\nAda" // the corpus's: 7 lines, 74 characters
	for _, tc := range []struct {
		text  string
		lines int
		want  bool
	}{
		{"hi", earlierLinesShown, false},
		{strings.Repeat("é", turnLines*lineRunes), turnLines, false}, // characters, not bytes
		{strings.Repeat("é", turnLines*lineRunes+1), turnLines, true},
		{strings.Repeat("line\n", turnLines+linesAbove-1) + "end", turnLines, false},
		{strings.Repeat("line\n", turnLines+linesAbove) + "end", turnLines, true},
		{newlines, turnLines, false},
		{newlines, earlierLinesShown, true},
	} {
		if got := isLong(tc.text, tc.lines); got != tc.want {
			t.Errorf("isLong(%.20q… %d runes, %d) = %v, want %v", tc.text, len([]rune(tc.text)), tc.lines, got, tc.want)
		}
	}
	if got, want := foldWhole(newlines, earlierLinesShown), "all 7 lines"; got != want {
		t.Errorf("foldWhole(the newlines text) = %q, want %q", got, want)
	}
}

// TestSplitEarlier: the lines before the turn split into the older ones
// and the last recentLines, in order; the turn's lines are neither.
func TestSplitEarlier(t *testing.T) {
	ev := func(text string, turn bool) store.Said {
		return store.Said{Event: &store.Event{Text: text}, InTurn: turn}
	}
	texts := func(ss []store.Said) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Event.Text)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		said          []store.Said
		older, recent string
	}{
		{nil, "", ""},
		{[]store.Said{ev("a", false), ev("t", true)}, "", "a"},
		{[]store.Said{ev("a", false), ev("b", false), ev("t", true)}, "", "a,b"},
		{[]store.Said{ev("a", false), ev("b", false), ev("c", false), ev("d", false), ev("t", true), ev("u", true)}, "a,b", "c,d"},
	} {
		older, recent := splitEarlier(tc.said)
		if texts(older) != tc.older || texts(recent) != tc.recent {
			t.Errorf("splitEarlier(%s) = %q, %q; want %q, %q", texts(tc.said), texts(older), texts(recent), tc.older, tc.recent)
		}
	}
}

func TestCountsLine(t *testing.T) {
	got := countsLine(map[store.DraftStatus]int{store.DraftPending: 1200, store.DraftApproved: 3})
	if want := "1,200 waiting · 3 approved · 0 rejected · 0 replaced by a newer draft"; got != want {
		t.Errorf("countsLine = %q, want %q", got, want)
	}
}
