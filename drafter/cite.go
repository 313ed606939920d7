package drafter

import (
	"regexp"
	"strings"
)

// citeMark is a citation of facts in a reply: [F3], [F1, F4], [ F2 ;F5 ],
// with the spaces before it (taken out with the mark).
var citeMark = regexp.MustCompile(`[ \t]*\[\s*(F\d+(?:\s*[,;]\s*F\d+)*)\s*\]`)

var citeID = regexp.MustCompile(`F\d+`)

// factsPrompt is the facts as the model is given them, one entry a line
// after its id ("[F3] Open 9–17"); "" when there are none.
func factsPrompt(f *Facts) string {
	if f == nil || len(f.Entries) == 0 {
		return ""
	}
	var b strings.Builder
	for _, e := range f.Entries {
		b.WriteString("[" + e.ID + "] " + e.Text + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Cite takes the citation marks out of reply and returns the reply
// without them, the entries of f it cites (in the order first cited, each
// once) and the ids it cites that f does not have. A reply written
// without facts (f nil or empty) is returned as it is: its brackets are
// its own.
func Cite(reply string, f *Facts) (text string, cited []Fact, unknown []string) {
	if f == nil || len(f.Entries) == 0 {
		return reply, nil, nil
	}
	byID := make(map[string]Fact, len(f.Entries))
	for _, e := range f.Entries {
		byID[e.ID] = e
	}
	seen := map[string]bool{}
	note := func(m string) string {
		for _, id := range citeID.FindAllString(m, -1) {
			if seen[id] {
				continue
			}
			seen[id] = true
			if e, ok := byID[id]; ok {
				cited = append(cited, e)
			} else {
				unknown = append(unknown, id)
			}
		}
		return ""
	}
	// Only the lines with a mark change: the mark and the spaces before it
	// go, a line left empty by its marks goes too.
	var out []string
	for _, l := range strings.Split(reply, "\n") {
		if !citeMark.MatchString(l) {
			out = append(out, l)
			continue
		}
		lead := strings.HasPrefix(strings.TrimLeft(l, " \t"), "[")
		for citeMark.MatchString(l) { // "[F[F1]1]" is a mark once the inner one goes
			l = citeMark.ReplaceAllStringFunc(l, note)
		}
		l = strings.TrimRight(l, " \t\r")
		if lead { // "[F1] Open at 9": the space after the mark
			l = strings.TrimLeft(l, " \t")
		}
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return strings.TrimSpace(strings.Join(out, "\n")), cited, unknown
}
