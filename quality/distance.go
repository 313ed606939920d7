// Package quality measures drafts against what people made of them and
// checks them before a person sees them: the normalised edit distance
// between a draft and the reply sent, the reply's language against the
// customer's, and the figures (prices, dates, times, phone numbers, URLs)
// a draft states that neither the client's facts nor the conversation
// hold. It is a leaf: plain functions of strings, no store, no config.
package quality

import (
	"unicode/utf8"

	"github.com/agnivade/levenshtein"
)

// MaxCells bounds the work of one exact distance: the product of the two
// texts' lengths in runes, once their common start and end are set aside.
// levenshtein keeps two rows, so memory stays small; the time grows with
// the cells, and 4M cells is a few milliseconds. Past it the distance is
// measured over words instead (Distance says it approximated).
const MaxCells = 4 << 20

// Distance is the edit distance between draft and sent over runes,
// divided by the longer text's length: 0 for a draft sent as written, 1
// for one replaced entirely. approx is true when the texts were too long
// for an exact measure within MaxCells: then it is the distance over words
// (each word one symbol), divided by the longer text's word count, and when
// even that is too long, the difference in length alone (a lower bound).
func Distance(draft, sent string) (d float64, approx bool) {
	if draft == sent {
		return 0, false
	}
	a, b := []rune(draft), []rune(sent)
	longest := max(len(a), len(b))
	// The common start and end change nothing, and are most of a light edit.
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if cells(len(a), len(b)) <= MaxCells {
		return float64(levenshtein.ComputeDistance(string(a), string(b))) / float64(longest), false
	}
	wa, wb := words(draft), words(sent)
	if n := max(len(wa), len(wb)); n > 0 && cells(len(wa), len(wb)) <= MaxCells {
		sa, sb := symbols(wa, wb)
		return float64(levenshtein.ComputeDistance(sa, sb)) / float64(n), true
	}
	return float64(abs(len([]rune(draft))-len([]rune(sent)))) / float64(longest), true
}

func cells(a, b int) int {
	if a == 0 || b == 0 {
		return 0
	}
	if a > MaxCells/b {
		return MaxCells + 1
	}
	return a * b
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// words splits s at white space.
func words(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		space := r == ' ' || r == '\n' || r == '\t' || r == '\r'
		switch {
		case space && start >= 0:
			out = append(out, s[start:i])
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// symbols writes both word lists as strings of one rune per distinct word
// (from the supplementary private use planes), so the rune distance
// between them is the word distance.
func symbols(a, b []string) (string, string) {
	ids := map[string]rune{}
	enc := func(ws []string) string {
		buf := make([]byte, 0, 4*len(ws))
		for _, w := range ws {
			r, ok := ids[w]
			if !ok {
				r = 0xF0000 + rune(len(ids))
				if r > utf8.MaxRune {
					r = utf8.MaxRune
				}
				ids[w] = r
			}
			buf = utf8.AppendRune(buf, r)
		}
		return string(buf)
	}
	return enc(a), enc(b)
}
