package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealthSaysWhy: handoff health exits 0 on a 200 from /readyz, and on
// a 503 fails with the answer's own sentence (where to free space), so the
// container's health log says why.
func TestHealthSaysWhy(t *testing.T) {
	answer := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(answer)
		if answer == http.StatusOK {
			w.Write([]byte(`{"status":"ready"}`))
			return
		}
		w.Write([]byte(`{"error":"not ready: a write failed at 2026-12-02T00:00:00Z for lack of disk space (no space left on device): free space on the disk holding /data; writes and readiness come back once a write of that size commits"}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	c := runCLI(t, "", nil, "health", "--addr", addr)
	c.wantOK(t)
	if got := c.stdout.String(); got != "ready\n" {
		t.Errorf("stdout = %q; want ready", got)
	}
	answer = http.StatusServiceUnavailable
	c = runCLI(t, "", nil, "health", "--addr", addr)
	c.wantErr(t, "not ready: /readyz answered 503 Service Unavailable: a write failed at 2026-12-02T00:00:00Z for lack of disk space (no space left on device): free space on the disk holding /data")
	if strings.Count(c.err.Error(), "not ready") != 1 {
		t.Errorf("error %q says not ready twice", c.err)
	}
}
