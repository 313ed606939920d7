package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestReplaceWhileReadersAndWritersRun swaps the file of a running store
// under concurrent writers and readers: none of them fails, the live
// events before the swap are only in the kept file, the backup's are in
// the store, every write acknowledged after Replace returned is there, and
// both files pass Check.
func TestReplaceWhileReadersAndWritersRun(t *testing.T) {
	boltOnly(t)
	backup := backupOf(t, "web:from-backup-1", "web:from-backup-2")
	st := openTest(t)
	record(t, st, "web:live-only", t0)
	w := startWriters(t, st, 3)
	stopReaders := make(chan struct{})
	var readers sync.WaitGroup
	var readErr error
	var readMu sync.Mutex
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stopReaders:
					return
				default:
				}
				if _, err := st.EventByKey("web:live-only"); err != nil && !errors.Is(err, ErrNotFound) {
					readMu.Lock()
					readErr = err
					readMu.Unlock()
					return
				}
				if _, err := st.Size(); err != nil {
					readMu.Lock()
					readErr = err
					readMu.Unlock()
					return
				}
			}
		}()
	}
	w.waitAcks(t, 50)
	r, err := st.Replace(context.Background(), backup)
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	kept := r.Kept
	afterSwap := w.acks.Load()
	w.waitAcks(t, afterSwap+50)
	lateFrom := len(w.ackedSoFar())
	w.waitAcks(t, afterSwap+100)
	w.halt(t)
	close(stopReaders)
	readers.Wait()
	if readErr != nil {
		t.Fatalf("a reader failed during the swap: %v", readErr)
	}
	if _, err := st.EventByKey("web:live-only"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the live-only event is still there after the restore (err %v)", err)
	}
	for _, k := range []string{"web:from-backup-1", "web:from-backup-2"} {
		if _, err := st.EventByKey(k); err != nil {
			t.Errorf("%s from the backup: %v", k, err)
		}
	}
	if lost := missing(t, st, w.ackedSoFar()[lateFrom:]); len(lost) > 0 {
		t.Errorf("%d writes acknowledged after the restore are missing, e.g. %s", len(lost), lost[0])
	}
	if filepath.Dir(kept) != filepath.Dir(st.Path()) {
		t.Errorf("kept %s, not beside %s", kept, st.Path())
	}
	old, err := OpenFile(kept, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.EventByKey("web:live-only"); err != nil {
		t.Errorf("the kept file lacks the live event: %v", err)
	}
	if err := old.Check(); err != nil {
		t.Errorf("the kept file: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(st.Path()), ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestReplaceRefusesWithoutChange: a damaged file, and a swap that cannot
// get every transaction out of the way in time, change nothing, and the
// store works on.
func TestReplaceRefusesWithoutChange(t *testing.T) {
	boltOnly(t)
	st := openTest(t)
	record(t, st, "web:live", t0)
	dir := filepath.Dir(st.Path())

	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, []byte("not a database at all, not even close"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := folderState(t, dir)
	if _, err := st.Replace(context.Background(), bad); err == nil {
		t.Fatal("Replace took a file that is no database")
	}
	sameState(t, "a refused file", before, folderState(t, dir))

	// A read transaction that stays open holds the swap off until its
	// context ends; then the gate opens again.
	backup := backupOf(t, "web:other")
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- st.View(func(tx *Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := st.Replace(ctx, backup); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Replace with a transaction held open: %v, want the deadline", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sameState(t, "a swap that timed out", before, folderState(t, dir))
	record(t, st, "web:after", t0)
	if _, err := st.EventByKey("web:live"); err != nil {
		t.Errorf("the live event after a refused swap: %v", err)
	}
}
