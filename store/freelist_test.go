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

// newestMetaOf is the newest meta page of the file b.
func newestMetaOf(t *testing.T, b []byte) meta {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meta.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return fileMeta(t, path)
}

// TestFreelistStoredAtCloseOnly: a commit does not write the freelist (a
// long read pins every page freed meanwhile, and each commit would write
// them all), a clean Close does, so the next open reads it; a file left
// without one (a crash, a backup copy) opens by rebuilding it, and keeps
// what was committed.
func TestFreelistStoredAtCloseOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		record(t, st, fmt.Sprintf("m-%04d", i), t0)
	}
	if m := fileMeta(t, path); m.freelist != noFreelist {
		t.Errorf("after commits the meta names freelist page %d; want none stored", m.freelist)
	}
	// The file as a crash would leave it: copied between commits.
	crashed := t.TempDir()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, FileName), b, 0o600); err != nil {
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
			for i := range 50 {
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
