//go:build !unix

package store

import "os"

// lockedByOther is not known here: bbolt's own lock reports a busy file.
func lockedByOther(*os.File) bool { return false }
