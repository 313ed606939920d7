package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/offsite"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/views"
)

// maxRestoreUpload is the largest backup file the dashboard takes; a
// larger one is restored with `handoff restore` and the server stopped.
const maxRestoreUpload = 4 << 30

// restoreWord is what a person types to confirm a restore.
const restoreWord = "restore"

// offsiteView is the offsite panel: the target, its last copy, and the
// copies in the bucket (listed with a short deadline, so a dead bucket
// slows the page by seconds, not minutes).
func (s *Server) offsiteView(ctx context.Context) *views.Offsite {
	if s.backups == nil || s.backups.Offsite() == nil {
		return nil
	}
	t := s.backups.Offsite()
	st := s.metrics.OffsiteStatus()
	o := &views.Offsite{URL: t.URL(), Keep: t.Keep(), LastOK: st.LastOK, LastSize: st.LastSize, LastName: st.LastName, Result: st.Result, Err: st.Err, PruneErr: st.PruneErr}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	copies, err := t.List(ctx)
	if err != nil {
		s.log.Error("list offsite copies", "target", t.URL(), "err", err)
		o.ListError = "The bucket cannot be listed: " + err.Error()
	}
	for _, c := range copies {
		o.Copies = append(o.Copies, views.OffsiteRow{Name: c.Name, Size: c.Size, Uploaded: c.Uploaded, Verified: c.Verified})
	}
	if c, ok := offsite.NewestVerified(copies); ok {
		o.Newest = &views.OffsiteRow{Name: c.Name, Size: c.Size, Uploaded: c.Uploaded, Verified: true}
	}
	return o
}

// backupNowPage answers POST /backups/now: a backup written now and, with
// a target, copied offsite and verified.
func (s *Server) backupNowPage(c *echo.Context) error {
	if s.backups == nil {
		return errNoBackups
	}
	res, err := s.backups.BackupNow(c.Request().Context())
	if err != nil {
		s.log.Error("backup now", "err", err)
		return s.renderBackups(c, http.StatusBadGateway, "", "The backup failed: "+err.Error())
	}
	msg := fmt.Sprintf("Backup %s written (%s, SHA-256 %s).", res.File.Name, views.ByteSize(res.File.Size), res.SHA256)
	if res.Copy != nil {
		msg += fmt.Sprintf(" Copied to %s and verified there (size and SHA-256).", s.backups.Offsite().URL())
	}
	if res.PruneError != "" {
		msg += " The old copies past keep could not be deleted: " + res.PruneError
	}
	return s.renderBackups(c, http.StatusOK, msg, "")
}

// uploadKey is where allowUpload leaves the upload's multipart reader.
const uploadKey = "restore_upload"

// closeOnRefusal closes the connection after a refused upload, so that the
// refusal goes out at once: otherwise the server first reads and discards
// what it can of a body the caller may be sending slowly, or never.
func closeOnRefusal(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		err := next(c)
		if err != nil {
			c.Response().Header().Set("Connection", "close")
		}
		return err
	}
}

// allowUpload checks the restore upload's CSRF token, then admits its
// multipart body up to maxRestoreUpload and gives it an hour to arrive. It
// stands after the session and admin checks and reads the token before it
// lifts the server's deadlines, so only an admin's request from the
// dashboard gets the hour: the X-CSRF-Token header, or else the form's
// first part, csrf (the dashboard's form puts it first), read under the
// ordinary deadlines. It stands where limitForm stands on the other forms.
func allowUpload(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		if r.ContentLength > maxRestoreUpload {
			return errorf(http.StatusRequestEntityTooLarge, "the file is larger than %s, the most the dashboard takes; restore it with handoff restore", views.ByteSize(maxRestoreUpload))
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxRestoreUpload+1<<20)
		mr, err := r.MultipartReader()
		if err != nil {
			return errorf(http.StatusBadRequest, "the upload is not a multipart form")
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			if part, err := mr.NextPart(); err == nil && part.FormName() == "csrf" {
				b, _ := io.ReadAll(io.LimitReader(part, 1<<10))
				got = string(b)
			}
		}
		if p := who(c); p == nil || p.Session == nil || got == "" || !csrfMatches(got, p.Session.CSRF) {
			return errorf(http.StatusForbidden, "the form's security token is missing or stale; reload the page and try again")
		}
		rc := http.NewResponseController(c.Response())
		_ = rc.SetReadDeadline(time.Now().Add(time.Hour))
		_ = rc.SetWriteDeadline(time.Now().Add(time.Hour))
		c.Set(uploadKey, mr)
		return next(c)
	}
}

// restoreListed answers POST /backups/restore: a scheduled backup on this
// disk ("local:NAME") or an offsite copy ("offsite:NAME") restored.
func (s *Server) restoreListed(c *echo.Context) error {
	if s.backups == nil {
		return errNoBackups
	}
	if strings.TrimSpace(c.FormValue("confirm")) != restoreWord {
		return s.renderBackups(c, http.StatusBadRequest, "", "Nothing was restored: type restore in the confirmation box to restore.")
	}
	kind, name, _ := strings.Cut(c.FormValue("source"), ":")
	ctx := c.Request().Context()
	switch kind {
	case "local":
		files, err := store.Backups(store.BackupDir(s.cfg.DataDir))
		if err != nil {
			return err
		}
		for _, f := range files {
			if f.Name == name {
				return s.restoreFrom(c, f.Path, "the scheduled backup "+name)
			}
		}
		return s.renderBackups(c, http.StatusNotFound, "", fmt.Sprintf("Nothing was restored: there is no scheduled backup named %q.", name))
	case "offsite":
		t := s.backups.Offsite()
		if t == nil {
			return s.renderBackups(c, http.StatusConflict, "", "Nothing was restored: no offsite target is configured.")
		}
		tmp, err := os.CreateTemp(s.cfg.DataDir, ".restore-offsite-*.tmp")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		_, err = t.Download(ctx, name, tmp)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			status := http.StatusBadGateway
			if errors.Is(err, offsite.ErrNotFound) {
				status = http.StatusNotFound
			}
			return s.renderBackups(c, status, "", "Nothing was restored: "+err.Error())
		}
		return s.restoreFrom(c, tmp.Name(), "the offsite copy "+t.URL()+"/"+name)
	default:
		return s.renderBackups(c, http.StatusBadRequest, "", "Nothing was restored: pick a backup to restore.")
	}
}

// restoreUpload answers POST /backups/restore/upload: an uploaded backup
// file restored. The form is read part by part as it arrives (allowUpload
// read the token): the file goes straight into the data folder, since the
// restore renames a file there into place, on the same file system.
func (s *Server) restoreUpload(c *echo.Context) error {
	if s.backups == nil {
		return errNoBackups
	}
	mr, _ := c.Get(uploadKey).(*multipart.Reader)
	if mr == nil {
		return errors.New("restore upload: no multipart reader (allowUpload is not in the chain)")
	}
	tmp, err := os.CreateTemp(s.cfg.DataDir, ".restore-upload-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var file, confirm, pw, code string
	small := func(part io.Reader) (string, error) {
		b, err := io.ReadAll(io.LimitReader(part, 1<<10))
		return string(b), err
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err == nil {
			switch {
			case part.FormName() == "file" && file == "" && part.FileName() != "":
				file = filepath.Base(part.FileName())
				_, err = io.Copy(tmp, part)
			case part.FormName() == "confirm":
				confirm, err = small(part)
			case part.FormName() == stepUpPassword:
				pw, err = small(part)
			case part.FormName() == stepUpCode:
				code, err = small(part)
			default:
				_, err = io.Copy(io.Discard, part)
			}
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return s.renderBackups(c, http.StatusRequestEntityTooLarge, "", "Nothing was restored: the file is larger than "+views.ByteSize(maxRestoreUpload)+", the most the dashboard takes; restore it with handoff restore.")
			}
			return s.renderBackups(c, http.StatusBadRequest, "", "Nothing was restored: the upload could not be read to its end.")
		}
	}
	if file == "" {
		return s.renderBackups(c, http.StatusBadRequest, "", "Nothing was restored: choose a backup file to upload.")
	}
	if strings.TrimSpace(confirm) != restoreWord {
		return s.renderBackups(c, http.StatusBadRequest, "", "Nothing was restored: type restore in the confirmation box to restore.")
	}
	// The confirmation asks for the password again, as every restore does
	// (the listed one's route: stepUp); the form is read by now.
	if !s.freshStepUp(c) {
		if pw == "" {
			return s.refuseRestore(c, refused(errStepUpNeeded, http.StatusForbidden))
		}
		if err := s.confirmStepUp(c, pw, code); err != nil {
			return s.refuseRestore(c, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("store the uploaded backup: %w", err)
	}
	return s.restoreFrom(c, tmp.Name(), "the uploaded file "+file)
}

// restoreFrom restores the file at path (described as what), audits it in
// the restored database, and shows the result.
func (s *Server) restoreFrom(c *echo.Context, path, what string) error {
	ctx := c.Request().Context()
	p := who(c)
	s.log.Warn("restore requested", "who", p.Name, "source", what)
	res, err := s.backups.Restore(ctx, path)
	if err != nil {
		s.log.Error("restore failed", "who", p.Name, "source", what, "err", err)
		var de *store.DamagedError
		if errors.As(err, &de) {
			return s.renderBackups(c, http.StatusUnprocessableEntity, "", fmt.Sprintf("Nothing was restored: %s %s.", what, de.Problem))
		}
		return s.renderBackups(c, http.StatusUnprocessableEntity, "", "Nothing was restored: "+err.Error())
	}
	detail := "the previous database is kept as " + res.Kept
	switch {
	case res.PruneError != "":
		detail += " (the databases kept by earlier restores could not all be deleted: " + strings.TrimSuffix(res.PruneError, ".") + ")"
	case len(res.Pruned) == 1:
		detail += " (only the newest is kept: the one an earlier restore kept was deleted)"
	case len(res.Pruned) > 1:
		detail += fmt.Sprintf(" (only the newest is kept: the %d earlier restores kept were deleted)", len(res.Pruned))
	}
	if err := s.st.Audit(ctx, store.AuditEntry{At: s.now(), Who: p.Name, From: c.RealIP(), Action: "backup restored", Target: what, Detail: detail}); err != nil {
		s.log.Error("audit the restore", "err", err)
	}
	attrs := []any{"who", p.Name, "source", what, "bytes", res.Bytes, "sha256", res.SHA256, "kept", res.Kept, "pruned", res.Pruned}
	if res.PruneError != "" {
		attrs = append(attrs, "prune_error", res.PruneError)
	}
	s.log.Warn("restore done", attrs...)
	return s.renderBackups(c, http.StatusOK, fmt.Sprintf("Restored %s; %s. The server goes on with the restored database; no session came with it, so everyone (you too) logs in again.", what, detail), "")
}

// refuseRestore shows the backups page with a step-up's refusal.
func (s *Server) refuseRestore(c *echo.Context, err error) error {
	status, msg := answerFor(err)
	if status >= http.StatusInternalServerError {
		return err
	}
	return s.renderBackups(c, status, "", "Nothing was restored: "+msg)
}
