// Package smalldisk mounts a real filesystem of a few megabytes for a test
// to fill: the full-disk tests of store, e2e and web. It imports nothing of
// handoff, so that store's own tests can use it.
package smalldisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Disk is a real filesystem of a few megabytes, a tmpfs mounted for
// one test, that a test fills to make every write past its free pages fail
// with ENOSPC, as a full disk does. Mounting needs root (the CI machine
// runs as root); a test that cannot mount one is skipped, saying why.
type Disk struct {
	Dir string // the mount point, empty at first
	t   testing.TB
}

// Mount mounts a tmpfs of size bytes (rounded up to pages) in a
// fresh folder and unmounts it when the test ends.
func Mount(t testing.TB, size int64) *Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a full-disk test mounts a small tmpfs, which needs root; run it as root (the CI machine does)")
	}
	dir := filepath.Join(t.TempDir(), "small-disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10)+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("a full-disk test needs a small filesystem of its own, and mount -t tmpfs failed here (%v: %s): no container privilege to mount", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return &Disk{Dir: dir, t: t}
}

// Fill writes a file in the disk until the disk is full and returns it;
// removing it frees the space again (Free).
func (d *Disk) Fill() string {
	d.t.Helper()
	path := filepath.Join(d.Dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatalf("fill %s: %v", d.Dir, err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for size := len(chunk); size > 0; {
		_, err := f.Write(chunk[:size])
		switch {
		case errors.Is(err, syscall.ENOSPC):
			size /= 2 // down to the last byte that fits
		case err != nil:
			d.t.Fatalf("fill %s: %v", d.Dir, err)
		}
	}
	return path
}

// Free removes what Fill wrote.
func (d *Disk) Free() {
	d.t.Helper()
	if err := os.Remove(filepath.Join(d.Dir, "filler")); err != nil {
		d.t.Fatalf("free %s: %v", d.Dir, err)
	}
}

// Grow remounts the disk with size bytes: space freed without touching
// its files.
func (d *Disk) Grow(size int64) {
	d.t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+strconv.FormatInt(size, 10), d.Dir).CombinedOutput(); err != nil {
		d.t.Fatalf("remount %s with %d bytes: %v: %s", d.Dir, size, err, out)
	}
}
