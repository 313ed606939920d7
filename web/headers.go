package web

import (
	"github.com/labstack/echo/v5"
	"github.com/oklog/ulid/v2"
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

// requestIDHeader names one request across a proxy's logs and ours: a
// caller's X-Request-Id is echoed back, and a request without a usable one
// gets a fresh id; the log line of a failed request carries it.
const requestIDHeader = "X-Request-Id"

// requestID echoes the caller's X-Request-Id (1 to 128 visible ASCII
// characters; anything else is replaced, so no log line can be forged
// through it) or mints one, on the answer and in the context.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		id := c.Request().Header.Get(requestIDHeader)
		if !usableRequestID(id) {
			id = ulid.Make().String()
		}
		c.Set(requestIDHeader, id)
		c.Response().Header().Set(requestIDHeader, id)
		return next(c)
	}
}

func usableRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// requestIDOf is the id requestID gave c.
func requestIDOf(c *echo.Context) string {
	id, _ := c.Get(requestIDHeader).(string)
	return id
}
