package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/handoff/handoff/testkit/smalldisk"
)

// putBig commits one value of n bytes under key in the meta bucket.
func putBig(st *Store, key string, n int) error {
	v := make([]byte, n)
	return st.Update(context.Background(), func(tx *Tx) error { return tx.bucket(bucketMeta).Put([]byte(key), v) })
}

// TestNoSpaceReadiness: on a really full disk a large write fails with
// ENOSPC while a tiny one still fits in the file's free pages; the store
// remembers the failure, Ping answers it (its probe as large as what
// failed), small writes do not clear it, and once space is freed Ping
// succeeds again and the memory is gone.
func TestNoSpaceReadiness(t *testing.T) {
	boltOnly(t)
	disk := smalldisk.Mount(t, 8<<20)
	st, err := Open(disk.Dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping on an empty disk: %v", err)
	}
	if err := putBig(st, "room", 256<<10); err != nil { // pages the file will have free
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx *Tx) error { return tx.bucket(bucketMeta).Delete([]byte("room")) }); err != nil {
		t.Fatal(err)
	}
	disk.Fill()

	err = putBig(st, "big", 512<<10)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a 512 KiB write on a full disk = %v; want ErrUnavailable wrapping ENOSPC", err)
	}
	var full *NoSpaceError
	if !errors.As(st.NoSpace(), &full) {
		t.Fatalf("NoSpace after ENOSPC = %v; want a *NoSpaceError", st.NoSpace())
	}
	if full.Dir != disk.Dir || full.Need < 512<<10 {
		t.Errorf("NoSpaceError = dir %s, need %d; want dir %s and at least the 512 KiB that failed", full.Dir, full.Need, disk.Dir)
	}
	if msg := full.Error(); !strings.Contains(msg, "free space on the disk holding "+disk.Dir) || !strings.Contains(msg, "no space left on device") {
		t.Errorf("NoSpaceError = %q; want the cause and where to free space", msg)
	}
	// The old probe's few bytes still fit: that is why readiness said 200.
	if err := st.Update(ctx, func(tx *Tx) error { return tx.bucket(bucketMeta).Put([]byte("tiny"), []byte("x")) }); err != nil {
		t.Fatalf("a tiny write on the full disk: %v (the test needs the file's free pages)", err)
	}
	if st.NoSpace() == nil {
		t.Error("a tiny write cleared NoSpace; only a write as large as the one that failed may")
	}
	if err := st.Ping(ctx); !errors.As(err, &full) {
		t.Fatalf("Ping on the full disk = %v; want the *NoSpaceError", err)
	}

	disk.Free()
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping once space is freed: %v", err)
	}
	if err := st.NoSpace(); err != nil {
		t.Errorf("NoSpace once the probe committed = %v; want nil", err)
	}
	if err := putBig(st, "big", 512<<10); err != nil {
		t.Fatalf("the 512 KiB write once space is freed: %v", err)
	}
	if err := st.View(func(tx *Tx) error {
		if tx.bucket(bucketMeta).Get(probeKey) != nil {
			t.Error("the space probe was left in the meta bucket")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestCreateOnFullDisk: a first open on a full disk fails with a sentence
// that says to free space, and leaves no file behind (a 0-byte handoff.db
// would refuse every later start as empty); once space is freed it opens.
func TestCreateOnFullDisk(t *testing.T) {
	boltOnly(t)
	disk := smalldisk.Mount(t, 1<<20)
	dir := filepath.Join(disk.Dir, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	disk.Fill()
	_, err := Open(dir, Options{})
	var ce *CreateError
	if !errors.As(err, &ce) {
		t.Fatalf("Open on a full disk = %v; want a *CreateError", err)
	}
	want := "store: cannot create " + filepath.Join(dir, FileName) + ": no space left on device, and nothing was left behind: free space on the disk holding " + dir + ", then start again"
	if err.Error() != want {
		t.Errorf("Open on a full disk:\n got %q\nwant %q", err, want)
	}
	if _, err := os.Lstat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after the failed open, %s: %v; want no file", FileName, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("after the failed open the data folder holds %d entries; want none", len(entries))
	}
	disk.Free()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open once space is freed: %v", err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	st.Close()
}

// TestUnmakeKeepsOldFiles: a failed open of a file that existed is never
// removed, whatever the cause; unmake removes only the made file it is
// given, never the database's name.
func TestUnmakeKeepsOldFiles(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path, Options{}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("OpenFile on an empty file = %v; want it refused as empty", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the existing empty file is gone after a refused open: %v", err)
	}
	made := filepath.Join(dir, ".handoff.db.new-1")
	if err := os.WriteFile(made, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("boom")
	if got := unmake(path, made, cause); !errors.Is(got, cause) || !strings.Contains(got.Error(), "nothing of "+path+" was left behind") {
		t.Errorf("unmake of a made file = %v; want the cause and that nothing was left", got)
	}
	if _, err := os.Stat(made); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unmake left the file it made: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("unmake touched the database's name: %v", err)
	}
}

// TestCommitsCounts: Commits counts the rounds that committed, not a
// round whose only caller failed (it rolled back).
func TestCommitsCounts(t *testing.T) {
	st := openTest(t)
	before := st.Commits()
	for i := range 3 {
		if err := putBig(st, "k", 10+i); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Commits() - before; got != 3 {
		t.Errorf("three writes counted %d commits, want 3", got)
	}
	boom := errors.New("boom")
	if err := st.Update(context.Background(), func(*Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing write = %v, want its error", err)
	}
	if got := st.Commits() - before; got != 3 {
		t.Errorf("after a failed write Commits counted %d, want still 3", got)
	}
}
