package store

import (
	"bytes"
	"strings"
)

// AuditFilter picks entries of the audit log for one page, newest first.
type AuditFilter struct {
	// Who and Action match a whole value, case and accents aside; "" any.
	Who, Action string
	// Text is a part of the target or the detail (or the address the
	// action came from), case and accents aside; "" any.
	Text string
	// Before is the id of an entry: the page holds older ones only; ""
	// starts at the newest.
	Before string
	Limit  int // entries on the page (at least 1)
	// Scan bounds how many entries one page reads while filtering (0: no
	// bound), so a filter that matches little answers as fast with a
	// million entries as with a hundred; the page then ends early.
	Scan int
}

// AuditPage is one page of the audit log: the entries of f, newest first,
// and Next, the Before of the following page ("" when the log ends here).
// Partial says the page ended because its Scan ran out, not because it
// filled (it may be short, even empty, with a Next).
type AuditPage struct {
	Entries []AuditEntry
	Next    string
	Partial bool
	Scanned int
}

// AuditPageOf reads one page of the audit log in one read transaction,
// walking the ULID keys down from f.Before.
func (s *Store) AuditPageOf(f AuditFilter) (AuditPage, error) {
	if f.Limit < 1 {
		f.Limit = 1
	}
	who, action, text := normTerm(f.Who), normTerm(f.Action), normTerm(f.Text)
	keep := func(e AuditEntry) bool {
		return (who == "" || normTerm(e.Who) == who) && (action == "" || normTerm(e.Action) == action) &&
			(text == "" || strings.Contains(normTerm(e.Target+" "+e.Detail+" "+e.From), text))
	}
	out := AuditPage{Entries: []AuditEntry{}}
	err := s.view(func(tx *Tx) error {
		c := tx.bucket(bucketAudit).Cursor()
		var k, v []byte
		if f.Before == "" {
			k, v = c.Last()
		} else {
			before := []byte(f.Before)
			if k, v = c.Seek(before); k == nil {
				k, v = c.Last()
			}
			for k != nil && bytes.Compare(k, before) >= 0 {
				k, v = c.Prev()
			}
		}
		for ; k != nil; k, v = c.Prev() {
			if len(out.Entries) == f.Limit || f.Scan > 0 && out.Scanned == f.Scan {
				// More may follow: the next page starts after the last
				// entry this one read.
				out.Partial = len(out.Entries) < f.Limit
				return nil
			}
			out.Scanned++
			out.Next = string(k)
			var e AuditEntry
			if err := decode(v, &e); err != nil {
				tx.skip(unreadableOf("audit entry", k, err), nil) // as AuditLog does
				continue
			}
			if keep(e) {
				out.Entries = append(out.Entries, e)
			}
		}
		out.Next = "" // the log ends on this page
		return nil
	})
	return out, err
}
