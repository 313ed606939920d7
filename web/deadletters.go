package web

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store"
)

// deadLetterFilter reads the list's filters from the query or a bulk body.
type deadLetterFilter struct {
	Kind      string `json:"kind"`
	Channel   string `json:"channel"`
	Error     string `json:"error"`
	OlderThan string `json:"older_than"` // a duration: items in their state longer than this
}

func (s *Server) storeFilter(f deadLetterFilter) (store.DeadLetterFilter, error) {
	out := store.DeadLetterFilter{Kind: f.Kind, Channel: f.Channel, Error: f.Error, Limit: 1000}
	switch f.Kind {
	case "", store.DeadJob, store.DeadOutbox:
	default:
		return out, errorf(http.StatusBadRequest, "kind %q is not job or outbox", f.Kind)
	}
	if f.OlderThan != "" {
		d, err := time.ParseDuration(f.OlderThan)
		if err != nil || d < 0 {
			return out, errorf(http.StatusBadRequest, "older_than %q is not a duration such as 30m or 24h", f.OlderThan)
		}
		out.OlderThan = s.now().Add(-d)
	}
	return out, nil
}

// listDeadLetters answers GET /api/v1/dead-letters?kind=&channel=&error=&older_than=.
func (s *Server) listDeadLetters(c *echo.Context) error {
	f, err := s.storeFilter(deadLetterFilter{Kind: c.QueryParam("kind"), Channel: c.QueryParam("channel"), Error: c.QueryParam("error"), OlderThan: c.QueryParam("older_than")})
	if err != nil {
		return err
	}
	dls, err := s.st.DeadLetters(f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"dead_letters": dls})
}

// replayBody is the optional body of a replay.
type replayBody struct {
	Confirm    string `json:"confirm"`
	Regenerate bool   `json:"regenerate"`
}

// deadLetterAction routes POST /api/v1/dead-letters/{id}/replay and
// /{id}/cancel: ids (outbox ids) may hold '/', so the action is the last segment.
func (s *Server) deadLetterAction(c *echo.Context) error {
	rest := c.Param("*")
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return errorf(http.StatusNotFound, "use /api/v1/dead-letters/{id}/replay or /{id}/cancel")
	}
	id, action := rest[:i], rest[i+1:]
	switch action {
	case "replay":
		return s.replayDeadLetter(c, id)
	case "cancel":
		return s.cancelDeadLetter(c, id)
	}
	return errorf(http.StatusNotFound, "%q is not an action on a dead letter (use replay or cancel)", action)
}

// replayDeadLetter answers POST /api/v1/dead-letters/{id}/replay.
func (s *Server) replayDeadLetter(c *echo.Context, id string) error {
	var body replayBody
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	if body.Confirm != "" && body.Confirm != id {
		return errorf(http.StatusBadRequest, "confirm must repeat the id being replayed (%q), not %q", id, body.Confirm)
	}
	dl, err := s.replay(c.Request().Context(), id, store.Replay{By: actor(c), At: s.now().UTC(), From: c.RealIP(), Regenerate: body.Regenerate, Confirmed: body.Confirm == id})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "replayed", "id": id, "kind": dl.Kind, "why": dl.Why})
}

// replay is the one replay shared by the API, the bulk replay and the dashboard.
func (s *Server) replay(ctx context.Context, id string, r store.Replay) (store.DeadLetter, error) {
	dl, err := s.st.ReplayDeadLetter(ctx, id, r, s.cfg.Retry.MaxAttempts, ulid.Make().String())
	var unsafe *store.UnsafeReplayError
	var state *store.StateError
	switch {
	case errors.As(err, &unsafe):
		return dl, &apiError{status: http.StatusConflict, msg: unsafe.Error()}
	case errors.As(err, &state):
		return dl, &apiError{status: http.StatusConflict, msg: state.Error()}
	case errors.Is(err, store.ErrNotFound):
		return dl, errorf(http.StatusNotFound, "there is no dead letter %q", id)
	case err != nil:
		return dl, err
	}
	s.jobs.Wake()
	return dl, nil
}

// cancelBody is the body of a cancel.
type cancelBody struct {
	Reason string `json:"reason"`
}

// cancelDeadLetter answers POST /api/v1/dead-letters/{id}/cancel.
func (s *Server) cancelDeadLetter(c *echo.Context, id string) error {
	var body cancelBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	if body.Reason == "" {
		return errorf(http.StatusBadRequest, "a cancel needs a reason")
	}
	err := s.st.DismissDeadLetter(c.Request().Context(), id, store.Dismissal{By: actor(c), At: s.now().UTC(), Reason: body.Reason})
	var state *store.StateError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "there is no dead letter %q", id)
	case errors.As(err, &state):
		return &apiError{status: http.StatusConflict, msg: state.Error()}
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "cancelled", "id": id})
}

// bulkRun is one bulk replay, running in the background so it can be cancelled.
type bulkRun struct {
	ID       string        `json:"id"`
	State    string        `json:"state"` // running, done, cancelled
	Replayed []string      `json:"replayed"`
	Skipped  []bulkSkipped `json:"skipped"`
	Failed   []bulkSkipped `json:"failed"`
	Total    int           `json:"total"`

	mu     sync.Mutex
	cancel context.CancelFunc
}

type bulkSkipped struct {
	ID  string `json:"id"`
	Why string `json:"why"`
}

func (b *bulkRun) snapshot() map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return map[string]any{"id": b.ID, "state": b.State, "total": b.Total,
		"replayed": append([]string{}, b.Replayed...), "skipped": append([]bulkSkipped{}, b.Skipped...), "failed": append([]bulkSkipped{}, b.Failed...)}
}

// bulkRuns keeps the bulk replays of this process.
type bulkRuns struct {
	mu   sync.Mutex
	runs map[string]*bulkRun
}

// startBulkReplay answers POST /api/v1/dead-letters/replay with a filter:
// it replays the items that are safe, skips the others saying why, and runs
// in the background (202 with its id) so it can be watched and cancelled.
func (s *Server) startBulkReplay(c *echo.Context) error {
	var body deadLetterFilter
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	f, err := s.storeFilter(body)
	if err != nil {
		return err
	}
	items, err := s.st.DeadLetters(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.Request().Context()))
	run := &bulkRun{ID: ulid.Make().String(), State: "running", Total: len(items), Replayed: []string{}, Skipped: []bulkSkipped{}, Failed: []bulkSkipped{}, cancel: cancel}
	s.bulk.mu.Lock()
	s.bulk.runs[run.ID] = run
	s.bulk.mu.Unlock()
	by, from := actor(c), c.RealIP()
	go func() {
		defer cancel()
		for _, it := range items {
			if ctx.Err() != nil {
				break
			}
			run.mu.Lock()
			if !it.Safe {
				run.Skipped = append(run.Skipped, bulkSkipped{ID: it.ID, Why: it.Why})
				run.mu.Unlock()
				continue
			}
			run.mu.Unlock()
			_, err := s.replay(ctx, it.ID, store.Replay{By: by, At: s.now().UTC(), From: from})
			run.mu.Lock()
			if err != nil {
				run.Failed = append(run.Failed, bulkSkipped{ID: it.ID, Why: err.Error()})
			} else {
				run.Replayed = append(run.Replayed, it.ID)
			}
			run.mu.Unlock()
		}
		run.mu.Lock()
		if ctx.Err() != nil {
			run.State = "cancelled"
		} else {
			run.State = "done"
		}
		run.mu.Unlock()
	}()
	return c.JSON(http.StatusAccepted, run.snapshot())
}

func (s *Server) bulkRun(c *echo.Context) (*bulkRun, error) {
	s.bulk.mu.Lock()
	defer s.bulk.mu.Unlock()
	run, ok := s.bulk.runs[c.Param("id")]
	if !ok {
		return nil, errorf(http.StatusNotFound, "there is no bulk replay %q in this process", c.Param("id"))
	}
	return run, nil
}

// bulkReplayStatus answers GET /api/v1/dead-letters/bulk/{id}.
func (s *Server) bulkReplayStatus(c *echo.Context) error {
	run, err := s.bulkRun(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run.snapshot())
}

// cancelBulkReplay answers POST /api/v1/dead-letters/bulk/{id}/cancel: the
// item in progress finishes, no further item starts.
func (s *Server) cancelBulkReplay(c *echo.Context) error {
	run, err := s.bulkRun(c)
	if err != nil {
		return err
	}
	run.cancel()
	return c.JSON(http.StatusOK, run.snapshot())
}
