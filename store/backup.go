package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/boltengine"
)

// BackupPrefix starts the name of every backup file the scheduler writes.
const BackupPrefix = "handoff-backup-"

// Backup writes a consistent snapshot of the live database to w, in the
// engine's backup format (Engine.Snapshot: on bbolt, the file as of one
// read transaction), and returns the bytes written. It is the one path of
// every copy (Snapshot, BackupToDir); writers go on meanwhile. It runs
// inside the gate, so a Replace cannot swap the database under it. w must
// be quick, a local file or memory, never a slow client: the engine's read
// snapshot lasts as long as w takes, and on bbolt a long one holds up a
// remap, and so every write behind it.
func (s *Store) Backup(w io.Writer) (int64, error) {
	s.gate.enter()
	defer s.gate.exit()
	n, err := s.eng.Snapshot(w)
	// The copy's sequential read left the live file's pages cached in
	// large folios, and each later small commit then counted as a whole
	// folio written (bench grow); a backup reads the file once.
	dropFileCache(s.path)
	return n, err
}

// snapshotPattern names a download's temporary copy (Snapshot) in its folder.
const snapshotPattern = ".handoff-snapshot-*.tmp"

// Snapshot is a consistent copy of the live database in a temporary file,
// made for one download: the caller streams it, then removes it.
type Snapshot struct {
	Path   string
	Size   int64
	SHA256 string
	// Held is how long the read transaction was open: the local copy
	// alone (the hash is taken from the copy after it ended).
	Held time.Duration
}

// Snapshot copies a consistent snapshot of the live database into a new
// temporary file in dir (on the data folder's disk) and returns it. The
// read transaction lasts only as long as this local copy, never as long
// as a client takes to read it, nor as the hash takes: a read transaction
// still open when a commit must grow bbolt's map holds that commit, and
// every one behind it, until it ends. A copy that fails is removed.
// Remove the file with os.Remove once sent; RemoveSnapshots clears those
// a crash left behind.
func (s *Store) Snapshot(dir string) (Snapshot, error) {
	tmp, err := os.CreateTemp(dir, snapshotPattern)
	if err != nil {
		return Snapshot{}, fmt.Errorf("store: snapshot: %w", err)
	}
	snap, err := s.copyTo(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return Snapshot{}, fmt.Errorf("store: snapshot: %w", err)
	}
	return snap, nil
}

// copyTo writes a consistent snapshot into the empty file f from one read
// transaction, then hashes it from f with the transaction ended, and
// leaves f at its end, open.
func (s *Store) copyTo(f *os.File) (Snapshot, error) {
	snap := Snapshot{Path: f.Name()}
	t0 := time.Now()
	var err error
	snap.Size, err = s.Backup(f)
	snap.Held = time.Since(t0)
	if err != nil {
		return snap, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return snap, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err == nil && n != snap.Size {
		err = fmt.Errorf("the copy holds %d bytes, %d were written", n, snap.Size)
	}
	snap.SHA256 = hex.EncodeToString(h.Sum(nil))
	return snap, err
}

// RemoveSnapshots deletes the downloads' temporary copies left in dir by
// a process that stopped mid-download, and returns their paths. Call it
// with the store open: the open's lock proves no other process streams
// from them.
func RemoveSnapshots(dir string) ([]string, error) {
	left, err := filepath.Glob(filepath.Join(dir, snapshotPattern))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, p := range left {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// BackupFile is one backup on disk: a copy that passed verification.
type BackupFile struct {
	Name    string    `json:"name"`
	Path    string    `json:"-"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	// Warnings lists the unreadable records the copy carries, as the live
	// file did (BackupVerdict): it is verified with warnings, and counts.
	Warnings []string `json:"warnings,omitempty"`
}

// RejectedDir is the folder, inside the backups folder, where a scheduled
// backup that failed verification is kept apart, with its reason beside
// it as NAME.reason; only the newest rejectedKeep are kept.
const RejectedDir = "rejected"

// rejectedKeep bounds the rejected copies kept, so a file that fails
// every night cannot fill the disk.
const rejectedKeep = 3

// warningsSuffix and reasonSuffix name the sidecar files: a verified
// copy's warnings, a rejected copy's reason, one line each.
const (
	warningsSuffix = ".warnings"
	reasonSuffix   = ".reason"
)

// BackupOptions says how BackupToDir keeps the folder.
type BackupOptions struct {
	// Keep is how many verified backups are kept.
	Keep int
	// Verify checks the written copy before it takes a backup's name;
	// nil is VerifyFile. Tests wrap it to damage the copy first.
	Verify func(path string) error
}

// BackupToDir writes a snapshot into dir as BackupPrefix+<time>.db (a name
// never used before in dir: a second backup in the same second takes the
// next second). The copy is written to a temporary file, fsynced, and
// verified (VerifyFile, in a child process) before it is renamed to that
// name and the folder fsynced, so a backup's name always means a copy that
// can be restored. Only then are the verified backups past o.Keep deleted.
//
// A copy that fails verification never takes the name, never counts and
// deletes nothing: it is moved to dir/rejected/ with a NAME.reason file
// (the newest three are kept) and the answer is a *RejectedError. A copy
// whose only problems are unreadable records is as good as the live file:
// it is kept and counted, and its warnings are written beside it
// (NAME.warnings) and returned in the BackupFile.
func (s *Store) BackupToDir(dir string, now time.Time, o BackupOptions) (BackupFile, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return BackupFile{}, "", err
	}
	at, name, err := freeBackupName(dir, now)
	if err != nil {
		return BackupFile{}, "", err
	}
	final := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return BackupFile{}, "", fmt.Errorf("store: backup: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a rename this finds nothing
	// The read transaction covers the local copy only, not its hash.
	snap, err := s.copyTo(tmp)
	n, sum := snap.Size, snap.SHA256
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return BackupFile{}, "", fmt.Errorf("store: backup: %w", err)
	}
	verify := o.Verify
	if verify == nil {
		verify = VerifyFile
	}
	verr := verify(tmp.Name())
	ok, warnings := BackupVerdict(verr)
	if !ok {
		return BackupFile{}, "", reject(dir, tmp.Name(), name, reasonOf(verr))
	}
	if len(warnings) > 0 {
		// Before the copy takes its name: a crash between the two leaves
		// a sidecar without its copy (ignored), never a copy shown clean.
		err := WriteFileAtomic(final+warningsSuffix, func(w io.Writer) error {
			_, err := io.WriteString(w, strings.Join(oneLines(warnings), "\n")+"\n")
			return err
		}, nil)
		if err != nil {
			return BackupFile{}, "", fmt.Errorf("store: backup: write its warnings: %w", err)
		}
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return BackupFile{}, "", fmt.Errorf("store: backup: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return BackupFile{}, "", fmt.Errorf("store: backup: %w", err)
	}
	if err := pruneBackups(dir, o.Keep); err != nil {
		return BackupFile{}, "", err
	}
	return BackupFile{Name: name, Path: final, Size: n, ModTime: at, Warnings: warnings}, sum, nil
}

// freeBackupName is the backup name for now, or for the first later
// second whose name is used neither in dir nor in its rejected folder: a
// name is never reused, so no copy (here or offsite) is ever overwritten.
func freeBackupName(dir string, now time.Time) (time.Time, string, error) {
	at := now.UTC().Truncate(time.Second)
	for {
		name := BackupPrefix + at.Format("20060102T150405Z") + ".db"
		used := false
		for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, RejectedDir, name)} {
			_, err := os.Lstat(p)
			switch {
			case err == nil:
				used = true
			case !errors.Is(err, fs.ErrNotExist):
				return time.Time{}, "", err
			}
		}
		if !used {
			return at, name, nil
		}
		at = at.Add(time.Second)
	}
}

// reject moves the copy tmp, which failed verification, to
// dir/rejected/name with its reason beside it, keeps the newest
// rejectedKeep there, and returns the *RejectedError that says so.
func reject(dir, tmp, name, reason string) error {
	rerr := &RejectedError{Name: name, Reason: reason}
	rdir := filepath.Join(dir, RejectedDir)
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		return rerr
	}
	kept := filepath.Join(rdir, name)
	err := WriteFileAtomic(kept+reasonSuffix, func(w io.Writer) error {
		_, err := io.WriteString(w, strings.Join(oneLines([]string{reason}), " ")+"\n")
		return err
	}, nil)
	if err != nil {
		return rerr
	}
	if err := os.Rename(tmp, kept); err != nil {
		os.Remove(kept + reasonSuffix)
		return rerr
	}
	if err := syncDir(rdir); err != nil {
		return rerr
	}
	rerr.Kept = kept
	_ = pruneRejected(rdir)
	return rerr
}

// oneLines puts each message on one line.
func oneLines(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.Join(strings.Fields(s), " ")
	}
	return out
}

// Backups lists the verified backups in dir, newest first, each with the
// warnings written beside it. The rejected folder is not read.
func Backups(dir string) ([]BackupFile, error) {
	return listBackups(dir, warningsSuffix)
}

// RejectedBackup is a scheduled backup that failed verification, kept
// apart in the rejected folder.
type RejectedBackup struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Reason  string    `json:"reason"`
}

// RejectedBackups lists the rejected backups of the backups folder dir, newest first.
func RejectedBackups(dir string) ([]RejectedBackup, error) {
	files, err := listBackups(filepath.Join(dir, RejectedDir), reasonSuffix)
	out := make([]RejectedBackup, 0, len(files))
	for _, f := range files {
		out = append(out, RejectedBackup{Name: f.Name, Size: f.Size, ModTime: f.ModTime, Reason: strings.Join(f.Warnings, " ")})
	}
	return out, err
}

// listBackups lists the backup files in dir, newest first, each with the
// lines of its sidecar (name+sidecar) in Warnings.
func listBackups(dir, sidecar string) ([]BackupFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	sidecars := map[string]bool{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), sidecar) {
			sidecars[strings.TrimSuffix(e.Name(), sidecar)] = true
		}
	}
	var out []BackupFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), BackupPrefix) || !strings.HasSuffix(e.Name(), ".db") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		f := BackupFile{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Size: info.Size(), ModTime: info.ModTime()}
		if sidecars[e.Name()] {
			if raw, err := os.ReadFile(f.Path + sidecar); err == nil {
				for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
					if l = strings.TrimSpace(l); l != "" {
						f.Warnings = append(f.Warnings, l)
					}
				}
			}
		}
		out = append(out, f)
	}
	// The name holds the time, so names sort like times.
	sort.Slice(out, func(i, j int) bool { return out[i].Name > out[j].Name })
	return out, nil
}

// pruneBackups deletes the verified backups past the newest keep, each
// with its warnings.
func pruneBackups(dir string, keep int) error {
	all, err := Backups(dir)
	if err != nil {
		return err
	}
	for i := keep; i < len(all); i++ {
		if err := os.Remove(all[i].Path); err != nil {
			return fmt.Errorf("store: remove old backup %s: %w", all[i].Name, err)
		}
		os.Remove(all[i].Path + warningsSuffix)
	}
	return nil
}

// pruneRejected deletes the rejected copies past the newest rejectedKeep,
// each with its reason.
func pruneRejected(rdir string) error {
	all, err := listBackups(rdir, reasonSuffix)
	if err != nil {
		return err
	}
	for i := rejectedKeep; i < len(all); i++ {
		if err := os.Remove(all[i].Path); err != nil {
			return err
		}
		os.Remove(all[i].Path + reasonSuffix)
	}
	return nil
}

// WriteFileAtomic writes the file path with write through a temporary file
// in the same folder: fsynced and closed, then given to check (when not
// nil), renamed to path only if check accepts it, and the folder fsynced
// after the rename, so a crash never leaves a half-written file under
// path's name. On an error path is untouched and the temporary file gone.
func WriteFileAtomic(path string, write func(io.Writer) error, check func(tmp string) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this finds nothing
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(tmp.Name()); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// VerifyFile opens the database file at path read-only, changing nothing,
// and runs Check on it: what a backup or a file to restore must pass. The
// check runs in a child process (see checkInChild), so a file that would
// crash bbolt is an error too: a *DamagedError naming the file and its
// problem in one sentence, or an error saying another process holds it.
func VerifyFile(path string) error {
	return verifyIsolated(context.Background(), path)
}

// restorable says whether VerifyFile's answer err lets a file be
// restored: the backup's verdict (BackupVerdict), so a copy the backups
// keep is a copy restore takes.
func restorable(err error) bool {
	ok, _ := BackupVerdict(err)
	return ok
}

// verifyIsolated is VerifyFile, stopped when ctx ends.
func verifyIsolated(ctx context.Context, path string) error {
	// The cheap refusals need no child process.
	if err := preflight(path); err != nil {
		return err
	}
	return checkInChild(ctx, path, checkFull)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Restored is what a restore (Restore, Replace) did to the data folder.
type Restored struct {
	// Kept is the previous database's new name beside the live file; ""
	// when there was none.
	Kept string
	// Pruned is the databases earlier restores kept, deleted once this
	// one succeeded: each is a whole copy, so only the newest (Kept) stays.
	Pruned []string
	// PruneErr is a kept database that could not be deleted; the restore
	// itself succeeded.
	PruneErr error
}

// prune deletes the databases earlier restores kept (pruneKept), once r's
// restore succeeded.
func (r *Restored) prune() {
	if r.Kept != "" {
		r.Pruned, r.PruneErr = pruneKept(r.Kept)
	}
}

// Restore replaces the database in dataDir with the verified file src. It
// refuses while a server holds the database, verifies src first, keeps
// the old database beside the new one (Restored.Kept) and deletes those
// earlier restores kept (Restored.Pruned).
func Restore(ctx context.Context, dataDir, src string) (Restored, error) {
	kept, err := restore(ctx, dataDir, src)
	if err != nil {
		return Restored{}, err
	}
	r := Restored{Kept: kept}
	r.prune()
	return r, nil
}

// restore is Restore up to the kept copy's name.
func restore(ctx context.Context, dataDir, src string) (string, error) {
	if err := verifyIsolated(ctx, src); !restorable(err) {
		return "", fmt.Errorf("restore: nothing was changed: %w", err)
	}
	live := filepath.Join(dataDir, FileName)
	kept := ""
	if _, err := os.Stat(live); err == nil {
		// A shared lock proves no server has the file, and keeps one from
		// opening it until the new file is in place. It is taken read-only
		// and without the store's migrations: the old file is kept exactly
		// as it was, and a file too damaged to open (the usual reason to
		// restore) can still be replaced.
		cur, err := boltengine.Open(live, boltengine.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
		switch {
		case errors.Is(err, engine.ErrLocked):
			return "", fmt.Errorf("restore: %s is in use by another process: stop the server first, then restore", live)
		case err == nil:
			defer cur.Close()
		}
		if kept, err = keepCopy(live, time.Now().UTC()); err != nil {
			return "", fmt.Errorf("restore: keep the current database: %w", err)
		}
	} else if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	// The sessions are dropped from a copy, never from src itself.
	staged, err := stageCopy(dataDir, src)
	if err != nil {
		return "", fmt.Errorf("restore: copy %s: %w", src, err)
	}
	defer os.Remove(staged)
	if err := dropSessions(staged); err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	err = WriteFileAtomic(live, func(w io.Writer) error {
		in, err := os.Open(staged)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(w, in)
		return err
	}, nil)
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	return kept, nil
}

// dropSessions deletes every dashboard session in the database file at
// path (a restore's staged copy): a backup holds users, which is what a
// restore brings back, but a session in it could be one planted in a
// crafted file that passes verify, so none comes back. Everyone logs in
// again after a restore.
// A file without sessions is left byte for byte as it is.
func dropSessions(path string) error {
	ro, err := boltengine.Open(path, boltengine.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("open the copy to drop its sessions: %w", err)
	}
	some := false
	err = ro.View(func(tx engine.Tx) error {
		if b := tx.Bucket(bucketSessions); b != nil {
			k, _ := b.Cursor().First()
			some = k != nil
		}
		return nil
	})
	if cerr := ro.Close(); err == nil {
		err = cerr
	}
	if err != nil || !some {
		return err
	}
	db, err := boltengine.Open(path, boltengine.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("open the copy to drop its sessions: %w", err)
	}
	_, err = db.Update(func(tx engine.Tx) error {
		if tx.Bucket(bucketSessions) == nil {
			return nil
		}
		if err := tx.DeleteBucket(bucketSessions); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketSessions)
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("drop the sessions of the copy: %w", err)
	}
	return nil
}

// keepCopy copies the live database to a new file beside it named for the
// time; it never overwrites an earlier copy, so two restores in the same
// second keep both older databases.
func keepCopy(live string, now time.Time) (string, error) {
	base := live + ".before-restore-" + now.Format("20060102T150405Z")
	for n := 1; ; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		err := copyNew(live, name)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			os.Remove(name) // a partial copy is no copy
			return "", err
		}
		return name, nil
	}
}

// keptName matches the name of a database kept by a restore, after the
// live file's name: keepCopy's and freeKeepName's.
var keptName = regexp.MustCompile(`^\.before-restore-\d{8}T\d{6}Z(-\d+)?$`)

// pruneKept deletes every database an earlier restore kept beside the
// live file (its name + ".before-restore-<time>"), except kept, the one
// the restore just made: each is a whole copy of the database, so only
// the newest is kept. It returns the paths deleted; a file that cannot be
// deleted stops it, with those deleted so far.
func pruneKept(kept string) ([]string, error) {
	dir, base := filepath.Split(kept)
	live, _, ok := strings.Cut(base, ".before-restore-")
	if !ok || !keptName.MatchString(strings.TrimPrefix(base, live)) {
		return nil, fmt.Errorf("store: %s is not a database kept by a restore", kept)
	}
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return nil, err
	}
	var pruned []string
	for _, e := range entries {
		name := e.Name()
		if name == base || e.IsDir() || !strings.HasPrefix(name, live) || !keptName.MatchString(name[len(live):]) {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return pruned, fmt.Errorf("store: delete the database kept by an earlier restore: %w", err)
		}
		pruned = append(pruned, p)
	}
	return pruned, nil
}

// copyNew copies src to the new file dst (fs.ErrExist if it exists) and fsyncs it.
func copyNew(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Size is the database file's size and its free pages, for the settings page and metrics.
type Size struct {
	Bytes     int64 `json:"bytes"`
	FreePages int   `json:"free_pages"`
	PageSize  int   `json:"page_size"`
}

// Size reports the file's size and free pages.
func (s *Store) Size() (Size, error) {
	// Inside the gate: Replace may swap the engine between two calls.
	s.gate.enter()
	defer s.gate.exit()
	sp, err := s.eng.Space()
	return Size{Bytes: sp.Bytes, FreePages: sp.FreePages, PageSize: sp.PageSize}, err
}

// IsBackupName says whether name is the name of a backup file as
// BackupToDir writes it: the prefix, a time, ".db", and no folder.
func IsBackupName(name string) bool {
	return strings.HasPrefix(name, BackupPrefix) && strings.HasSuffix(name, ".db") &&
		len(name) > len(BackupPrefix)+len(".db") && !strings.ContainsAny(name, `/\`) && !strings.Contains(name, "..")
}

// Replace restores the verified file src into the running store: the same
// checks as Restore first (nothing is changed when they fail), then, with
// every transaction finished and new ones held at the gate, the live file
// is renamed aside (kept, and returned), src's copy takes its place, and
// the store reopens on it, migrations included. Writes queued meanwhile
// commit into the restored database. If the restored file cannot be
// opened, the old one is put back and reopened. The caller stops whatever
// must not straddle the swap (the job runner) first. Once the swap
// succeeded, the databases earlier restores kept are deleted
// (Restored.Pruned), as Restore does.
func (s *Store) Replace(ctx context.Context, src string) (Restored, error) {
	kept, err := s.replace(ctx, src)
	if err != nil {
		return Restored{}, err
	}
	r := Restored{Kept: kept}
	r.prune()
	return r, nil
}

// replace is Replace up to the kept copy's name.
func (s *Store) replace(ctx context.Context, src string) (string, error) {
	if s.writes == nil {
		return "", ErrReadOnly
	}
	if s.file == nil {
		return "", errors.New("restore: this engine restores from its own backups, not from a file")
	}
	if err := verifyIsolated(ctx, src); !restorable(err) {
		return "", fmt.Errorf("restore: nothing was changed: %w", err)
	}
	// The copy is made before the gate shuts, so the process waits only
	// for the rename and the reopen.
	dir := filepath.Dir(s.path)
	staged, err := stageCopy(dir, src)
	if err != nil {
		return "", fmt.Errorf("restore: nothing was changed: copy %s: %w", src, err)
	}
	defer os.Remove(staged) // gone after the rename
	if err := dropSessions(staged); err != nil {
		return "", fmt.Errorf("restore: nothing was changed: %w", err)
	}
	open, err := s.gate.shut(ctx)
	if err != nil {
		return "", fmt.Errorf("restore: nothing was changed: the database stayed busy (a long backup download or another restore): %w", err)
	}
	defer open()
	kept, err := freeKeepName(s.path, time.Now().UTC())
	if err != nil {
		return "", err
	}
	if err := s.eng.Close(); err != nil {
		return "", fmt.Errorf("restore: close the database: %w", err)
	}
	reopen := func(why error) (string, error) {
		// Put the old file back under its name and carry on with it.
		if err := os.Rename(kept, s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("restore: %v, and the old database could not be put back from %s: %w", why, kept, err)
		}
		if err := s.reopen(); err != nil {
			return "", fmt.Errorf("restore: %v, and the old database did not reopen: %w", why, err)
		}
		return "", fmt.Errorf("restore: nothing was changed: %w", why)
	}
	if err := os.Rename(s.path, kept); err != nil {
		return reopen(fmt.Errorf("keep the current database: %w", err))
	}
	if err := os.Rename(staged, s.path); err != nil {
		return reopen(fmt.Errorf("move the backup into place: %w", err))
	}
	if err := syncDir(dir); err != nil {
		return reopen(err)
	}
	if err := s.reopen(); err != nil {
		return reopen(fmt.Errorf("open the restored database: %w", err))
	}
	return kept, nil
}

// reopen opens s.path again through OpenFile, migrations included, and
// takes the new handle's file; its own committer is stopped unused.
func (s *Store) reopen() error {
	ns, err := OpenFile(s.path, Options{Timeout: time.Second, MmapSize: s.mmap})
	if err != nil {
		return err
	}
	close(ns.quit)
	<-ns.stopped
	s.eng, s.file = ns.eng, ns.file
	s.damage.Store(nil)
	s.ended.forget() // completions of the file replaced
	return nil
}

// stageCopy copies src into a new temporary file in dir, fsynced.
func stageCopy(dir, src string) (string, error) {
	tmp, err := os.CreateTemp(dir, "."+FileName+".restore-*.tmp")
	if err != nil {
		return "", err
	}
	in, err := os.Open(src)
	if err == nil {
		_, err = io.Copy(tmp, in)
		in.Close()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// freeKeepName is the name keepCopy would give the kept database: named
// for the time, never one that exists.
func freeKeepName(live string, now time.Time) (string, error) {
	base := live + ".before-restore-" + now.Format("20060102T150405Z")
	for n := 1; ; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		_, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
	}
}
