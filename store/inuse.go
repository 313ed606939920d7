package store

import "errors"

// InUse reports whether err is an open refused because another process
// (a running server) holds the database file.
func InUse(err error) bool {
	var e inUseError
	return errors.As(err, &e)
}
