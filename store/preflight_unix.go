//go:build unix

package store

import (
	"errors"
	"os"
	"syscall"
)

// lockedByOther reports whether another open of the file holds bbolt's
// exclusive lock: then a writer may be halfway through a meta page, and
// what preflight read proves nothing.
func lockedByOther(f *os.File) bool {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return false
}
