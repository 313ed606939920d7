//go:build !linux

package store

import "errors"

// renameNoReplace is refused where the system offers no rename that
// cannot replace its target.
func renameNoReplace(from, to string) error {
	return errors.New("no rename without replacing on this system")
}
