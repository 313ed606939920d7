package web

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/static"
)

// staticFile answers GET /static/{name}.{hash}.{ext}. The name carries a
// hash of the content, so the answer may be cached for a year: a new
// build links to new names.
func (s *Server) staticFile(c *echo.Context) error {
	f, ok := static.Lookup(c.Param("name"))
	if !ok {
		return errorf(http.StatusNotFound, "there is no static file %q", c.Param("name"))
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	return c.Blob(http.StatusOK, f.Type, f.Body)
}
