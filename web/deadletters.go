package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/delivery"
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

// filterFrom reads the list's filters from query parameters or form fields.
func filterFrom(get func(string) string) deadLetterFilter {
	return deadLetterFilter{
		Kind: get("kind"), Channel: get("channel"),
		Error: strings.TrimSpace(get("error")), OlderThan: strings.TrimSpace(get("older_than")),
	}
}

// listDeadLetters answers GET /api/v1/dead-letters?kind=&channel=&error=&older_than=.
func (s *Server) listDeadLetters(c *echo.Context) error {
	f, err := s.storeFilter(filterFrom(c.QueryParam))
	if err != nil {
		return err
	}
	dls, err := delivery.New(s.st, s.cfg).DeadLetters(f)
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
	id, action, err := splitAction(c.Param("*"), "use /api/v1/dead-letters/{id}/replay or /{id}/cancel")
	if err != nil {
		return err
	}
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
	dl, err := s.replayItem(c.Request().Context(), id, body.Confirm, body.Regenerate, actor(c), c.RealIP())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "replayed", "id": id, "kind": dl.Kind, "why": dl.Why})
}

// replayItem is a person's replay of one item, shared by the API and the
// dashboard: confirm, when given, must repeat the id (it is what makes an
// unsafe item replayable). Only a draft job can be regenerated; the store
// checks that in the replay's own transaction.
func (s *Server) replayItem(ctx context.Context, id, confirm string, regenerate bool, by, from string) (store.DeadLetter, error) {
	if confirm != "" && confirm != id {
		return store.DeadLetter{}, errorf(http.StatusBadRequest, "confirm must repeat the id being replayed (%q), not %q", id, confirm)
	}
	return s.replay(ctx, id, store.Replay{By: by, At: s.now().UTC(), From: from, Regenerate: regenerate, Confirmed: confirm == id})
}

// replay is the one replay shared by the API, the bulk replay and the dashboard.
func (s *Server) replay(ctx context.Context, id string, r store.Replay) (store.DeadLetter, error) {
	dl, err := delivery.New(s.st, s.cfg).Replay(ctx, id, r)
	if err != nil {
		return dl, missing(err, "there is no dead letter %q", id)
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
	if err := s.cancelItem(c.Request().Context(), id, body.Reason, actor(c), c.RealIP()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "cancelled", "id": id})
}

// cancelItem takes one item off the list with a reason, shared by the API
// and the dashboard.
func (s *Server) cancelItem(ctx context.Context, id, reason, by, from string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return errorf(http.StatusBadRequest, "a cancel needs a reason")
	}
	err := delivery.New(s.st, s.cfg).Dismiss(ctx, id, store.Dismissal{By: by, At: s.now().UTC(), From: from, Reason: reason})
	return missing(err, "there is no dead letter %q", id)
}

// bulkRun is one bulk replay, running in the background so it can be cancelled.
type bulkRun struct {
	mu     sync.Mutex
	st     bulkStatus
	cancel context.CancelFunc
}

// bulkStatus is what a bulk replay has done so far.
type bulkStatus struct {
	ID       string        `json:"id"`
	State    string        `json:"state"` // running, done, cancelled
	Total    int           `json:"total"`
	Replayed []string      `json:"replayed"`
	Skipped  []bulkSkipped `json:"skipped"`
	Failed   []bulkSkipped `json:"failed"`
}

type bulkSkipped struct {
	ID  string `json:"id"`
	Why string `json:"why"`
}

// status is a copy of the run's progress, safe to read while it goes on.
func (b *bulkRun) status() bulkStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.st
	out.Replayed = append([]string{}, b.st.Replayed...)
	out.Skipped = append([]bulkSkipped{}, b.st.Skipped...)
	out.Failed = append([]bulkSkipped{}, b.st.Failed...)
	return out
}

// bulkRuns keeps the bulk replays of this process.
type bulkRuns struct {
	mu   sync.Mutex
	runs map[string]*bulkRun
	// pause, when set (tests only), runs before item i of every run is
	// looked at, so a test can hold a run at a known point.
	pause func(i int)
	// running counts the runs' goroutines, so Stop can wait for them;
	// stopping, once Stop has cancelled them, refuses new runs.
	running  sync.WaitGroup
	stopping bool
}

// Stop cancels the bulk replays still running and waits until each has
// finished the item under way, or ctx ends. serve calls it after the HTTP
// server stopped and before the store closes.
func (s *Server) Stop(ctx context.Context) error {
	s.bulk.mu.Lock()
	for _, r := range s.bulk.runs {
		r.cancel()
	}
	s.bulk.stopping = true
	s.bulk.mu.Unlock()
	done := make(chan struct{})
	go func() { s.bulk.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("web: bulk replays still running: %w", ctx.Err())
	}
}

// startBulkReplay answers POST /api/v1/dead-letters/replay with a filter:
// it replays the items that are safe, skips the others saying why, and runs
// in the background (202 with its id) so it can be watched and cancelled.
func (s *Server) startBulkReplay(c *echo.Context) error {
	var body deadLetterFilter
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	run, err := s.startBulk(body, actor(c), c.RealIP())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, run.status())
}

// keepBulkRuns is how many finished bulk runs stay readable.
const keepBulkRuns = 50

// forgetFinished drops finished runs, oldest first (ids are ULIDs), until
// at most keep remain. The caller holds b.mu.
func (b *bulkRuns) forgetFinished(keep int) {
	var done []string
	for id, r := range b.runs {
		if r.status().State != "running" {
			done = append(done, id)
		}
	}
	slices.Sort(done)
	for _, id := range done[:max(0, len(done)-keep)] {
		delete(b.runs, id)
	}
}

// startBulk selects the items matching f and replays the safe ones in the
// background, one at a time, as by; shared by the API and the dashboard.
// The run outlives the request that started it.
func (s *Server) startBulk(body deadLetterFilter, by, from string) (*bulkRun, error) {
	f, err := s.storeFilter(body)
	if err != nil {
		return nil, err
	}
	items, err := delivery.New(s.st, s.cfg).DeadLetters(f)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &bulkRun{cancel: cancel, st: bulkStatus{
		ID: ulid.Make().String(), State: "running", Total: len(items),
		Replayed: []string{}, Skipped: []bulkSkipped{}, Failed: []bulkSkipped{},
	}}
	s.bulk.mu.Lock()
	if s.bulk.stopping {
		s.bulk.mu.Unlock()
		cancel()
		return nil, errorf(http.StatusServiceUnavailable, "the server is stopping; start the bulk replay again once it is back")
	}
	// Keep the runs a person may still be watching; forget finished ones
	// beyond the newest few, so the map cannot grow for ever.
	s.bulk.forgetFinished(keepBulkRuns)
	s.bulk.runs[run.st.ID] = run
	pause := s.bulk.pause
	s.bulk.running.Add(1)
	s.bulk.mu.Unlock()
	go func() {
		defer s.bulk.running.Done()
		defer cancel()
		for i, it := range items {
			if pause != nil {
				pause(i)
			}
			if ctx.Err() != nil {
				break
			}
			if !it.Safe {
				run.mu.Lock()
				run.st.Skipped = append(run.st.Skipped, bulkSkipped{ID: it.ID, Why: it.Why})
				run.mu.Unlock()
				continue
			}
			// The item under way finishes even when the run is cancelled meanwhile.
			_, err := s.replay(context.WithoutCancel(ctx), it.ID, store.Replay{By: by, At: s.now().UTC(), From: from})
			run.mu.Lock()
			if err != nil {
				status, msg := answerFor(err)
				if status >= 500 {
					s.log.Error("bulk replay: item failed", "run", run.st.ID, "item", it.ID, slog.Any("err", err))
				}
				run.st.Failed = append(run.st.Failed, bulkSkipped{ID: it.ID, Why: msg})
			} else {
				run.st.Replayed = append(run.st.Replayed, it.ID)
			}
			run.mu.Unlock()
		}
		run.mu.Lock()
		if ctx.Err() != nil {
			run.st.State = "cancelled"
		} else {
			run.st.State = "done"
		}
		run.mu.Unlock()
	}()
	return run, nil
}

// lookupBulk finds a bulk replay of this process.
func (s *Server) lookupBulk(id string) (*bulkRun, error) {
	s.bulk.mu.Lock()
	defer s.bulk.mu.Unlock()
	run, ok := s.bulk.runs[id]
	if !ok {
		return nil, errorf(http.StatusNotFound, "there is no bulk replay %q in this process", id)
	}
	return run, nil
}

// bulkReplayStatus answers GET /api/v1/dead-letters/bulk/{id}.
func (s *Server) bulkReplayStatus(c *echo.Context) error {
	run, err := s.lookupBulk(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run.status())
}

// cancelBulkReplay answers POST /api/v1/dead-letters/bulk/{id}/cancel: the
// item in progress finishes, no further item starts.
func (s *Server) cancelBulkReplay(c *echo.Context) error {
	run, err := s.lookupBulk(c.Param("id"))
	if err != nil {
		return err
	}
	run.cancel()
	return c.JSON(http.StatusOK, run.status())
}
