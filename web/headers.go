package web

import (
	"github.com/labstack/echo/v5"
)

// hstsValue asks browsers to use https only for two years. It leaves out
// includeSubDomains: handoff does not own the other hosts of its domain.
const hstsValue = "max-age=63072000"

// secureHeaders sets what every answer carries, before the handler runs so
// that a handler may override it: nosniff, so a JSON answer holding a
// customer's text is never sniffed into a page; no-store, so answers full of
// customer messages stay out of shared and browser caches (static files
// set their own long cache); and, with an https base_url, HSTS.
func (s *Server) secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	https := s.https()
	return func(c *echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		if https {
			h.Set("Strict-Transport-Security", hstsValue)
		}
		return next(c)
	}
}
