package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
)

// backupName names a downloaded snapshot by date and time.
func (s *Server) backupName() string {
	return "handoff-" + s.now().UTC().Format("20060102T150405Z") + ".db"
}

// downloadBackup answers GET /api/v1/backup (and the dashboard's download):
// a consistent snapshot streamed from one read transaction while webhooks
// keep arriving. Its SHA-256 follows as the X-Backup-SHA256 trailer.
func (s *Server) downloadBackup(c *echo.Context) error {
	w := c.Response()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", s.backupName()))
	h.Set("Cache-Control", "no-store")
	h.Set("Trailer", "X-Backup-SHA256")
	// A large database streams for longer than the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	_, sum, err := s.st.Backup(w)
	s.metrics.Download(err == nil)
	if err != nil {
		// The status is sent; a broken stream is all the client can be
		// told. Abort the connection rather than end the body cleanly, so
		// no client takes a truncated snapshot for a whole one.
		s.log.Error("backup download failed", "err", err)
		panic(http.ErrAbortHandler)
	}
	h.Set("X-Backup-SHA256", sum)
	return nil
}
