//go:build !linux

package store

import "os"

// dropCache is readahead_linux.go's hint, which other systems go without.
func dropCache(*os.File) {}
