package web

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// qualityStats sums the quality figures the person may see of the last
// days days (UTC) by prompt version, client and channel. It reads the
// figures the draft writes keep (store.QualityFigures: a few keys a day),
// never the drafts.
func (s *Server) qualityStats(v store.Visible, now time.Time, days int) (views.QualityStats, error) {
	today := now.UTC().Truncate(24 * time.Hour)
	figures, err := s.st.QualityFigures(v, today.AddDate(0, 0, -(days-1)))
	if err != nil {
		return views.QualityStats{}, err
	}
	out := views.QualityStats{Days: days, Rows: []views.QualityRow{}}
	rows := map[[2]string]*views.QualityRow{}
	for _, f := range figures {
		k := [2]string{f.PromptVersion, f.Channel}
		r := rows[k]
		if r == nil {
			r = &views.QualityRow{PromptVersion: f.PromptVersion, Client: s.cfg.ClientOf(f.Channel), Channel: f.Channel, Reasons: map[string]int{}}
			rows[k] = r
		}
		r.Add(f)
	}
	for _, r := range rows {
		out.Rows = append(out.Rows, *r)
	}
	sort.Slice(out.Rows, func(i, j int) bool {
		a, b := out.Rows[i], out.Rows[j]
		if a.PromptVersion != b.PromptVersion {
			return a.PromptVersion < b.PromptVersion
		}
		if a.Client != b.Client {
			return a.Client < b.Client
		}
		return a.Channel < b.Channel
	})
	return out, nil
}

// qualityAnswer is GET /api/v1/stats/quality's answer.
type qualityAnswer struct {
	Days    int                `json:"days"`
	Reasons []string           `json:"reason_codes"`
	Rows    []views.QualityRow `json:"rows"`
}

// qualityAPI answers GET /api/v1/stats/quality?days=: per prompt version,
// client and channel, the drafts the guards checked and flagged, the
// approvals whose edit distance was measured and their mean, and the
// reasons given, over the last days days (UTC; 1 to 90, 7 when left out).
func (s *Server) qualityAPI(c *echo.Context) error {
	days := statsDays
	if v := c.QueryParam("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 90 {
			return errorf(http.StatusBadRequest, "days %q is not a whole number from 1 to 90", v)
		}
		days = n
	}
	q, err := s.qualityStats(s.visible(c), s.now(), days)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, qualityAnswer{Days: q.Days, Reasons: store.ReasonCodes, Rows: q.Rows})
}
