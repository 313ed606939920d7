package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// TestPanicIsA500: a handler that panics answers the usual JSON error
// sentence with 500 instead of dropping the connection.
func TestPanicIsA500(t *testing.T) {
	e := newTestEnv(t, nil)
	e.srv.e.GET("/test-panic", func(*echo.Context) error { panic("boom") })
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/test-panic", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"error":"something went wrong on our side`) {
		t.Errorf("a panicking handler answered %d %s, want 500 with the error sentence", rec.Code, rec.Body)
	}
}

// TestRouterErrorsAreSentences: an unknown route and a wrong method answer
// the JSON error with a sentence naming the request.
func TestRouterErrorsAreSentences(t *testing.T) {
	e := newTestEnv(t, nil)
	tests := []struct {
		method, path string
		status       int
		want         string
	}{
		{http.MethodGet, "/api/v1/nothing-here", http.StatusNotFound, "there is no GET /api/v1/nothing-here"},
		{http.MethodGet, "/hooks/demo", http.StatusMethodNotAllowed, "GET is not allowed on /hooks/demo"},
	}
	for _, tt := range tests {
		code, ans := e.do(t, tt.method, tt.path, "", nil, http.Header{"Authorization": {"Bearer " + testToken}})
		if msg, _ := ans["error"].(string); code != tt.status || msg != tt.want {
			t.Errorf("%s %s: %d %v, want %d %q", tt.method, tt.path, code, ans, tt.status, tt.want)
		}
	}
}

// TestRouterErrorsAreHTMLToBrowsers: a browser that asks for a page that
// does not exist gets the error page with the sentence (htmx a fragment for
// #flash); the API and the webhooks still answer it JSON.
func TestRouterErrorsAreHTMLToBrowsers(t *testing.T) {
	e := newTestEnv(t, nil)
	tests := []struct {
		method, path string
		hx           bool
		status       int
		wantType     string
		want         string // in the body: a <p> of the page, or the JSON sentence
	}{
		{http.MethodGet, "/nope", false, http.StatusNotFound, "text/html", "<p>there is no GET /nope</p>"},
		{http.MethodDelete, "/drafts", false, http.StatusMethodNotAllowed, "text/html", "<p>DELETE is not allowed on /drafts</p>"},
		{http.MethodGet, "/nope", true, http.StatusNotFound, "text/html", `<p class="notice error">there is no GET /nope</p>`},
		{http.MethodGet, "/api/v1/nope", false, http.StatusNotFound, "application/json", `{"error":"there is no GET /api/v1/nope"}`},
		{http.MethodGet, "/hooks/demo", false, http.StatusMethodNotAllowed, "application/json", `{"error":"GET is not allowed on /hooks/demo"}`},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.path, nil)
		req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		req.Header.Set("Authorization", "Bearer "+testToken) // past the API's check, to its router
		if tt.hx {
			req.Header.Set("HX-Request", "true")
		}
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		ct, body := rec.Header().Get("Content-Type"), rec.Body.String()
		if rec.Code != tt.status || !strings.HasPrefix(ct, tt.wantType) || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s (htmx %v): %d %q %.300s; want %d %s with %s", tt.method, tt.path, tt.hx, rec.Code, ct, body, tt.status, tt.wantType, tt.want)
		}
		if got := rec.Header().Get("HX-Retarget"); tt.hx != (got == "#flash") {
			t.Errorf("%s %s (htmx %v): HX-Retarget %q", tt.method, tt.path, tt.hx, got)
		}
	}
}

// TestBulkRunsAreKept: a finished bulk run stays readable as its record
// (retention leaves the bulk bucket alone), and a cancel of a finished run
// answers it unchanged.
func TestBulkRunsAreKept(t *testing.T) {
	e := newTestEnv(t, nil)
	code, ans := apiPost(t, e, "/api/v1/dead-letters/replay", `{}`)
	if code != http.StatusAccepted || ans["state"] != "running" || ans["total"] != float64(0) {
		t.Fatalf("bulk over an empty list: %d %v, want 202 running over 0", code, ans)
	}
	path := "/api/v1/dead-letters/bulk/" + ans["id"].(string)
	var st map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		st = apiGet(t, e, path)
		return st["state"] != "running"
	}, "the empty run to end")
	if st["state"] != "done" {
		t.Fatalf("empty run: %v, want done", st)
	}
	if code, ans := apiPost(t, e, path+"/cancel", ""); code != http.StatusOK || ans["state"] != "done" {
		t.Errorf("cancel of a finished run: %d %v, want 200 done", code, ans)
	}
	var run store.BulkRun
	if err := e.st.View(func(tx *store.Tx) error {
		var err error
		run, err = tx.BulkRun(ans["id"].(string))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if run.State != store.BulkDone || run.Cancelled || run.FinishedAt == nil {
		t.Errorf("stored run %+v, want done, not cancelled, with its end", run)
	}
}
