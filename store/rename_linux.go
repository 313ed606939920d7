package store

import "golang.org/x/sys/unix"

// renameNoReplace renames from to to, failing with fs.ErrExist (EEXIST)
// when to exists: never replacing it.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
