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

// favicon answers GET /favicon.ico, which browsers ask for on their own
// (a feed reader, a bookmark, a page without the head's icon link): a
// redirect to the hashed icon, so it is not a 404 nor a login page.
func (s *Server) favicon(c *echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=86400")
	return c.Redirect(http.StatusMovedPermanently, static.URL("favicon.svg"))
}
