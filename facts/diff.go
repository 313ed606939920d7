package facts

import (
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// Line is one line of a diff: Op is '-' (only in the older text), '+'
// (only in the newer) or ' ' (in both).
type Line struct {
	Op   byte
	Text string
}

// Diff is the line diff from text a to text b (diff-match-patch's line
// mode: each line is compared whole, so an edited line is one removed and
// one added).
func Diff(a, b string) []Line {
	dmp := diffmatchpatch.New()
	ca, cb, lines := dmp.DiffLinesToChars(withEnd(a), withEnd(b))
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines)
	var out []Line
	for _, d := range diffs {
		op := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = '-'
		case diffmatchpatch.DiffInsert:
			op = '+'
		}
		for _, l := range strings.SplitAfter(d.Text, "\n") {
			if l != "" {
				out = append(out, Line{Op: op, Text: strings.TrimSuffix(l, "\n")})
			}
		}
	}
	return out
}

// withEnd ends a non-empty text with a newline, so its last line compares
// equal to the same line inside another text.
func withEnd(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// Changed counts the lines a diff adds and removes.
func Changed(lines []Line) (added, removed int) {
	for _, l := range lines {
		switch l.Op {
		case '+':
			added++
		case '-':
			removed++
		}
	}
	return added, removed
}
