package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/handoff/handoff/offsite"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/web"
)

// backups is the process's side of the backups page: a backup now, its
// offsite copy, and a restore while serving. It is the web.Backups the
// HTTP side calls, so web never learns how the process is put together.
type backups struct {
	a       *App
	target  *offsite.Target // nil: no backups.target
	metrics *web.Metrics

	mu   sync.Mutex // one backup (scheduled or asked for) at a time
	last web.BackupResult

	restoring sync.Mutex // one restore at a time, and none during Stop
}

// scheduled is the cron task: the backup and, when a target is set, its
// offsite copy.
func (b *backups) scheduled(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.a.maint.Backup(ctx)
}

// afterBackup copies the backup just written offsite (Maintenance.AfterBackup),
// handing on the SHA-256 the store computed, then deletes the copies past
// keep. A failed upload or check fails the backup task; a failed prune
// after a verified copy does not: the copy is recorded as good and the
// prune failure apart from it, on the page and in the metrics.
func (b *backups) afterBackup(ctx context.Context, f store.BackupFile, sum string) error {
	b.last = web.BackupResult{File: f, SHA256: sum}
	if b.target == nil {
		return nil
	}
	t0 := time.Now()
	c, err := b.target.Upload(ctx, f.Path, f.Name, sum)
	if err != nil {
		b.metrics.Offsite(false, f.Name, 0, time.Time{}, err)
		b.a.log.Error("offsite copy failed", "target", b.target.URL(), "file", f.Path, "bytes", f.Size, "sha256", sum, "took", time.Since(t0).Round(time.Millisecond), slog.Any("err", err))
		return fmt.Errorf("offsite copy: %w", err)
	}
	b.metrics.Offsite(true, c.Name, c.Size, c.Uploaded, nil)
	b.last.Copy = &c
	b.a.log.Info("offsite copy verified", "target", b.target.URL(), "key", c.Key, "file", f.Path, "bytes", c.Size, "sha256", c.SHA256, "took", time.Since(t0).Round(time.Millisecond))
	err = b.target.Prune(ctx)
	b.metrics.OffsitePrune(err)
	if err != nil {
		b.last.PruneError = err.Error()
		b.a.log.Warn("delete the old offsite copies", "target", b.target.URL(), "keep", b.target.Keep(), slog.Any("err", err))
	}
	return nil
}

// BackupNow writes a backup as the schedule does and copies it offsite
// when a target is set; the dashboard's button and `handoff backup --to
// s3` call it.
func (b *backups) BackupNow(ctx context.Context) (web.BackupResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = web.BackupResult{}
	// Every outcome is logged where it happens: the backup's own
	// (written, rejected, failed) by Maintenance.Backup, the offsite
	// copy's by afterBackup.
	err := b.a.maint.Backup(ctx)
	return b.last, err
}

// Offsite is the configured target, or nil.
func (b *backups) Offsite() web.Offsite {
	if b.target == nil {
		return nil
	}
	return b.target
}

// Restore swaps the live database for the file src while serving: it
// stops the workers and the cron schedule (each job still running after
// the grace is released, as at shutdown), has the store verify src and
// swap it in (store.Replace: the old file is kept beside it), then starts
// the workers and the schedule again on the restored database. HTTP goes
// on throughout; requests wait at the store's gate for the swap.
//
// Only the newest database a restore kept stays beside the live file:
// the store deletes those kept by earlier restores once the swap
// succeeded (store.Restored), and they are named in the answer (the web
// side logs the restore in one line).
func (b *backups) Restore(ctx context.Context, src string) (web.Restored, error) {
	b.restoring.Lock()
	defer b.restoring.Unlock()
	a := b.a
	if !a.started {
		return web.Restored{}, errors.New("restore: the server is not running")
	}
	if db := a.st.Database(); db != "" {
		// Nothing is stopped for it: on a database several servers share,
		// a stop and start here would also start the schedule beside the
		// leader's.
		return web.Restored{}, fmt.Errorf("restore: nothing was changed: this install keeps its records in %s, whose backups and restores are the database's own (pg_dump, point-in-time recovery); a backup file goes in with handoff migrate --to, into an empty database", db)
	}
	// Verify before stopping anything: a bad file costs no downtime. A
	// file the backups would keep (BackupVerdict) is a file restore takes.
	if err := store.VerifyFile(src); !restorable(err) {
		return web.Restored{}, fmt.Errorf("restore: nothing was changed: %w", err)
	}
	size, sum, err := hashFile(src)
	if err != nil {
		return web.Restored{}, fmt.Errorf("restore: nothing was changed: read %s: %w", src, err)
	}
	// The background page walk reads the old file directly.
	if a.stopCheck != nil {
		a.stopCheck()
	}
	if a.checked != nil {
		<-a.checked
	}
	jctx, cancel := context.WithTimeout(ctx, ShutdownGrace)
	defer cancel()
	if err := a.runner.Stop(jctx); err != nil {
		a.log.Warn("restore: job runner stop", slog.Any("err", err))
	}
	a.sched.Stop(jctx)
	// Whatever happens to the swap, the process goes on working, on the
	// restored database or on the old one.
	defer func() {
		if err := a.maint.EnsureDelivery(context.WithoutCancel(ctx)); err != nil {
			a.log.Error("restore: resolve unfinished deliveries", slog.Any("err", err))
		}
		if err := a.runner.Start(context.WithoutCancel(ctx)); err != nil {
			a.log.Error("restore: restart the job runner", slog.Any("err", err))
		}
		a.sched.Start()
	}()
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	r, err := a.st.Replace(sctx, src)
	if err != nil {
		// The old file stays live: a page check that the restore cut
		// short (or that was still waiting for a quiet moment) runs again.
		if !a.walked.Load() {
			a.checkPagesInBackground()
		}
		return web.Restored{}, err
	}
	res := web.Restored{Bytes: size, SHA256: sum, Kept: r.Kept, Pruned: r.Pruned}
	if r.PruneErr != nil {
		res.PruneError = r.PruneErr.Error()
	}
	// The last good backup is what is on disk, whatever the restored
	// database says.
	if files, err := store.Backups(store.BackupDir(a.cfg.DataDir)); err == nil && len(files) > 0 {
		b.metrics.RestoreLastBackup(files[0].ModTime, files[0].Warnings)
	}
	return res, nil
}

// hashFile is the size and SHA-256 of the file at path.
func hashFile(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// restorable is store.BackupVerdict's ok.
func restorable(err error) bool {
	ok, _ := store.BackupVerdict(err)
	return ok
}

// lastOffsite sets the offsite gauges from the newest verified copy in the
// bucket (one with its verification record, never merely the newest
// listed), so they survive a restart; a bucket that cannot be listed is
// only logged.
func (b *backups) lastOffsite(ctx context.Context) {
	if b.target == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := b.target.List(ctx)
	if err != nil {
		b.a.log.Warn("list the offsite copies", "target", b.target.URL(), slog.Any("err", err))
		return
	}
	if c, ok := offsite.NewestVerified(list); ok {
		b.metrics.RestoreLastOffsite(c.Name, c.Size, c.Uploaded)
	}
}
