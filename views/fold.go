package views

import (
	"strings"
	"unicode/utf8"

	"github.com/handoff/handoff/store"
)

// The card keeps the decision in view (the draft, Approve, Edit, Reject):
// the conversation before the turn shows its last recentLines lines and
// folds the older ones under "show all", and a long message shows its
// first lines with "show more". Both folds are <details>, so they work
// without a script; the decision is pinned to the bottom of the screen
// while the card above it is longer than the screen (app.css, .decide).
const (
	// recentLines is how many of the conversation's lines before the turn
	// the card shows unfolded, newest last.
	recentLines = 2
	// A text is long, and folded to its first lines, past its place's
	// lines (6 for the turn's message, 4 each for a turn of several, 2
	// for an earlier line; app.css cuts it to as many) by a margin:
	// more than lineRunes characters a line, or 4 more lines.
	lineRunes         = 70
	linesAbove        = 4
	turnLines         = 6
	burstLines        = 4
	earlierLinesShown = 2
)

// splitEarlier splits the conversation's lines before the turn into the
// older ones, folded, and the last recentLines, shown.
func splitEarlier(said []store.Said) (older, recent []store.Said) {
	var before []store.Said
	for _, s := range said {
		if !s.InTurn {
			before = append(before, s)
		}
	}
	if len(before) <= recentLines {
		return nil, before
	}
	return before[:len(before)-recentLines], before[len(before)-recentLines:]
}

// isLong says the card folds text, shown in a place of lines lines, to
// those first lines.
func isLong(text string, lines int) bool {
	return utf8.RuneCountInString(text) > lines*lineRunes || strings.Count(text, "\n")+1 > lines+linesAbove
}

// foldWhole says what "show more" unfolds: all of text's characters, or
// its lines when it is long by its lines.
func foldWhole(text string, lines int) string {
	if n := utf8.RuneCountInString(text); n > lines*lineRunes {
		return "all " + count(n, "character", "characters")
	}
	return "all " + count(strings.Count(text, "\n")+1, "line", "lines")
}

// count writes n with its noun, "1 earlier line", "6 earlier lines", and
// thousands grouped: "2,000 characters".
func count(n int, one, many string) string {
	return grouped(n) + " " + plural(n, one, many)
}

// Count is count for the handlers: "1 draft", "2 drafts", never "draft(s)".
func Count(n int, one, many string) string { return count(n, one, many) }

// grouped writes n with commas between thousands.
func grouped(n int) string {
	s := itoa(n)
	if n < 0 {
		return "-" + grouped(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// statusWords is what the queue's footer calls drafts of status st.
func statusWords(st store.DraftStatus) string {
	switch st {
	case store.DraftPending:
		return "waiting"
	case store.DraftSuperseded:
		return "replaced by a newer draft"
	}
	return string(st) // approved, rejected: already words
}

// countsLine is the queue's footer: the drafts in each status, in words,
// "3 waiting · 12 approved · 1 rejected · 2 replaced by a newer draft".
func countsLine(counts map[store.DraftStatus]int) string {
	parts := make([]string, 0, len(store.DraftStatuses))
	for _, st := range store.DraftStatuses {
		parts = append(parts, grouped(counts[st])+" "+statusWords(st))
	}
	return strings.Join(parts, " · ")
}
