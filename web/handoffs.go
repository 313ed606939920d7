package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
)

// handoffList is the answer of GET /api/v1/handoffs.
type handoffList struct {
	Handoffs []store.Handoff `json:"handoffs"`
}

// listHandoffs answers GET /api/v1/handoffs?status=&stuck=true&limit=.
func (s *Server) listHandoffs(c *echo.Context) error {
	status := store.HandoffStatus(c.QueryParam("status"))
	switch status {
	case "", store.HandoffReceived, store.HandoffMatched, store.HandoffOwned, store.HandoffReplied:
	default:
		return errorf(http.StatusBadRequest, "status %q is not one of received, matched, owned, replied", status)
	}
	stuck := false
	if v := c.QueryParam("stuck"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errorf(http.StatusBadRequest, "stuck must be true or false, not %q", v)
		}
		stuck = b
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	if !stuck {
		hs, err := s.st.Handoffs(store.HandoffFilter{Status: status, Limit: limit})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, handoffList{Handoffs: hs})
	}
	if status == store.HandoffReplied {
		return errorf(http.StatusBadRequest, "a replied lead is never stuck; ask for received, matched or owned")
	}
	out := []store.Handoff{}
	now := s.now()
	after := s.stuckAfter()
	for _, st := range []store.HandoffStatus{store.HandoffReceived, store.HandoffMatched, store.HandoffOwned} {
		if status != "" && st != status {
			continue
		}
		hs, err := s.st.Handoffs(store.HandoffFilter{Status: st, SinceBefore: now.Add(-after[st]), Limit: limit - len(out)})
		if err != nil {
			return err
		}
		out = append(out, hs...)
		if len(out) >= limit {
			break
		}
	}
	return c.JSON(http.StatusOK, handoffList{Handoffs: out})
}

// stuckAfter is how long a lead may stay in each status before it is stuck.
func (s *Server) stuckAfter() map[store.HandoffStatus]time.Duration {
	return map[store.HandoffStatus]time.Duration{
		store.HandoffReceived: s.cfg.Stuck.Received,
		store.HandoffMatched:  s.cfg.Stuck.Matched,
		store.HandoffOwned:    s.cfg.Stuck.Owned,
	}
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
