package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/proc"
)

// writers records events from several goroutines in a loop until halted,
// and remembers which ones were acknowledged (RecordEvent returned nil).
type writers struct {
	st    *Store
	stop  chan struct{}
	wg    sync.WaitGroup
	acks  atomic.Int64
	late  atomic.Bool // set: calls begun from now on are "late"
	mu    sync.Mutex
	acked []string
	lateK []string // acknowledged keys whose call began after late was set
	err   error
}

// startWriters starts n writers behind a barrier, so they really race.
func startWriters(t *testing.T, st *Store, n int) *writers {
	t.Helper()
	w := &writers{st: st, stop: make(chan struct{})}
	start := make(chan struct{})
	for g := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			<-start
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				k := fmt.Sprintf("web:w%d-%06d", g, i)
				late := w.late.Load()
				if _, err := st.RecordEvent(context.Background(), newEvent(k, t0), draftJobFor(k, 3)); err != nil {
					w.mu.Lock()
					w.err = cmpErr(w.err, err)
					w.mu.Unlock()
					return
				}
				w.mu.Lock()
				w.acked = append(w.acked, k)
				if late {
					w.lateK = append(w.lateK, k)
				}
				w.mu.Unlock()
				w.acks.Add(1)
			}
		}()
	}
	close(start)
	t.Cleanup(func() { w.halt(t) })
	return w
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// ackedSoFar is a copy of the keys acknowledged so far.
func (w *writers) ackedSoFar() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acked)
}

// waitAcks waits until n events are acknowledged, with a deadline.
func (w *writers) waitAcks(t *testing.T, n int64) {
	t.Helper()
	if err := proc.Eventually(context.Background(), 10*time.Second, func() (bool, error) { return w.acks.Load() >= n, nil }); err != nil {
		t.Fatalf("waiting for %d acknowledged events (have %d): %v", n, w.acks.Load(), err)
	}
}

// halt stops the writers and fails the test if one of them failed.
func (w *writers) halt(t *testing.T) {
	t.Helper()
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	w.wg.Wait()
	if w.err != nil {
		t.Errorf("a writer failed: %v", w.err)
	}
}

// verifyFile opens path read-only and runs the full consistency check.
func verifyFile(t *testing.T, path string) {
	t.Helper()
	st, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("OpenFile(%s, read-only): %v", path, err)
	}
	defer st.Close()
	if err := st.Check(); err != nil {
		t.Fatalf("Check(%s): %v", path, err)
	}
}

// restoreAndOpen restores path into a new folder and opens the result.
func restoreAndOpen(t *testing.T, path string) *Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	r, err := Restore(context.Background(), dir, path)
	if err != nil {
		t.Fatalf("Restore into a new folder: %v", err)
	}
	if kept := r.Kept; kept != "" {
		t.Errorf("Restore into a new folder kept %q; there was nothing to keep", kept)
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open the restored folder: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("Check of the restored store: %v", err)
		}
		st.Close()
	})
	return st
}

// missing returns the keys that are not events of st.
func missing(t *testing.T, st *Store, keys []string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		if _, err := st.EventByKey(k); errors.Is(err, ErrNotFound) {
			out = append(out, k)
		} else if err != nil {
			t.Fatalf("EventByKey(%s): %v", k, err)
		}
	}
	return out
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestBackupToDirWhileWriting takes a scheduled-style backup while four
// goroutines insert events as fast as they can. The file must verify, and
// restored it must hold every event acknowledged before the backup began.
func TestBackupToDirWhileWriting(t *testing.T) {
	boltOnly(t)
	st := openTest(t)
	w := startWriters(t, st, 4)
	w.waitAcks(t, 200)
	before := w.ackedSoFar()

	dir := filepath.Join(t.TempDir(), "backups")
	f, sum, err := st.BackupToDir(dir, t0, BackupOptions{Keep: 2})
	if err != nil {
		t.Fatalf("BackupToDir: %v", err)
	}
	// Writers went on after the snapshot: more acknowledgements arrive.
	w.waitAcks(t, int64(len(before))+50)
	w.halt(t)

	if want := BackupPrefix + "20261129T120000Z.db"; f.Name != want {
		t.Errorf("backup name %q, want %q", f.Name, want)
	}
	info, err := os.Stat(f.Path)
	if err != nil {
		t.Fatalf("the backup file: %v", err)
	}
	if info.Size() != f.Size {
		t.Errorf("BackupToDir reported %d bytes; the file has %d", f.Size, info.Size())
	}
	if got := fileSHA256(t, f.Path); got != sum {
		t.Errorf("BackupToDir reported sha256 %s; the file hashes to %s", sum, got)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmp) != 0 {
		t.Errorf("temporary files left behind: %v", tmp)
	}
	verifyFile(t, f.Path)
	restored := restoreAndOpen(t, f.Path)
	if lost := missing(t, restored, before); len(lost) > 0 {
		t.Fatalf("%d of %d events acknowledged before the backup are missing from it, e.g. %s", len(lost), len(before), lost[0])
	}
}

// heldWriter is a writer whose first Write waits until open returns true: it
// holds the snapshot's read transaction open while the test watches writers.
type heldWriter struct {
	buf    bytes.Buffer
	opened bool
	open   func() error
}

func (g *heldWriter) Write(p []byte) (int, error) {
	if !g.opened {
		g.opened = true
		if err := g.open(); err != nil {
			return 0, err
		}
	}
	return g.buf.Write(p)
}

// TestBackupIsASnapshotWhileWritersCommit holds a backup's read transaction
// open until writers have committed more events: writes are not blocked by
// a long backup, and the snapshot has every event acknowledged before it
// and none begun after it started.
func TestBackupIsASnapshotWhileWritersCommit(t *testing.T) {
	boltOnly(t)
	st := openTest(t)
	w := startWriters(t, st, 4)
	w.waitAcks(t, 100)
	before := w.ackedSoFar()

	g := &heldWriter{open: func() error {
		// The read transaction is open: every call begun from now is later
		// than the snapshot. Wait for some of them to be acknowledged.
		w.late.Store(true)
		return proc.Eventually(context.Background(), 10*time.Second, func() (bool, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.lateK) >= 50, nil
		})
	}}
	n, err := st.Backup(g)
	if err != nil {
		t.Fatalf("Backup while writers commit (a long backup must not block them): %v", err)
	}
	w.halt(t)
	if n != int64(g.buf.Len()) {
		t.Errorf("Backup reported %d bytes, wrote %d", n, g.buf.Len())
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, g.buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	verifyFile(t, path)
	restored := restoreAndOpen(t, path)
	if lost := missing(t, restored, before); len(lost) > 0 {
		t.Fatalf("%d of %d events acknowledged before the backup are missing, e.g. %s", len(lost), len(before), lost[0])
	}
	w.mu.Lock()
	late := slices.Clone(w.lateK)
	w.mu.Unlock()
	if in := len(late) - len(missing(t, restored, late)); in != 0 {
		t.Errorf("%d events recorded after the snapshot began are in it; a snapshot is one moment", in)
	}
}

// TestBackupToDirKeepsTheNewest writes five backups with keep 2.
func TestBackupToDirKeepsTheNewest(t *testing.T) {
	boltOnly(t)
	st := openTest(t)
	record(t, st, key(1), t0)
	dir := t.TempDir()
	// An unrelated file in the folder is left alone.
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, _, err := st.BackupToDir(dir, t0.Add(time.Duration(i)*time.Hour), BackupOptions{Keep: 2}); err != nil {
			t.Fatalf("BackupToDir %d: %v", i, err)
		}
	}
	list, err := Backups(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list {
		names = append(names, f.Name)
	}
	want := []string{BackupPrefix + "20261129T160000Z.db", BackupPrefix + "20261129T150000Z.db"}
	if !slices.Equal(names, want) {
		t.Errorf("backups after five with keep 2: %v, want the newest two %v", names, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("folder holds %d entries, want the 2 backups and notes.txt", len(entries))
	}
	for _, f := range list {
		verifyFile(t, f.Path)
	}
}

// liveFolder makes a data folder whose database holds the given events, closed.
func liveFolder(t *testing.T, keys ...string) string {
	t.Helper()
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		record(t, st, k, t0)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// backupOf makes a verified backup file holding the given events.
func backupOf(t *testing.T, keys ...string) string {
	t.Helper()
	src := liveFolder(t, keys...)
	st, err := Open(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, _, err := st.BackupToDir(t.TempDir(), t0, BackupOptions{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	return f.Path
}

// folderState is every file of a folder with its SHA-256, to prove a
// refused restore changed nothing.
func folderState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			out[e.Name()] = fileSHA256(t, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

func sameState(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("%s: the data folder went from %v to %v", what, before, after)
		return
	}
	for name, sum := range before {
		if after[name] != sum {
			t.Errorf("%s: %s changed (or vanished)", what, name)
		}
	}
}

// TestRestoreRefusesALiveDatabase: a server (here a store opened in the
// test) holds the file, so restore refuses and says to stop the server.
func TestRestoreRefusesALiveDatabase(t *testing.T) {
	boltOnly(t)
	dir := liveFolder(t, key(1))
	backup := backupOf(t, key(2))
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := folderState(t, dir)

	_, err = Restore(context.Background(), dir, backup)
	if err == nil {
		t.Fatal("Restore over a database held by a live store succeeded; want a refusal")
	}
	if !strings.Contains(err.Error(), "stop the server") {
		t.Errorf("refusal %q does not say to stop the server", err)
	}
	sameState(t, "refused restore", before, folderState(t, dir))
	if _, err := st.EventByKey(key(1)); err != nil {
		t.Errorf("the live store lost its event: %v", err)
	}
}

// TestRestoreRefusesABadFile: random bytes, a valid bbolt file with a
// damaged index, a truncated-to-nothing file and a missing file are all
// refused, and the data folder is left exactly as it was.
func TestRestoreRefusesABadFile(t *testing.T) {
	boltOnly(t)
	good := backupOf(t, key(1), key(2), key(3))

	random := filepath.Join(t.TempDir(), "random.db")
	noise := make([]byte, 64<<10)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(random, noise, 0o600); err != nil {
		t.Fatal(err)
	}

	damaged := filepath.Join(t.TempDir(), "damaged.db")
	copyForTest(t, good, damaged)
	db, err := bolt.Open(damaged, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketEventsByKey).Delete([]byte(key(2))) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	foreign := filepath.Join(t.TempDir(), "foreign.db")
	db, err = bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, tc := range []struct {
		name, file, want string
	}{
		{"random bytes", random, "cannot be opened"},
		{"damaged index", damaged, "idx_events_by_key"},
		{"empty file", empty, "cannot be opened"},
		{"another program's bbolt file", foreign, "not a handoff database"},
		{"no such file", filepath.Join(t.TempDir(), "nope.db"), "cannot be opened"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := liveFolder(t, key(9))
			before := folderState(t, dir)
			// The missing file must stay missing: its read fails both times.
			srcBefore, errBefore := os.ReadFile(tc.file)
			_, err := Restore(context.Background(), dir, tc.file)
			if err == nil {
				t.Fatalf("Restore(%s) succeeded; want a refusal", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Restore(%s) = %q; want it to mention %q", tc.name, err, tc.want)
			}
			sameState(t, "refused restore", before, folderState(t, dir))
			if srcAfter, errAfter := os.ReadFile(tc.file); !bytes.Equal(srcBefore, srcAfter) || (errBefore == nil) != (errAfter == nil) {
				t.Errorf("the refused file %s was modified", tc.file)
			}
		})
	}
}

// TestRestorePrunesTheEarlierKept: a restore keeps the database it
// replaced and deletes the one an earlier restore kept, naming it.
func TestRestorePrunesTheEarlierKept(t *testing.T) {
	boltOnly(t)
	dir := liveFolder(t, key(1))
	r1, err := Restore(context.Background(), dir, backupOf(t, key(2)))
	if err != nil || r1.Kept == "" || len(r1.Pruned) != 0 || r1.PruneErr != nil {
		t.Fatalf("first Restore = %+v, %v; want a kept copy and nothing pruned", r1, err)
	}
	r2, err := Restore(context.Background(), dir, backupOf(t, key(3)))
	if err != nil || r2.PruneErr != nil {
		t.Fatalf("second Restore = %+v, %v", r2, err)
	}
	if !slices.Equal(r2.Pruned, []string{r1.Kept}) {
		t.Errorf("second Restore pruned %q; want the first's kept copy %q", r2.Pruned, r1.Kept)
	}
	if _, err := os.Stat(r1.Kept); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the first kept copy is still there (%v)", err)
	}
	if _, err := os.Stat(r2.Kept); err != nil {
		t.Errorf("the second kept copy: %v", err)
	}
}

// TestRestoreKeepsTheOldDatabase replaces a folder's database with a backup
// and keeps the old one beside it, readable; a second restore in the same
// second keeps its own copy instead of overwriting the first.
func TestRestoreKeepsTheOldDatabase(t *testing.T) {
	boltOnly(t)
	dir := liveFolder(t, key(1))
	first := backupOf(t, key(2))
	second := backupOf(t, key(3))
	original := fileSHA256(t, filepath.Join(dir, FileName))

	// restore, not Restore: Restore deletes the first kept copy once the
	// second restore succeeded (TestRestorePrunesTheEarlierKept).
	kept1, err := restore(context.Background(), dir, first)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	kept2, err := restore(context.Background(), dir, second)
	if err != nil {
		t.Fatalf("second Restore: %v", err)
	}
	if kept1 == "" || kept2 == "" || kept1 == kept2 {
		t.Fatalf("kept copies %q and %q; want two distinct files", kept1, kept2)
	}
	if filepath.Dir(kept1) != dir || !strings.HasPrefix(filepath.Base(kept1), FileName+".before-restore-") {
		t.Errorf("old database kept as %q; want it beside the new one in %s", kept1, dir)
	}
	if got := fileSHA256(t, kept1); got != original {
		t.Errorf("the first kept copy is not the original database byte for byte")
	}
	if got, want := fileSHA256(t, kept2), fileSHA256(t, first); got != want {
		t.Errorf("the second kept copy is not the first restored backup")
	}
	if got, want := fileSHA256(t, filepath.Join(dir, FileName)), fileSHA256(t, second); got != want {
		t.Errorf("the live database is not the second backup byte for byte")
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmp) != 0 {
		t.Errorf("temporary files left behind: %v", tmp)
	}

	for _, c := range []struct {
		path     string
		has, not string
	}{{kept1, key(1), key(2)}, {filepath.Join(dir, FileName), key(3), key(1)}} {
		st, err := OpenFile(c.path, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("open %s: %v", c.path, err)
		}
		if err := st.Check(); err != nil {
			t.Errorf("Check(%s): %v", c.path, err)
		}
		if _, err := st.EventByKey(c.has); err != nil {
			t.Errorf("%s: event %s: %v", c.path, c.has, err)
		}
		if _, err := st.EventByKey(c.not); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: event %s: got %v, want not found", c.path, c.not, err)
		}
		st.Close()
	}
}

// TestRestoreReplacesADamagedDatabase: the usual reason to restore is a
// database that no longer opens; restore must not refuse over it.
func TestRestoreReplacesADamagedDatabase(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	live := filepath.Join(dir, FileName)
	junk := bytes.Repeat([]byte("not a database "), 1000)
	if err := os.WriteFile(live, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	backup := backupOf(t, key(1))
	r, err := Restore(context.Background(), dir, backup)
	if err != nil {
		t.Fatalf("Restore over a damaged database: %v", err)
	}
	if b, err := os.ReadFile(r.Kept); err != nil || !bytes.Equal(b, junk) {
		t.Errorf("the damaged database was not kept as it was (%v)", err)
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open the restored database: %v", err)
	}
	defer st.Close()
	if _, err := st.EventByKey(key(1)); err != nil {
		t.Errorf("restored database: %v", err)
	}
}

func copyForTest(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
