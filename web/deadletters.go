package web

import (
	"context"
	"net/http"
	"strings"
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
	// noReconcile: the dashboard's list, which leaves the replies to
	// reconcile to /reconcile (the API lists them as the contract says).
	noReconcile bool
}

func (s *Server) storeFilter(f deadLetterFilter) (store.DeadLetterFilter, error) {
	out := store.DeadLetterFilter{Kind: f.Kind, Channel: f.Channel, Error: f.Error, Limit: 1000, NoReconcile: f.noReconcile}
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
	dls, err := s.outbox.DeadLetters(f)
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
	case "lookup":
		looked, err := s.lookUp(c, id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"status": string(looked.Row.Status), "id": id, "verdict": looked.Verdict, "why": looked.Why})
	}
	return errorf(http.StatusNotFound, "%q is not an action on a dead letter (use replay, cancel or lookup)", action)
}

// lookUp asks the provider of reply id, once, whether it has it, and
// settles the row by the answer (delivery.LookUp), as the person; shared
// by the API and the dashboard.
func (s *Server) lookUp(c *echo.Context, id string) (delivery.Looked, error) {
	o, err := s.st.OutboxRow(id)
	if err != nil {
		return delivery.Looked{}, missing(err, "there is no reply %q to look up", id)
	}
	looked, err := s.outbox.LookUp(c.Request().Context(), id, s.providers[o.Provider], actor(c), c.RealIP(), s.now().UTC())
	return looked, missing(err, "there is no reply %q to look up", id)
}

// lookupProviders names the providers that can find a send by our
// reference, for the pages to offer a lookup where one can settle a row.
func (s *Server) lookupProviders() map[string]bool {
	out := map[string]bool{}
	for name, p := range s.providers {
		if p.Capabilities().Lookup {
			out[name] = true
		}
	}
	return out
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

// replay is the one replay shared by the API and the dashboard (the bulk
// replay job calls the same delivery Replay).
func (s *Server) replay(ctx context.Context, id string, r store.Replay) (store.DeadLetter, error) {
	dl, err := s.outbox.Replay(ctx, id, r)
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
	err := s.outbox.Dismiss(ctx, id, store.Dismissal{By: by, At: s.now().UTC(), From: from, Reason: reason})
	return missing(err, "there is no dead letter %q", id)
}

// bulkStatus is what a bulk replay has done so far, as the API answers it.
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

// statusOf is the answer for the stored run.
func statusOf(run store.BulkRun) bulkStatus {
	st := bulkStatus{ID: run.ID, State: string(run.State), Total: run.Total,
		Replayed: append([]string{}, run.Replayed...), Skipped: []bulkSkipped{}, Failed: []bulkSkipped{}}
	for _, it := range run.Skipped {
		st.Skipped = append(st.Skipped, bulkSkipped{ID: it.ID, Why: it.Why})
	}
	for _, it := range run.Failed {
		st.Failed = append(st.Failed, bulkSkipped{ID: it.ID, Why: it.Why})
	}
	return st
}

// startBulkReplay answers POST /api/v1/dead-letters/replay with a filter:
// it replays the items that are safe, skips the others saying why, and runs
// in the background (202 with its id) so it can be watched and cancelled.
func (s *Server) startBulkReplay(c *echo.Context) error {
	var body deadLetterFilter
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	run, err := s.startBulk(c.Request().Context(), body, actor(c), c.RealIP())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, statusOf(run))
}

// startBulk selects the items matching f and starts the bulk replay job
// over them, as by; shared by the API and the dashboard. The run's record
// and its job commit together, so a run that was answered for survives a
// restart; the job replays the safe items one at a time.
func (s *Server) startBulk(ctx context.Context, body deadLetterFilter, by, from string) (store.BulkRun, error) {
	f, err := s.storeFilter(body)
	if err != nil {
		return store.BulkRun{}, err
	}
	items, err := s.outbox.DeadLetters(f)
	if err != nil {
		return store.BulkRun{}, err
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	filter := store.BulkFilter{Kind: body.Kind, Channel: body.Channel, Error: body.Error, OlderThan: body.OlderThan}
	return s.startRun(ctx, filter, ids, by, from)
}

// maxSelected bounds a replay of selected items: a few pages of the list.
const maxSelected = 500

// startSelected starts the bulk replay job over the items a person ticked,
// in the order given, each once: the same durable run as a replay by
// filter, so the safe ones are replayed and the others skipped saying why.
func (s *Server) startSelected(ctx context.Context, ids []string, by, from string) (store.BulkRun, error) {
	var picked []string
	seen := map[string]bool{} // a 64 KB form holds thousands of ids: no quadratic scan
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !seen[id] {
			seen[id] = true
			picked = append(picked, id)
		}
	}
	switch {
	case len(picked) == 0:
		return store.BulkRun{}, errorf(http.StatusBadRequest, "select at least one dead letter to replay")
	case len(picked) > maxSelected:
		return store.BulkRun{}, errorf(http.StatusBadRequest, "select at most %d dead letters at a time, not %d", maxSelected, len(picked))
	}
	return s.startRun(ctx, store.BulkFilter{}, picked, by, from)
}

// startRun stores a bulk replay over ids and enqueues its job.
func (s *Server) startRun(ctx context.Context, filter store.BulkFilter, ids []string, by, from string) (store.BulkRun, error) {
	run := store.BulkRun{
		ID: ulid.Make().String(), Filter: filter, Total: len(ids), Items: ids,
		Replayed: []string{}, Skipped: []store.BulkSkip{}, Failed: []store.BulkSkip{}, StartedAt: s.now().UTC(),
	}
	// The queue keeps real time, whatever the HTTP side's clock says.
	now := time.Now()
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		r := run // fn may run twice: start from the same run each time
		return s.outbox.StartBulkReplayTx(tx, &r, by, from, now)
	})
	if err != nil {
		return store.BulkRun{}, err
	}
	run.State = store.BulkRunning
	s.jobs.Wake()
	return run, nil
}

// lookupBulk reads a bulk replay's record.
func (s *Server) lookupBulk(id string) (store.BulkRun, error) {
	var run store.BulkRun
	err := s.st.View(func(tx *store.Tx) error {
		var err error
		run, err = tx.BulkRun(id)
		return err
	})
	return run, missing(err, "there is no bulk replay %q", id)
}

// cancelBulk asks the run id to stop before its next item.
func (s *Server) cancelBulk(ctx context.Context, id string) (store.BulkRun, error) {
	var run store.BulkRun
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		run, err = delivery.CancelBulkReplay(tx, id)
		return err
	})
	return run, missing(err, "there is no bulk replay %q", id)
}

// bulkReplayStatus answers GET /api/v1/dead-letters/bulk/{id}.
func (s *Server) bulkReplayStatus(c *echo.Context) error {
	run, err := s.lookupBulk(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, statusOf(run))
}

// cancelBulkReplay answers POST /api/v1/dead-letters/bulk/{id}/cancel: the
// item in progress finishes, no further item starts.
func (s *Server) cancelBulkReplay(c *echo.Context) error {
	run, err := s.cancelBulk(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, statusOf(run))
}
