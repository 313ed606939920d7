package store

import (
	"errors"
	"fmt"
	"strings"
)

// UnreadableRecordsError says that a file is sound as a database — bbolt's
// pages, the buckets, the schema — and that only these records cannot be
// read (a record's stored form the code no longer decodes, an index entry
// without its record). Such a file is as good as the live one it was
// copied from: a backup of it is kept, and counts, with these as its
// warnings (BackupVerdict).
//
// It is the seam between the store's check and the backups: Check does not
// yet tell record-level problems from structural damage, so VerifyFile
// never returns one today; the check in the child process hands it on
// (verdict.Records) once verifyHere does.
type UnreadableRecordsError struct {
	Path    string
	Records []string // one line each: which record, and why it cannot be read
}

func (e *UnreadableRecordsError) Error() string {
	return fmt.Sprintf("store: %s has %d unreadable records: %s", e.Path, len(e.Records), strings.Join(e.Records, "; "))
}

// BackupVerdict is the one reading of VerifyFile's answer for a backup:
// ok says the copy can be restored, so it takes a backup's name, counts
// toward backups.keep and may be copied offsite; warnings lists the
// unreadable records a usable copy carries, as the live file does. Any
// other error — damage, a check that could not run — is not ok.
func BackupVerdict(err error) (ok bool, warnings []string) {
	if err == nil {
		return true, nil
	}
	var ure *UnreadableRecordsError
	if errors.As(err, &ure) {
		if len(ure.Records) == 0 {
			return true, []string{"some records cannot be read"}
		}
		return true, ure.Records
	}
	return false, nil
}

// RejectedError is a scheduled backup whose copy failed verification: it
// never took a backup's name, never counted toward keep and pruned
// nothing; the copy is kept apart in RejectedDir with its reason.
type RejectedError struct {
	Name   string // the name the copy would have had
	Kept   string // where the copy is kept ("" when it could not be kept)
	Reason string // one sentence: why it failed
}

func (e *RejectedError) Error() string {
	if e.Kept == "" {
		return fmt.Sprintf("the backup %s failed verification and was not kept: %s", e.Name, e.Reason)
	}
	return fmt.Sprintf("the backup %s failed verification, so it does not count toward keep and no older backup was deleted (the copy is kept in %s): %s", e.Name, RejectedDir, e.Reason)
}

// reasonOf is why verification refused the copy, in one sentence without
// the temporary file's path.
func reasonOf(err error) string {
	var de *DamagedError
	if errors.As(err, &de) {
		return "it " + de.Problem
	}
	return err.Error()
}
