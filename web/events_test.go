package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoff/handoff/store"
)

func TestEventTimeline(t *testing.T) {
	e := newTestEnv(t, nil)
	code, ans := e.do(t, http.MethodPost, "/hooks/demo", "application/json", []byte(`{"id":"a/b c","from":"+15550001234","name":"Ada","text":"hi"}`), nil)
	if code != http.StatusAccepted {
		t.Fatalf("got %d %v", code, ans)
	}
	key := "demo:a/b c"
	path := "/api/v1/events/" + url.PathEscape(key)
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	var tl map[string]any
	eventually(t, "the draft job to complete", func() bool {
		code, tl = e.do(t, http.MethodGet, path, "", nil, auth)
		if code != http.StatusOK || tl["draft"] == nil {
			return false
		}
		jobs, _ := tl["jobs"].([]any)
		return len(jobs) == 1 && jobs[0].(map[string]any)["state"] == "completed"
	})
	ev := tl["event"].(map[string]any)
	if ev["key"] != key || ev["correlation_id"] != ans["correlation_id"] {
		t.Errorf("event %v, want key %q and correlation %v", ev, key, ans["correlation_id"])
	}
	jobs := tl["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("got %d jobs, want 1", len(jobs))
	}
	job := jobs[0].(map[string]any)
	attempts := job["attempts"].([]any)
	if job["kind"] != "draft" || job["state"] != "completed" || len(attempts) != 1 {
		t.Errorf("job %v, want one completed draft attempt", job)
	}
	draft := tl["draft"].(map[string]any)
	execID := attempts[0].(map[string]any)["execution_id"]
	if draft["status"] != "pending_approval" || draft["execution_id"] != execID || draft["prompt_version"] != "v1" || !strings.Contains(draft["text"].(string), "Ada") {
		t.Errorf("draft %v, want pending_approval by execution %v", draft, execID)
	}

	tests := []struct {
		name   string
		path   string
		header http.Header
		status int
		want   string
	}{
		{"no token", path, nil, 401, "Authorization"},
		{"wrong token", path, http.Header{"Authorization": {"Bearer nope"}}, 401, "not valid"},
		{"basic auth", path, http.Header{"Authorization": {"Basic eDp5"}}, 401, "Bearer"},
		{"unknown event", "/api/v1/events/demo:none", auth, 404, `"demo:none"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ans := e.do(t, http.MethodGet, tt.path, "", nil, tt.header)
			msg, _ := ans["error"].(string)
			if code != tt.status || !strings.Contains(msg, tt.want) {
				t.Errorf("got %d %v, want %d with %q", code, ans, tt.status, tt.want)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	e := newTestEnv(t, nil)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, ans := e.do(t, http.MethodGet, p, "", nil, nil); code != http.StatusOK {
			t.Errorf("%s: got %d %v", p, code, ans)
		}
	}
	// A store that cannot commit: /readyz says so, /healthz (the process) does not.
	closed, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	srv, err := New(Deps{Config: e.cfg, Store: closed, Jobs: e.runner, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if rec := serveOnce(srv, http.MethodGet, "/readyz", "", ""); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot commit") {
		t.Errorf("/readyz on a closed store: %d %s, want 503 naming the problem", rec.Code, rec.Body)
	}
	if rec := serveOnce(srv, http.MethodGet, "/healthz", "", ""); rec.Code != http.StatusOK {
		t.Errorf("/healthz on a closed store: %d, want 200", rec.Code)
	}
}

func TestNoTokenConfigured(t *testing.T) {
	e := newTestEnv(t, nil)
	srv, err := New(Deps{Config: e.cfg, Store: e.st, Jobs: e.runner, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// The token the other servers accept: with none configured, it is refused.
	rec := serveOnce(srv, http.MethodGet, "/api/v1/events/demo:x", "", testToken)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("with no HANDOFF_API_TOKEN set, a bearer token got %d, want 401", rec.Code)
	}
	if rec := serveOnce(e.srv, http.MethodGet, "/api/v1/events/demo:x", "", testToken); rec.Code != http.StatusNotFound {
		t.Errorf("control: the same token on a server that has it got %d, want 404 (authorized, no such event)", rec.Code)
	}
}
