package main

import (
	"errors"
	"fmt"

	"github.com/handoff/handoff/store"
)

// verify checks a database or backup file: bbolt structure, schema version,
// and that every index agrees with its records.
func verify(args []string, e env) error {
	fs := newFlagSet("verify", e)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("verify needs exactly one FILE")
	}
	path := fs.Arg(0)
	if err := store.VerifyFile(path); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: ok (schema %d)\n", path, store.SchemaVersion)
	return nil
}
