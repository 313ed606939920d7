package web

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// backupsPage answers GET /backups: a snapshot to download now, the
// schedule and the last result, and the scheduled backups on disk with
// their SHA-256.
func (s *Server) backupsPage(c *echo.Context) error {
	return s.renderBackups(c, http.StatusOK, "", "")
}

// renderBackups renders the backups page with the result of an action:
// notice on success, problem on failure (then with status).
func (s *Server) renderBackups(c *echo.Context, status int, notice, problem string) error {
	l, err := s.layout(c, "Backups", "backups")
	if err != nil {
		return err
	}
	dir := store.BackupDir(s.cfg.DataDir)
	b := views.Backups{Schedule: s.cfg.Backups.Schedule, Keep: s.cfg.Backups.Keep, Dir: dir, Files: []views.BackupRow{},
		Actions: s.backups != nil, Notice: notice, Error: problem, MaxUpload: maxRestoreUpload, Database: s.st.Database()}
	b.Offsite = s.offsiteView(c.Request().Context())
	st := s.metrics.BackupStatus()
	b.LastOK, b.LastResult, b.LastErr = st.LastOK, st.Result, st.Err
	b.RejectedDir = filepath.Join(dir, store.RejectedDir)
	if rejected, err := store.RejectedBackups(dir); err != nil {
		s.log.Error("list rejected backups", "dir", b.RejectedDir, "err", err)
	} else {
		for _, r := range rejected {
			b.Rejected = append(b.Rejected, views.RejectedRow{Name: r.Name, Size: r.Size, ModTime: r.ModTime, Reason: r.Reason})
		}
	}
	files, err := store.Backups(dir)
	if err != nil {
		s.log.Error("list backups", "dir", dir, "err", err)
		b.ListError = "The backup folder cannot be read: " + err.Error()
	}
	s.backupSums.retain(dir, files)
	for _, f := range files {
		row := views.BackupRow{Name: f.Name, Size: f.Size, ModTime: f.ModTime, Warnings: f.Warnings}
		sum, err := s.backupSums.sumOf(f.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // pruned by a backup that finished meanwhile
		case err != nil:
			s.log.Error("hash backup", "file", f.Path, "err", err)
		default:
			row.SHA256 = sum
		}
		b.Files = append(b.Files, row)
	}
	return render(c, status, views.BackupsPage(l, b))
}

// backupNotice is the overview's line about backups: the age of the
// newest verified copy, here and offsite, and, when the last attempt
// failed, why. nil before any backup was tried or found.
func (s *Server) backupNotice(now time.Time) *views.Notice {
	b := s.metrics.BackupStatus()
	o := s.metrics.OffsiteStatus()
	offsite := s.backups != nil && s.backups.Offsite() != nil
	if b.Result < 0 && b.LastOK.IsZero() && (!offsite || (o.Result < 0 && o.LastOK.IsZero())) {
		return nil
	}
	age := func(what string, at time.Time) string {
		if at.IsZero() {
			return "No " + what + " has been verified since the server started."
		}
		return "The newest verified " + what + " is " + views.Age(now.Sub(at)) + " old."
	}
	n := &views.Notice{Tone: "ok"}
	var parts []string
	if b.Result == 0 {
		n.Tone = "error"
		parts = append(parts, "The last backup failed: "+strings.TrimSuffix(b.Err, ".")+".")
	}
	parts = append(parts, age("backup", b.LastOK))
	if len(b.Warnings) > 0 && !b.LastOK.IsZero() {
		if n.Tone == "ok" {
			n.Tone = "warn"
		}
		parts = append(parts, fmt.Sprintf("It carries %d unreadable records, as the live database does (see /backups).", len(b.Warnings)))
	}
	if offsite {
		if o.Result == 0 {
			n.Tone = "error"
			parts = append(parts, "The last offsite copy failed: "+strings.TrimSuffix(o.Err, ".")+".")
		}
		parts = append(parts, age("offsite copy", o.LastOK))
	}
	n.Text = strings.Join(parts, " ")
	return n
}

// backupFile answers GET /backups/file/{name}: one scheduled backup. Only
// a name from the folder's own listing is served, so no name can reach a
// file outside it ("../handoff.db" is simply not in the list).
func (s *Server) backupFile(c *echo.Context) error {
	name := c.Param("name")
	dir := store.BackupDir(s.cfg.DataDir)
	files, err := store.Backups(dir)
	if err != nil {
		return err
	}
	path := ""
	for _, f := range files {
		if f.Name == name {
			path = f.Path
		}
	}
	if path == "" {
		return errorf(http.StatusNotFound, "there is no scheduled backup named %q", name)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errorf(http.StatusNotFound, "the backup %s was just deleted by the schedule's keep", name)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	sum, err := s.backupSums.sumOfOpen(path, f, info)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Backup-SHA256", sum)
	// Each write gets its own deadline, as a snapshot download's does: a
	// slow reader is never cut off by the server's write timeout, a
	// stalled one is after the idle bound.
	t0 := time.Now()
	dw := s.downloads.writer(c.Response())
	http.ServeContent(dw, c.Request(), name, info.ModTime(), f)
	// bytes is what was sent: a range request (a resumed download) sends
	// part of the file, which size and range say.
	attrs := []any{"who", actor(c), "file", path, "bytes", dw.sent, "size", info.Size()}
	if r := c.Request().Header.Get("Range"); r != "" {
		attrs = append(attrs, "range", r, "status", dw.code)
	}
	attrs = append(attrs, "sha256", sum, "took", time.Since(t0).Round(time.Millisecond))
	switch {
	case dw.err != nil:
		s.log.Error("backup download failed", append(attrs, "err", dw.why(dw.err))...)
	case dw.code != 0 && dw.code != http.StatusOK && dw.code != http.StatusPartialContent:
		// A range the file does not hold (416), a precondition (304,
		// 412), a read error inside ServeContent (500): no file was sent.
		if c.Request().Header.Get("Range") == "" {
			attrs = append(attrs, "status", dw.code)
		}
		s.log.Warn("backup download answered without the file", attrs...)
	default:
		s.log.Info("backup download finished", attrs...)
	}
	return nil
}

// sumCache remembers the SHA-256 of scheduled backups by path, size and
// modification time, so the page hashes each file once rather than on
// every view.
type sumCache struct {
	mu   sync.Mutex
	sums map[sumKey]string
}

type sumKey struct {
	path string
	size int64
	mod  int64 // UnixNano
}

// sumOf returns the SHA-256 of the file at path.
func (c *sumCache) sumOf(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	return c.sumOfOpen(path, f, info)
}

// sumOfOpen returns the SHA-256 of the open file f (found at path), from
// the cache or by reading it; f is left at its start.
func (c *sumCache) sumOfOpen(path string, f *os.File, info os.FileInfo) (string, error) {
	k := sumKey{path: path, size: info.Size(), mod: info.ModTime().UnixNano()}
	c.mu.Lock()
	sum, ok := c.sums[k]
	c.mu.Unlock()
	if ok {
		return sum, nil
	}
	// Hashed outside the lock: a large file must not hold up other pages.
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	sum = hex.EncodeToString(h.Sum(nil))
	c.mu.Lock()
	c.sums[k] = sum
	c.mu.Unlock()
	return sum, nil
}

// retain forgets the sums of files in dir that are no longer listed, so the
// cache never outgrows the folder's keep.
func (c *sumCache) retain(dir string, files []store.BackupFile) {
	listed := make(map[sumKey]bool, len(files))
	for _, f := range files {
		listed[sumKey{path: f.Path, size: f.Size, mod: f.ModTime.UnixNano()}] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.sums {
		if filepath.Dir(k.path) == filepath.Clean(dir) && !listed[k] {
			delete(c.sums, k)
		}
	}
}
