package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fileMeta is the newest meta page of the file at path.
func fileMeta(t *testing.T, path string) meta {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := newestMeta(path, f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFreelistStoredWhileSmall: a commit writes the freelist while it is
// small, and leaves it out while a long read pins pages (each commit
// would write every pinned page); Close writes it. A file left without one
// (a crash then, a backup copy) opens by rebuilding it, and keeps what was
// committed.
func TestFreelistStoredWhileSmall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; n < 50; n++ {
		record(t, st, fmt.Sprintf("m-%04d", n), t0)
	}
	if m := fileMeta(t, path); m.freelist == noFreelist {
		t.Error("after commits with few free pages the meta names no freelist page; want it stored")
	}
	// A long read: every page the commits free meanwhile stays pinned.
	reading, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- st.View(func(*Tx) error {
			close(reading)
			<-release
			return nil
		})
	}()
	<-reading
	for ; st.bolt().Stats().PendingPageN <= freelistSyncMax; n++ {
		if n > 20000 {
			t.Fatalf("%d commits under a read pinned only %d pages", n, st.bolt().Stats().PendingPageN)
		}
		record(t, st, fmt.Sprintf("m-%04d", n), t0)
	}
	record(t, st, fmt.Sprintf("m-%04d", n), t0)
	n++
	if m := fileMeta(t, path); m.freelist != noFreelist {
		t.Errorf("with %d pages pinned the meta names freelist page %d; want none stored", st.bolt().Stats().PendingPageN, m.freelist)
	}
	// The file as a crash now would leave it: copied between commits.
	crashed := t.TempDir()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if m := fileMeta(t, path); m.freelist == noFreelist {
		t.Error("after Close the meta names no freelist page; want it stored")
	}
	for _, d := range []string{dir, crashed} {
		st, err := Open(d, Options{CheckPages: true})
		if err != nil {
			t.Fatalf("Open(%s) = %v", d, err)
		}
		if err := st.View(func(tx *Tx) error {
			for i := range n {
				if _, err := tx.EventByKey(fmt.Sprintf("m-%04d", i)); err != nil {
					return fmt.Errorf("event m-%04d: %w", i, err)
				}
			}
			return nil
		}); err != nil {
			t.Errorf("%s: %v", d, err)
		}
		record(t, st, "after-reopen", t0)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if m := fileMeta(t, filepath.Join(d, FileName)); m.freelist == noFreelist {
			t.Errorf("%s: after Close the meta names no freelist page; want it stored", d)
		}
	}
}
