package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/workers"
)

const testToken = "test-token-1234"

// NewApp builds the whole process for cfg, wired by package app exactly as
// serve wires it, with now as the HTTP clock and apiToken accepted; it is
// not started yet, and the test's end stops it and checks its file. The
// tests of package web cannot import app, which imports web: app_test.go,
// an external test file of this folder (package web_test), can, and sets
// NewApp when the test binary starts.
var NewApp func(t *testing.T, cfg *config.Config, now func() time.Time, apiToken string) App

// App is what these tests use of the whole process (an *app.App).
type App interface {
	Start(context.Context) error
	Addr() net.Addr
	Store() *store.Store
	Web() *Server
	Jobs() *jobs.Runner
	BulkReplay() *workers.BulkReplayJob
	Stop(context.Context) error
}

// testEnv is the whole process on a real bbolt file, served over real HTTP.
type testEnv struct {
	url     string
	st      *store.Store
	runner  *jobs.Runner
	cfg     *config.Config
	srv     *Server
	metrics *Metrics
	app     App
}

// envOptions are what newEnv takes beyond a config.
type envOptions struct {
	now        func() time.Time // the server's clock; nil: time.Now
	metricsNow func() time.Time // the clock of the scrape-time gauges; nil: now
	pause      func(item int)   // holds every bulk replay before each item
	// pauseCtx is pause with the job's context, which ends when the
	// runner stops: a test can hold a run until the process stops.
	pauseCtx func(ctx context.Context, item int)
	// coalesce keeps the channels' quiet periods; otherwise every channel
	// drafts at once (coalesce 0), as the tests before turns expect.
	coalesce bool
	// undo keeps cfg's undo_window; otherwise approvals are sent at once
	// (undo_window 0), as the tests before undo expect.
	undo bool
}

// newTestEnv starts the whole process with cfg (nil: the demo config).
func newTestEnv(t *testing.T, cfg *config.Config) *testEnv {
	t.Helper()
	e, _ := newEnv(t, cfg, envOptions{})
	return e
}

// newEnv starts the whole process (NewApp) for cfg (nil: the demo config)
// with two workers and retries after milliseconds, in a temporary folder
// that becomes cfg.DataDir. It also returns the server.
func newEnv(t *testing.T, cfg *config.Config, o envOptions) (*testEnv, *Server) {
	t.Helper()
	if NewApp == nil {
		t.Fatal("NewApp is not set: app_test.go (package web_test) sets it")
	}
	if cfg == nil {
		cfg = config.Default()
	}
	cfg.DataDir = t.TempDir()
	cfg.Workers = 2
	cfg.Retry.BaseDelay, cfg.Retry.MaxDelay = time.Millisecond, 10*time.Millisecond
	if !o.undo {
		cfg.UndoWindow = 0
	}
	if !o.coalesce {
		for i := range cfg.Channels {
			cfg.Channels[i].Coalesce = 0 // drafts at once: only the turn tests wait for a quiet period
		}
	}
	a := NewApp(t, cfg, o.now, testToken)
	srv := a.Web()
	// Set before Start: no job can race with them.
	switch {
	case o.pauseCtx != nil:
		a.BulkReplay().Pause = o.pauseCtx
	case o.pause != nil:
		a.BulkReplay().Pause = func(_ context.Context, i int) { o.pause(i) }
	}
	if o.metricsNow != nil {
		// Swap the gauges' collector for one on the other clock; the
		// registry matches collectors by what they describe.
		if !srv.metrics.reg.Unregister(&storeCollector{}) {
			t.Fatal("the metrics have no store collector to replace")
		}
		srv.metrics.reg.MustRegister(&storeCollector{st: a.Store(), cfg: cfg, now: o.metricsNow, m: srv.metrics})
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{url: "http://" + a.Addr().String(), st: a.Store(), runner: a.Jobs(), cfg: cfg, srv: srv, metrics: srv.metrics, app: a}
	return e, srv
}

// do sends a request and decodes a JSON answer into a map.
func (e *testEnv) do(t *testing.T, method, path, contentType string, body []byte, header http.Header) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %q", method, path, raw)
		}
	}
	return resp.StatusCode, out
}
