package store

import (
	"fmt"
	"strconv"
)

// refuseNewerSchema is the refusal of a database that a newer handoff
// wrote (after an upgrade, a rollback to this binary): its layout may hold
// what this binary cannot read, so it is named before any other check
// could report the newer layout as damage. An older schema is fine: a
// read-write open migrates it.
func (s *Store) refuseNewerSchema(path string) error {
	v := 0
	err := s.View(func(tx *Tx) error {
		if meta := tx.bucket(bucketMeta); meta != nil {
			v, _ = strconv.Atoi(string(meta.Get(keySchema)))
		}
		return nil
	})
	if err != nil || v <= SchemaVersion {
		return err
	}
	return &DamagedError{Path: path, Problem: newerSchemaProblem(v)}
}

// newerSchemaProblem says what a file of schema v is and what to do.
func newerSchemaProblem(v int) string {
	return fmt.Sprintf("was written by a newer handoff (schema %d; this binary reads schemas 1 to %d): run that release again, or restore a backup taken before the upgrade", v, SchemaVersion)
}

// FileSchema is the schema version stored in the database file at path,
// read with a read-only open: call it on a file VerifyFile has passed.
func FileSchema(path string) (int, error) {
	st, err := OpenFile(path, Options{ReadOnly: true, Timeout: checkerLockTimeout})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	v := 0
	err = st.View(func(tx *Tx) error {
		if meta := tx.bucket(bucketMeta); meta != nil {
			v, _ = strconv.Atoi(string(meta.Get(keySchema)))
		}
		return nil
	})
	return v, err
}
