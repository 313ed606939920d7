package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// handoffList is the answer of GET /api/v1/handoffs.
type handoffList struct {
	Handoffs []store.Handoff `json:"handoffs"`
}

// listHandoffs answers GET /api/v1/handoffs?status=&stuck=true&limit=.
func (s *Server) listHandoffs(c *echo.Context) error {
	q, err := parseHandoffQuery(c)
	if err != nil {
		return err
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	hs, err := s.handoffs(q, s.now(), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, handoffList{Handoffs: hs})
}

// handoffQuery is a list of leads by status, optionally only the stuck ones.
type handoffQuery struct {
	Status store.HandoffStatus
	Stuck  bool
}

// parseHandoffQuery reads ?status= and ?stuck= for the API and the page.
func parseHandoffQuery(c *echo.Context) (handoffQuery, error) {
	q := handoffQuery{Status: store.HandoffStatus(c.QueryParam("status"))}
	switch q.Status {
	case "", store.HandoffReceived, store.HandoffMatched, store.HandoffOwned, store.HandoffReplied:
	default:
		return q, errorf(http.StatusBadRequest, "status %q is not one of received, matched, owned, replied", q.Status)
	}
	if v := c.QueryParam("stuck"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return q, errorf(http.StatusBadRequest, "stuck must be true or false, not %q", v)
		}
		q.Stuck = b
	}
	if q.Stuck && q.Status == store.HandoffReplied {
		return q, errorf(http.StatusBadRequest, "a replied lead is never stuck; ask for received, matched or owned")
	}
	return q, nil
}

// handoffs lists up to limit leads matching q at now, longest waiting first per status.
func (s *Server) handoffs(q handoffQuery, now time.Time, limit int) ([]store.Handoff, error) {
	if !q.Stuck {
		return s.st.Handoffs(store.HandoffFilter{Status: q.Status, Limit: limit})
	}
	return leads.Stuck(s.st, now, jobs.StuckAfter(s.cfg), q.Status, limit)
}

// queryLimit reads ?limit= (default 100, at most 1000).
func queryLimit(c *echo.Context) (int, error) {
	v := c.QueryParam("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, errorf(http.StatusBadRequest, "limit must be a whole number from 1 to 1000, not %q", v)
	}
	return n, nil
}
