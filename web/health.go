package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
)

// healthz answers while the process is up.
func (s *Server) healthz(c *echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when a write commits: it goes through the same
// committer as every webhook.
func (s *Server) readyz(c *echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.st.Ping(ctx); err != nil {
		return &apiError{status: http.StatusServiceUnavailable, msg: "the store cannot commit", err: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
