package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
)

// get answers a GET with an optional bearer token: status and body.
func get(t *testing.T, url, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
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
	return resp.StatusCode, string(raw)
}

// TestMetricsAddr: with metrics_addr set, /metrics is served there without
// a token, and only /metrics; the main port still wants a token for it.
func TestMetricsAddr(t *testing.T) {
	cfg := config.Default()
	cfg.MetricsAddr = "127.0.0.1:0"
	a := apptest.Start(t, cfg, app.Deps{APIToken: token})
	if a.MetricsAddr() == nil {
		t.Fatal("no metrics listener")
	}
	side := "http://" + a.MetricsAddr().String()
	if code, body := get(t, side+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "handoff_drafts_waiting") {
		t.Errorf("metrics_addr /metrics: %d %.200s, want the metrics without a token", code, body)
	}
	for _, path := range []string{"/api/v1/backup", "/readyz", "/"} {
		if code, _ := get(t, side+path, token); code != http.StatusNotFound {
			t.Errorf("metrics_addr %s: %d, want 404: it serves /metrics alone", path, code)
		}
	}
	main := apptest.URL(a)
	if code, _ := get(t, main+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("main port /metrics without a token: %d, want 401", code)
	}
	if code, _ := get(t, main+"/metrics", token); code != http.StatusOK {
		t.Errorf("main port /metrics with an admin token: %d, want 200", code)
	}
	if b := apptest.Start(t, nil, app.Deps{APIToken: token}); b.MetricsAddr() != nil {
		t.Errorf("a metrics listener without metrics_addr: %v", b.MetricsAddr())
	}
}
