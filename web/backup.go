package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/offsite"
	"github.com/handoff/handoff/store"
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

// Backups is what the backups page asks of the process (app implements
// it): a backup now with its offsite copy, the offsite target, and a
// restore while serving.
type Backups interface {
	// BackupNow writes a backup as the schedule does and, when a target
	// is set, copies it offsite and verifies the copy.
	BackupNow(ctx context.Context) (BackupResult, error)
	// Offsite is the configured target, or nil.
	Offsite() Offsite
	// Restore verifies the file at src and swaps it in for the live
	// database while serving; it returns where the old database is kept.
	Restore(ctx context.Context, src string) (kept string, err error)
}

// Offsite is an S3-compatible target (offsite.Target).
type Offsite interface {
	URL() string
	Keep() int
	List(ctx context.Context) ([]offsite.Copy, error)
	Download(ctx context.Context, name string, w io.Writer) (offsite.Copy, error)
}

// BackupResult is a backup written now: the file and, when a target is
// set, its verified offsite copy and, when deleting the old copies past
// keep failed after it, why.
type BackupResult struct {
	File       store.BackupFile `json:"file"`
	SHA256     string           `json:"sha256"`
	Copy       *offsite.Copy    `json:"offsite,omitempty"`
	PruneError string           `json:"offsite_prune_error,omitempty"`
}

// errNoBackups answers the backup-now and restore routes of a server
// built without the process side (a bare web.New).
var errNoBackups = errorf(http.StatusServiceUnavailable, "this server cannot take or restore backups itself")

// backupNowAPI answers POST /api/v1/backups: a backup written now and,
// when backups.target is set, copied offsite and verified there; what
// `handoff backup --to s3` calls.
func (s *Server) backupNowAPI(c *echo.Context) error {
	if s.backups == nil {
		return errNoBackups
	}
	if c.QueryParam("to") == "s3" && s.backups.Offsite() == nil {
		return errorf(http.StatusConflict, "no offsite target is configured: set backups.target (s3://bucket/prefix) and its credentials")
	}
	res, err := s.backups.BackupNow(c.Request().Context())
	if err != nil {
		return refused(err, http.StatusBadGateway)
	}
	return c.JSON(http.StatusOK, res)
}

// offsiteListAPI answers GET /api/v1/backups/offsite: the copies in the
// bucket, newest first.
func (s *Server) offsiteListAPI(c *echo.Context) error {
	if s.backups == nil || s.backups.Offsite() == nil {
		return errorf(http.StatusConflict, "no offsite target is configured: set backups.target (s3://bucket/prefix) and its credentials")
	}
	list, err := s.backups.Offsite().List(c.Request().Context())
	if err != nil {
		return refused(err, http.StatusBadGateway)
	}
	if list == nil {
		list = []offsite.Copy{}
	}
	return c.JSON(http.StatusOK, map[string]any{"target": s.backups.Offsite().URL(), "copies": list})
}
