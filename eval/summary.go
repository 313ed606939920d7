package eval

import (
	"math"
	"slices"
)

// Summary is the candidate beside the drafts that were shown, over the
// same turns: those the candidate drafted (Compared).
type Summary struct {
	Compared  int         `json:"compared"`
	Failed    int         `json:"failed"` // turns without a candidate draft (Turn.Error)
	Current   SideSummary `json:"current"`
	Candidate SideSummary `json:"candidate"`
}

// SideSummary sums one side's drafts.
type SideSummary struct {
	// MeanDistance and MedianDistance are the edit distance to what was
	// sent; nil when no turn was compared.
	MeanDistance   *float64 `json:"mean_distance,omitempty"`
	MedianDistance *float64 `json:"median_distance,omitempty"`
	// Unchanged counts the drafts identical to what was sent.
	Unchanged int `json:"unchanged"`
	// Flagged counts the drafts the guards flagged; GuardHits their
	// findings, LanguageHits and FigureHits by kind.
	Flagged      int     `json:"flagged"`
	GuardHits    int     `json:"guard_hits"`
	LanguageHits int     `json:"language_hits"`
	FigureHits   int     `json:"figure_hits"`
	Cost         float64 `json:"cost"`
	// LatencyP50 and LatencyP95 are over the Timed drafts whose latency is
	// known (nil when none is), in milliseconds.
	Timed      int      `json:"timed"`
	LatencyP50 *float64 `json:"latency_p50_ms,omitempty"`
	LatencyP95 *float64 `json:"latency_p95_ms,omitempty"`
}

// Summarize sums turns: each side over the turns the candidate drafted,
// so the two are compared on the same turns.
func Summarize(turns []Turn) Summary {
	var s Summary
	var cur, cand []Side
	for _, t := range turns {
		if t.Error != "" {
			s.Failed++
			continue
		}
		cur, cand = append(cur, t.Current), append(cand, t.Candidate)
	}
	s.Compared = len(cur)
	s.Current, s.Candidate = summarizeSide(cur), summarizeSide(cand)
	return s
}

func summarizeSide(sides []Side) SideSummary {
	var s SideSummary
	var dist, lat []float64
	for _, x := range sides {
		dist = append(dist, x.Distance)
		if x.Distance == 0 {
			s.Unchanged++
		}
		if x.Guards.Flagged() {
			s.Flagged++
		}
		s.GuardHits += x.GuardHits
		if x.Guards != nil {
			if x.Guards.LanguageDiffers {
				s.LanguageHits++
			}
			s.FigureHits += len(x.Guards.Figures)
		}
		s.Cost += x.Cost
		if x.LatencyMS != nil {
			lat = append(lat, *x.LatencyMS)
		}
	}
	if len(dist) > 0 {
		sum := 0.0
		for _, d := range dist {
			sum += d
		}
		mean := sum / float64(len(dist))
		s.MeanDistance = &mean
		s.MedianDistance = ptr(percentile(dist, 50))
	}
	s.Timed = len(lat)
	if len(lat) > 0 {
		s.LatencyP50, s.LatencyP95 = ptr(percentile(lat, 50)), ptr(percentile(lat, 95))
	}
	return s
}

// percentile is the p-th percentile of xs by linear interpolation between
// the closest ranks (the median of an even count is the mean of the two
// middle values).
func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 1 {
		return s[0]
	}
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(rank-float64(lo))
}

func ptr(v float64) *float64 { return &v }
