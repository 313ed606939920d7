package main

import (
	"errors"
	"fmt"

	"github.com/handoff/handoff/store"
)

// verify checks a database or backup file: bbolt structure, schema version,
// that every record decodes strictly (no key it does not know, valid
// UTF-8), and that every index agrees with its records. A record that
// cannot be read is printed on its own line (kind, key, reason) and fails
// the verify, as damage does.
func verify(args []string, e env) error {
	fs := newFlagSet("verify", e)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("verify needs exactly one FILE")
	}
	path := fs.Arg(0)
	err := store.VerifyFile(path)
	var ue *store.UnreadableRecordsError
	if errors.As(err, &ue) {
		// No structural damage: each record that cannot be read, one a line.
		for _, u := range ue.Records {
			fmt.Fprintf(e.stdout, "%s: %s %s cannot be read: %s\n", path, u.Kind, u.ID, u.Reason)
		}
		if ue.More > 0 {
			fmt.Fprintf(e.stdout, "%s: %d more records cannot be read\n", path, ue.More)
		}
	}
	if err != nil {
		return err
	}
	// The file's own schema: an older one is migrated when a server opens it.
	v, err := store.FileSchema(path)
	if err != nil {
		return err
	}
	note := ""
	if v < store.SchemaVersion {
		note = fmt.Sprintf("; this binary writes schema %d and migrates it when serve opens it", store.SchemaVersion)
	}
	fmt.Fprintf(e.stdout, "%s: ok (schema %d%s)\n", path, v, note)
	return nil
}
