package web

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/approvals"
	"github.com/handoff/handoff/static"
)

// Web Push (approvals.webpush): the queue page's opt-in. GET /sw.js is the
// service worker (its scope the whole dashboard); POST /push/subscribe and
// /push/unsubscribe take the browser's PushSubscription as JSON, behind
// the session and its CSRF token like every dashboard POST. A push only
// opens the draft's card: no route here decides anything.

// maxPushBody bounds a subscription (an endpoint and two keys: under 4 KiB).
const maxPushBody = 8 << 10

// webPush is the configured Web Push surface; nil without one.
func (s *Server) webPush() *approvals.WebPush {
	if s.surfaces == nil {
		return nil
	}
	w, _ := s.surfaces.WebPush()
	return w
}

// pushKey is the VAPID public key the queue page subscribes with, "" when
// Web Push is not configured (or its keys cannot be read: logged, and the
// page offers nothing).
func (s *Server) pushKey(c *echo.Context) string {
	w := s.webPush()
	if w == nil {
		return ""
	}
	k, err := w.PublicKey(c.Request().Context())
	if err != nil {
		s.log.Error("web push: the VAPID public key", slog.Any("err", err))
		return ""
	}
	return k
}

// serviceWorker answers GET /sw.js.
func (s *Server) serviceWorker(c *echo.Context) error {
	f := static.ServiceWorker()
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache") // a new build's worker is picked up at once
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Service-Worker-Allowed", "/")
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", f.Body)
}

// readPushBody reads a push request's JSON body, bounded.
func readPushBody(c *echo.Context) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxPushBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "a push subscription is at most %d bytes", maxPushBody)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "the body could not be read")
	}
	return body, nil
}

// subscribePush answers POST /push/subscribe: this browser's subscription,
// stored for the person logged in.
func (s *Server) subscribePush(c *echo.Context) error {
	w := s.webPush()
	if w == nil {
		return errorf(http.StatusNotFound, "web push is not configured (approvals.webpush)")
	}
	body, err := readPushBody(c)
	if err != nil {
		return err
	}
	if err := w.Subscribe(c.Request().Context(), who(c).Name, body); err != nil {
		var refusal *approvals.Refusal
		if errors.As(err, &refusal) {
			return errorf(http.StatusBadRequest, "%s", refusal.Sentence)
		}
		return err
	}
	return c.String(http.StatusOK, "Notifications of new drafts are on in this browser.\n")
}

// unsubscribePush answers POST /push/unsubscribe {"endpoint": …}.
func (s *Server) unsubscribePush(c *echo.Context) error {
	w := s.webPush()
	if w == nil {
		return errorf(http.StatusNotFound, "web push is not configured (approvals.webpush)")
	}
	body, err := readPushBody(c)
	if err != nil {
		return err
	}
	var in struct {
		Endpoint string `json:"endpoint"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Endpoint == "" {
		return errorf(http.StatusBadRequest, "the body is JSON with the subscription's endpoint")
	}
	if err := w.Unsubscribe(c.Request().Context(), who(c).Name, in.Endpoint); err != nil {
		return err
	}
	return c.String(http.StatusOK, "Notifications are off in this browser.\n")
}
