package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/offsite"
	"github.com/handoff/handoff/store"
)

// backupName names a downloaded snapshot by date and time.
func (s *Server) backupName() string {
	return "handoff-" + s.now().UTC().Format("20060102T150405Z") + ".db"
}

// downloadBackup answers GET /api/v1/backup (and the dashboard's
// download): a consistent snapshot, copied first to a temporary file in
// the data folder (store.Snapshot: the read transaction lasts only as
// long as that local copy), then streamed from the copy, however slowly
// the client reads, with no transaction open. Its SHA-256 is known before
// the first byte goes out: it is sent as the X-Backup-SHA256 header and,
// as before, trailer. A client that reads nothing for the idle bound is
// cut off (deadlineWriter); the copy is removed either way.
func (s *Server) downloadBackup(c *echo.Context) error {
	if !s.downloads.take() {
		return errorf(http.StatusTooManyRequests, "%d backup downloads are running already, each with its own copy of the database on disk; try again when one has finished", maxDownloads)
	}
	defer s.downloads.done()
	t0 := time.Now()
	by := actor(c)
	snap, err := s.st.Snapshot(s.cfg.DataDir)
	if err != nil {
		s.metrics.Download(false)
		s.log.Error("backup download failed", "who", by, "stage", "copy", "dir", s.cfg.DataDir, "err", err)
		return errorf(http.StatusServiceUnavailable, "the snapshot could not be copied into the data folder to be sent (%v); nothing was sent", err)
	}
	defer os.Remove(snap.Path)
	f, err := os.Open(snap.Path)
	if err != nil {
		s.metrics.Download(false)
		s.log.Error("backup download failed", "who", by, "stage", "open the copy", "err", err)
		return err
	}
	defer f.Close()
	w := c.Response()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", s.backupName()))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Backup-SHA256", snap.SHA256)
	h.Set("Trailer", "X-Backup-SHA256")
	dw := s.downloads.writer(w)
	w.WriteHeader(http.StatusOK)
	n, err := io.Copy(dw, f) // dw cuts every write to streamChunk
	if err == nil && n != snap.Size {
		err = fmt.Errorf("the copy holds %d bytes, %d were written to it", n, snap.Size)
	}
	s.metrics.Download(err == nil)
	if err != nil {
		// The status is sent; a broken stream is all the client can be
		// told. Abort the connection rather than end the body cleanly, so
		// no client takes a truncated snapshot for a whole one.
		s.log.Error("backup download failed", "who", by, "stage", "send", "bytes", snap.Size, "sent", n, "sha256", snap.SHA256, "took", time.Since(t0).Round(time.Millisecond), "read_tx", snap.Held.Round(time.Millisecond), "err", dw.why(err))
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup download finished", "who", by, "bytes", n, "sha256", snap.SHA256, "took", time.Since(t0).Round(time.Millisecond), "read_tx", snap.Held.Round(time.Millisecond))
	return nil
}

// maxDownloads bounds the snapshot downloads that run at once: each holds
// a whole copy of the database in the data folder while it streams.
const maxDownloads = 2

// streamChunk is the most one write to a downloading client carries, so
// the idle bound is measured against small steps of progress.
const streamChunk = 64 << 10

// defaultDownloadIdle is how long a download waits on a client that
// takes nothing before it cuts the connection.
const defaultDownloadIdle = time.Minute

// downloads counts the snapshot downloads running and holds the idle
// bound; its zero value is ready (the bound then defaultDownloadIdle).
type downloads struct {
	mu      sync.Mutex
	idle    time.Duration // zero: defaultDownloadIdle; tests shorten it (setIdle)
	running int
}

// setIdle sets the idle bound of the downloads that start from now on.
func (d *downloads) setIdle(idle time.Duration) {
	d.mu.Lock()
	d.idle = idle
	d.mu.Unlock()
}

func (d *downloads) take() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running >= maxDownloads {
		return false
	}
	d.running++
	return true
}

func (d *downloads) done() {
	d.mu.Lock()
	d.running--
	d.mu.Unlock()
}

// writer wraps w so that each write gets its own deadline, the idle bound
// from now: a client that keeps reading is never cut off, however long
// the whole takes, and one that stops is, once the bound passes.
func (d *downloads) writer(w http.ResponseWriter) *deadlineWriter {
	d.mu.Lock()
	idle := d.idle
	d.mu.Unlock()
	if idle <= 0 {
		idle = defaultDownloadIdle
	}
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), idle: idle}
}

// deadlineWriter is an http.ResponseWriter whose every write must finish
// within idle of its start; writes are cut into streamChunk pieces. It
// remembers the first write that failed, and counts the body's bytes
// written (sent), which a range request makes fewer than the file's.
type deadlineWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
	err  error
	sent int64
	code int // the status written, 0 until then
}

func (w *deadlineWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), streamChunk)
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		w.sent += int64(m)
		if err != nil {
			w.err = err
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// why words a failed stream: a timeout is the client that stopped reading.
func (w *deadlineWriter) why(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the client read nothing for %s and was cut off: %w", w.idle, err)
	}
	return err
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
	// database while serving; it says where the old database is kept.
	Restore(ctx context.Context, src string) (Restored, error)
}

// Restored is a restore done: the file restored (its size and SHA-256),
// where the database it replaced is kept, and the databases kept by
// earlier restores that were deleted (only the newest is kept).
type Restored struct {
	Bytes  int64
	SHA256 string
	Kept   string
	Pruned []string
	// PruneError says why an earlier kept database could not be deleted.
	PruneError string
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
