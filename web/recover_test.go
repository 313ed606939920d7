package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v5"
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
