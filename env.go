package main

import (
	"flag"
	"io"
)

// env is the process's outside world, passed in so commands can be tested.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// override sets *flag to the environment variable key when that is set:
// the environment wins over the command line, so a container can set the
// data folder and address once for every command.
func (e env) override(flag *string, key string) {
	if v := e.getenv(key); v != "" {
		*flag = v
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}
