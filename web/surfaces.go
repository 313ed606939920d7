package web

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/approvals"
)

// maxSurfaceBody bounds a surface's request unless the surface says
// otherwise (bodyLimiter): Slack's interaction payloads and Telegram's
// updates are a few KiB.
const maxSurfaceBody = 1 << 20

// bodyLimiter is a surface whose requests may be larger (an inbound mail
// with its attachments, for the email surface).
type bodyLimiter interface{ MaxBody() int64 }

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
	limit := int64(maxSurfaceBody)
	if l, ok := in.(bodyLimiter); ok && l.MaxBody() > 0 {
		limit = l.MaxBody()
	}
	if req.ContentLength > limit {
		return errorf(http.StatusRequestEntityTooLarge, "the body is larger than the %d-byte limit of approval surface %s", limit, name)
	}
	// Room for the body first (limits.bodies_in_flight), as a webhook's.
	release, err := s.bodies.reserve(req.Context(), bodyReserve(req.ContentLength, limit), s.cfg.Limits.BodyWait)
	if err != nil {
		return s.busy(c)
	}
	defer release()
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, "the body is larger than the %d-byte limit of approval surface %s", limit, name)
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
