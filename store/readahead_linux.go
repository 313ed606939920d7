//go:build linux

package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCache asks the kernel to drop the page cache that f's plain reads
// (a page walk: pagewalk.go) filled, once they are done. The kernel keeps
// every page that is dirty or mapped, so the server's own pages, read
// through bbolt's mmap, stay; the walk's go.
//
// Why: the walk's reads go through readahead, which fills the page cache
// with large folios, and a later commit's 4 KiB pwrite into one dirties
// the whole folio, which write_bytes then counts as written. Measured with
// bench grow on a 200k-event file after the background page check: 13–14
// KiB "written" per event at 64 connections, 850–1,150 at one, where
// bbolt's pwrites were 9.8 and 165; with the drop the two agree. Turning
// readahead off for the walk instead (FADV_RANDOM) agreed too but made the
// walk of that file take 40 s instead of 3.
func dropCache(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
