package store

import (
	"time"

	"github.com/oklog/ulid/v2"
)

// EachAuditSince calls fn with the audit entries written at or after since,
// newest first, reading at most limit of them: the undo stack's bounded read
// of what a person did in the last undo window (review.UndoableTx). The
// entries' keys are ULIDs of their times, so the walk stops at the first
// older key without decoding it; an entry that cannot be read is stepped
// over (and listed as unreadable).
func (tx *Tx) EachAuditSince(since time.Time, limit int, fn func(AuditEntry) error) error {
	c := tx.bucket(bucketAudit).Cursor()
	n := 0
	for k, v := c.Last(); k != nil && n < limit; k, v = c.Prev() {
		if id, err := ulid.ParseStrict(string(k)); err == nil && ulid.Time(id.Time()).Before(since.Truncate(time.Millisecond)) {
			return nil
		}
		n++
		var e AuditEntry
		if err := decode(v, &e); err != nil {
			tx.skip(unreadableOf("audit entry", k, err), nil)
			continue
		}
		if e.At.Before(since) {
			continue // an id given by its caller, not of its time
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
