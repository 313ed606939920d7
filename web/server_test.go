package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
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
	url    string
	st     *store.Store
	runner *jobs.Runner
	cfg    *config.Config
	srv    *Server
}

// newTestEnv starts the whole HTTP side with cfg (nil: the demo config).
func newTestEnv(t *testing.T, cfg *config.Config) *testEnv {
	t.Helper()
	if cfg == nil {
		cfg = config.Default()
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	d, err := drafter.NewTemplate(cfg.Drafter.Template, cfg.Drafter.PromptVersion, 0)
	if err != nil {
		t.Fatal(err)
	}
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: st})
	if err != nil {
		t.Fatal(err)
	}
	kinds, _ := jobs.Kinds(st, cfg, d, providers)
	runner := jobs.NewRunner(st, kinds,
		jobs.Options{Workers: 2, Backoff: jobs.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}, Logger: log})
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Deps{Config: cfg, Store: st, Jobs: runner, Logger: log, APIToken: testToken})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := runner.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := st.Check(); err != nil {
			t.Errorf("store check after test: %v", err)
		}
		st.Close()
	})
	return &testEnv{url: hs.URL, st: st, runner: runner, cfg: cfg, srv: srv}
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
