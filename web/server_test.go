package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/jobs/drafter"
	"github.com/handoff/handoff/jobs/provider"
	"github.com/handoff/handoff/store"
)

const testToken = "test-token-1234"

// testEnv is a real server on a real bbolt file, served over real HTTP.
type testEnv struct {
	url     string
	st      *store.Store
	runner  *jobs.Runner
	cfg     *config.Config
	srv     *Server
	metrics *Metrics
}

// envOptions are what newEnv takes beyond a config.
type envOptions struct {
	now        func() time.Time // the server's clock; nil: time.Now
	metricsNow func() time.Time // the clock of the scrape-time gauges; nil: now
	pause      func(item int)   // holds every bulk replay before each item
}

// newTestEnv starts the whole HTTP side with cfg (nil: the demo config).
func newTestEnv(t *testing.T, cfg *config.Config) *testEnv {
	t.Helper()
	e, _ := newEnv(t, cfg, envOptions{})
	return e
}

// newEnv starts the whole HTTP side wired the way serve wires it: the
// configured drafter (an OpenAI-compatible one when cfg says so) and one
// Metrics shared by the server, the runner (job attempts) and the drafter
// (model calls). The store lives in a temporary folder that becomes
// cfg.DataDir (nil cfg: the demo config). It also returns the server.
func newEnv(t *testing.T, cfg *config.Config, o envOptions) (*testEnv, *Server) {
	t.Helper()
	if cfg == nil {
		cfg = config.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.metricsNow == nil {
		o.metricsNow = o.now
	}
	cfg.DataDir = t.TempDir()
	st, err := store.Open(cfg.DataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := discardLogger()
	metrics := NewMetrics(st, cfg, o.metricsNow)
	var d jobs.Drafter
	switch cfg.Drafter.Kind {
	case "openai":
		d, err = drafter.NewOpenAI(drafter.OpenAIConfig{BaseURL: cfg.Drafter.BaseURL, Model: cfg.Drafter.Model, PromptVersion: cfg.Drafter.PromptVersion, Timeout: cfg.Drafter.Timeout})
	default:
		d, err = drafter.NewTemplate(cfg.Drafter.Template, cfg.Drafter.PromptVersion, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatal(err)
	}
	kinds, draftJob := jobs.Kinds(st, cfg, d, providers)
	draftJob.Observe = metrics.ModelCall
	runner := jobs.NewRunner(st, kinds, jobs.Options{
		Workers: 2, Backoff: jobs.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond},
		Logger: log, Observe: metrics.JobAttempt,
	})
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Deps{Config: cfg, Store: st, Jobs: runner, Logger: log, APIToken: testToken, Now: o.now, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	srv.bulk.pause = o.pause
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := runner.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := st.Check(); err != nil {
			t.Errorf("store check after test: %v", err)
		}
		st.Close()
	})
	return &testEnv{url: hs.URL, st: st, runner: runner, cfg: cfg, srv: srv, metrics: metrics}, srv
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

// eventually waits for cond with a deadline, checking on a short ticker.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
