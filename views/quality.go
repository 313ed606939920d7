package views

import (
	"fmt"
	"sort"
	"strings"

	"github.com/handoff/handoff/quality"
	"github.com/handoff/handoff/store"
)

// QualityStats is how much people changed the drafts and why, and what
// the guards flagged, per prompt version, client and channel.
type QualityStats struct {
	Days int
	Rows []QualityRow
}

// QualityRow is the figures of one prompt version, client and channel.
type QualityRow struct {
	PromptVersion string         `json:"prompt_version"`
	Client        string         `json:"client"`
	Channel       string         `json:"channel"`
	Guarded       int            `json:"guarded"`
	LanguageFlags int            `json:"language_flagged"`
	FigureFlags   int            `json:"figures_flagged"`
	Measured      int            `json:"measured"`
	DistanceSum   float64        `json:"-"`
	MeanDistance  *float64       `json:"mean_distance"` // null: no approval measured
	Reasons       map[string]int `json:"reasons"`
}

// Add counts figure f into r.
func (r *QualityRow) Add(f store.QualityFigure) {
	r.Guarded += f.Guarded
	r.LanguageFlags += f.LanguageFlags
	r.FigureFlags += f.FigureFlags
	r.Measured += f.Measured
	r.DistanceSum += f.DistanceSum
	if r.Reasons == nil {
		r.Reasons = map[string]int{}
	}
	for c, n := range f.Reasons {
		r.Reasons[c] += n
	}
	r.MeanDistance = nil
	if r.Measured > 0 {
		m := r.DistanceSum / float64(r.Measured)
		r.MeanDistance = &m
	}
}

// Mean is the mean distance as a percentage ("–" when none is measured).
func (r QualityRow) Mean() string {
	if r.MeanDistance == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", *r.MeanDistance*100)
}

// ReasonLine is the reasons given, most first ("–" when none).
func (r QualityRow) ReasonLine() string {
	if len(r.Reasons) == 0 {
		return "–"
	}
	codes := make([]string, 0, len(r.Reasons))
	for c := range r.Reasons {
		codes = append(codes, c)
	}
	sort.Slice(codes, func(i, j int) bool {
		if r.Reasons[codes[i]] != r.Reasons[codes[j]] {
			return r.Reasons[codes[i]] > r.Reasons[codes[j]]
		}
		return codes[i] < codes[j]
	})
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s %d", ReasonLabel(c), r.Reasons[c])
	}
	return strings.Join(parts, " · ")
}

// ReasonLabel is a reason code as the dashboard words it.
func ReasonLabel(code string) string {
	switch code {
	case "wrong_facts":
		return "Wrong facts"
	case "tone":
		return "Tone"
	case "language":
		return "Language"
	case "too_long":
		return "Too long"
	case "not_needed":
		return "Not needed"
	case "other":
		return "Other"
	}
	return code
}

// Segment is a piece of a draft's text, marked when it is a flagged figure.
type Segment struct {
	Text   string
	Marked bool
}

// Highlight cuts text into segments, marking every occurrence of the
// guards' figures (the longest first where two overlap). The segments are
// rendered as text, so templ escapes them.
func Highlight(text string, figures []store.GuardFigure) []Segment {
	var out []Segment
	rest := text
	for rest != "" {
		at, n := -1, 0
		for _, f := range figures {
			if f.Text == "" {
				continue
			}
			if i := strings.Index(rest, f.Text); i >= 0 && (at < 0 || i < at || (i == at && len(f.Text) > n)) {
				at, n = i, len(f.Text)
			}
		}
		if at < 0 {
			out = append(out, Segment{Text: rest})
			break
		}
		if at > 0 {
			out = append(out, Segment{Text: rest[:at]})
		}
		out = append(out, Segment{Text: rest[at : at+n], Marked: true})
		rest = rest[at+n:]
	}
	return out
}

// languageName is an ISO 639-3 code's English name.
func languageName(code string) string { return quality.LanguageName(code) }

// figureKind is a figure's kind as the card words it.
func figureKind(kind string) string {
	switch kind {
	case "url":
		return "link"
	case "email":
		return "address"
	case "phone":
		return "phone number"
	}
	return kind
}

// reasonCodes is the one-tap reasons, in their order.
func reasonCodes() []string { return store.ReasonCodes }
