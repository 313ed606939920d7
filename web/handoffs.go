package web

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// handoffList is the answer of GET /api/v1/handoffs: a page, and the
// cursor of the next one when there is more.
type handoffList struct {
	Handoffs   []store.Handoff `json:"handoffs"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// listHandoffs answers GET /api/v1/handoffs?status=&stuck=true&limit=&cursor=.
func (s *Server) listHandoffs(c *echo.Context) error {
	q, err := parseHandoffQuery(c)
	if err != nil {
		return err
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	after, ok := handoffCursor(cursor)
	if !ok || (q.Status != "" && after != nil && after.Status != q.Status) {
		return errorf(http.StatusBadRequest, "cursor %q is not a cursor this list gave out", cursor)
	}
	hs, next, err := s.handoffPage(s.only(c), q, s.now(), after, limit)
	if err != nil {
		return err
	}
	out := handoffList{Handoffs: hs}
	if next != nil {
		out.NextCursor = encodeHandoffCursor(*next)
	}
	return c.JSON(http.StatusOK, out)
}

// handoffPage walks the leads q selects in the list's order (status by
// status, longest in the status first), resuming after after (nil: the
// start), in one read transaction. next is the last lead of a full page
// when more follow, nil at the end.
func (s *Server) handoffPage(only *store.Visible, q handoffQuery, now time.Time, after *store.Handoff, limit int) (page []store.Handoff, next *store.Handoff, err error) {
	statuses := leads.Statuses
	if q.Stuck {
		statuses = leads.OpenStatuses
	}
	if q.Status != "" {
		statuses = []store.HandoffStatus{q.Status}
	}
	stuckAfter := leads.StuckAfter(s.cfg)
	if after != nil {
		i := slices.Index(statuses, after.Status)
		if i < 0 {
			return nil, nil, errorf(http.StatusBadRequest, "cursor names status %s, which this list does not walk", after.Status)
		}
		statuses = statuses[i:]
	}
	page = []store.Handoff{}
	more := false
	err = s.st.View(func(tx *store.Tx) error {
		for _, st := range statuses {
			var before time.Time
			if q.Stuck {
				before = now.Add(-stuckAfter[st])
			}
			var from *store.Handoff
			if after != nil && after.Status == st {
				from = after
			}
			err := tx.EachHandoffAfter(st, from, before, func(h store.Handoff) (bool, error) {
				if only != nil && !only.Key(h.Key) {
					return true, nil
				}
				if len(page) == limit {
					more = true
					return false, nil
				}
				page = append(page, h)
				return true, nil
			})
			if err != nil || more {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list leads: %w", err)
	}
	if more {
		last := page[len(page)-1]
		next = &last
	}
	return page, next, nil
}

// encodeHandoffCursor names the place of h in the list: its status, the
// time it entered it and its key, as the status index sorts them.
func encodeHandoffCursor(h store.Handoff) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(h.Status) + "\x00" + h.Since.UTC().Format(time.RFC3339Nano) + "\x00" + h.Key))
}

// handoffCursor decodes a cursor of encodeHandoffCursor: "" is the first
// page (nil); ok is false when v is not such a cursor.
func handoffCursor(v string) (after *store.Handoff, ok bool) {
	if v == "" {
		return nil, true
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, false
	}
	parts := strings.SplitN(string(raw), "\x00", 3)
	if len(parts) != 3 || parts[2] == "" {
		return nil, false
	}
	since, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return nil, false
	}
	return &store.Handoff{Status: store.HandoffStatus(parts[0]), Since: since, Key: parts[2]}, true
}

// handoffQuery is a list of leads by status, optionally only the stuck ones.
type handoffQuery struct {
	Status store.HandoffStatus
	Stuck  bool
}

// parseHandoffQuery reads ?status= and ?stuck= for the API and the page.
func parseHandoffQuery(c *echo.Context) (handoffQuery, error) {
	q := handoffQuery{Status: store.HandoffStatus(c.QueryParam("status"))}
	if q.Status != "" && !leads.Valid(q.Status) {
		return q, errorf(http.StatusBadRequest, "status %q is not one of %s", q.Status, leads.Names(leads.Statuses, ""))
	}
	if v := c.QueryParam("stuck"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return q, errorf(http.StatusBadRequest, "stuck must be true or false, not %q", v)
		}
		q.Stuck = b
	}
	if q.Stuck && q.Status != "" && !leads.Open(q.Status) {
		return q, errorf(http.StatusBadRequest, "a %s lead is never stuck; ask for %s", q.Status, leads.Names(leads.OpenStatuses, "or"))
	}
	return q, nil
}

// handoffs lists up to limit leads matching q at now, longest waiting
// first per status, of the channels only sees (nil: every channel).
func (s *Server) handoffs(only *store.Visible, q handoffQuery, now time.Time, limit int) ([]store.Handoff, error) {
	if !q.Stuck {
		return leads.List(s.st, leads.Filter{Status: q.Status, Limit: limit, Only: only})
	}
	return leads.Stuck(s.st, only, now, leads.StuckAfter(s.cfg), q.Status, limit)
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

// lastRunes bounds the latest message a list row shows.
const lastRunes = 140

// lastMessage fills r's name and latest message from ev, h's latest
// message (zero when gone): the name the message or the lead gave, else
// the contact; the text folded to one line; its age at now.
func lastMessage(r *views.HandoffRow, ev store.Event, h store.Handoff, now time.Time) {
	r.Name = views.LeadName(ev, h)
	if r.Contact == "" {
		r.Contact = ev.Contact
	}
	if ev.Key == "" {
		return
	}
	r.Last = views.OneLine(ev.Text, lastRunes)
	r.LastAt, r.LastAge = ev.ReceivedAt, views.Age(now.Sub(ev.ReceivedAt))+" ago"
}
