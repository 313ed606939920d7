package web

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/approvals"
)

// maxSurfaceBody bounds a surface's request: Slack's interaction payloads
// and Telegram's updates are a few KiB; an inbound mail is the email
// surface's business and comes through /hooks.
const maxSurfaceBody = 1 << 20

// receiveSurface answers POST /surfaces/{surface}[/…]: the request goes to
// the approval surface of that name (package approvals), which verifies it
// (Slack's signature, Telegram's secret token) and decides through review.
// No session: the surface's own signature is the authentication.
func (s *Server) receiveSurface(c *echo.Context) error {
	name := c.Param("surface")
	var in approvals.Inbound
	ok := false
	if s.surfaces != nil {
		in, ok = s.surfaces.Inbound(name)
	}
	if !ok {
		return errorf(http.StatusNotFound, "there is no approval surface %q taking requests", name)
	}
	req := c.Request()
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, maxSurfaceBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, "the body is larger than the %d-byte limit of approval surfaces", maxSurfaceBody)
	}
	if err != nil {
		return errorf(http.StatusBadRequest, "the body could not be read")
	}
	ans := in.Receive(req.Context(), &approvals.Request{
		Path: c.Param("*"), Header: req.Header.Clone(), Query: req.URL.Query(), Body: body,
		RemoteIP: c.RealIP(), Now: s.now().UTC(),
	})
	ct := ans.ContentType
	if ct == "" {
		ct = "text/plain; charset=utf-8"
	}
	status := ans.Status
	if status == 0 {
		status = http.StatusOK
	}
	return c.Blob(status, ct, ans.Body)
}
