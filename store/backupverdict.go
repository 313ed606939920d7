package store

import (
	"errors"
	"fmt"
)

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
		for _, u := range ure.Records {
			warnings = append(warnings, fmt.Sprintf("%s %s cannot be read: %s", u.Kind, u.ID, u.Reason))
		}
		if ure.More > 0 {
			warnings = append(warnings, fmt.Sprintf("and %d more unreadable records", ure.More))
		}
		if len(warnings) == 0 {
			warnings = []string{"some records cannot be read"}
		}
		return true, warnings
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
