package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// One bad record never takes down more than itself. A record whose stored
// bytes do not decode (bit rot, a bug in a stored form) is an *Unreadable:
// the error every read of it returns (table.get, table.lookup), which a
// walk over many records (a page of the queue, the leads, the dead
// letters, a timeline, the search, an export, a claim) collects and steps
// over instead of failing as a whole, so each list can show it as one row
// with its id and reason. Check names each one too, apart from structural
// damage (CheckReport): a file whose only problems are unreadable records
// is still served, and the store remembers them (Store.Unreadable) for the
// overview's banner and the handoff_unreadable_records gauge.

// Unreadable is one record that cannot be read, and why. It is the error
// of a read of it, checked with errors.As.
type Unreadable struct {
	Kind   string `json:"kind"` // what the record is: "event", "draft", "job", "lead", "outbox row", …
	ID     string `json:"id"`   // its primary key
	Reason string `json:"reason"`
}

func (u *Unreadable) Error() string {
	return fmt.Sprintf("%s %s cannot be read: %s", u.Kind, u.ID, u.Reason)
}

// AsUnreadable is the unreadable record err is about, if it is about one.
func AsUnreadable(err error) (*Unreadable, bool) {
	var u *Unreadable
	ok := errors.As(err, &u)
	return u, ok
}

// unreadableRecord is a record that decoded but says it cannot be read
// (an event the stored-form repair could not recover: Event.Unreadable).
type unreadableRecord interface{ unreadableReason() string }

func (ev *Event) unreadableReason() string { return ev.Unreadable }

// skip reports whether err is an unreadable record, which a walk steps
// over instead of failing: the store remembers it (Store.Unreadable), and
// list, when not nil, gets it too (once), for the walk's result to show.
// Any other error, and nil, is false.
func (tx *Tx) skip(err error, list *[]Unreadable) bool {
	u, ok := AsUnreadable(err)
	if !ok {
		return false
	}
	if tx.seen != nil {
		tx.seen.add(*u)
	}
	if list != nil {
		(*unreadables)(list).skip(err)
	}
	return true
}

// unreadables collects the unreadable records a walk stepped over.
type unreadables []Unreadable

// skip reports whether err is an unreadable record, which it adds (once):
// the walk lists it and goes on. Any other error ends the walk.
func (us *unreadables) skip(err error) bool {
	u, ok := AsUnreadable(err)
	if !ok {
		return false
	}
	if !slices.ContainsFunc(*us, func(o Unreadable) bool { return o.Kind == u.Kind && o.ID == u.ID }) {
		*us = append(*us, *u)
	}
	return true
}

// unmarshal decodes one record's JSON into v. Reads are lenient: a field
// this binary does not know is ignored (a record written by a newer minor
// version still reads; the field is kept by nobody), as encoding/json
// does. Check decodes strictly (strict): a key it does not know, invalid
// UTF-8 or bytes after the value make the record a problem, since a byte
// flipped inside a key ("correlation_id" become "correlation_\xf7d") or a
// text keeps the JSON valid and would otherwise silently drop the field or
// change the text. A body kept as raw JSON (an event's "body") is the
// sender's bytes: it is only checked to be JSON, which the decode did.
func unmarshal(raw []byte, v any, strict bool) error {
	if !strict {
		return json.Unmarshal(raw, v)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("its JSON has bytes after the record")
	}
	if utf8.Valid(raw) {
		return nil
	}
	// Which value holds it (json.RawMessage keeps each one's bytes as stored).
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("its JSON holds invalid UTF-8 at byte %d", invalidAt(raw))
	}
	for k, val := range fields {
		if k != "body" && !utf8.Valid(val) {
			return fmt.Errorf("its JSON holds invalid UTF-8 in %q, at byte %d of it", k, invalidAt(val))
		}
	}
	return nil
}

// invalidAt is the offset of the first invalid UTF-8 sequence in b.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// unreadableOf is the Unreadable of the record at key of kind, whose
// decode failed with err (or whose decoded form says it cannot be read).
func unreadableOf(kind string, key []byte, err error) *Unreadable {
	return &Unreadable{Kind: kind, ID: string(key), Reason: clip(err.Error())}
}

// seen is the store's memory of the unreadable records it knows: those
// the start's check found and those any read met since. It only grows
// while the process runs (a record deleted or rewritten since stays
// listed until the next start).
type seen struct {
	mu   sync.Mutex
	list []Unreadable
}

func (s *seen) add(us ...Unreadable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range us {
		if !slices.ContainsFunc(s.list, func(o Unreadable) bool { return o.Kind == u.Kind && o.ID == u.ID }) {
			s.list = append(s.list, u)
		}
	}
}

// Unreadable lists the unreadable records this store knows of: what the
// check before the open found (a file of at most 64 MiB opened with
// CheckPages) and every one a read met since, in the order they were met.
func (s *Store) Unreadable() []Unreadable {
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	return slices.Clone(s.seen.list)
}

// UnreadableOf is Unreadable, only the records of the kinds named: what a
// list of those records has stepped over.
func (s *Store) UnreadableOf(kinds ...string) []Unreadable {
	var out []Unreadable
	for _, u := range s.Unreadable() {
		if slices.Contains(kinds, u.Kind) {
			out = append(out, u)
		}
	}
	return out
}

// noteUnreadable remembers the unreadable records a walk met and returns them.
func (s *Store) noteUnreadable(us []Unreadable) []Unreadable {
	if len(us) > 0 {
		s.seen.add(us...)
	}
	return us
}

// UnreadableRecordsError says that a file's only problems are records that
// cannot be read: no structural damage. The server starts on such a file;
// verify fails on it, naming each record.
type UnreadableRecordsError struct {
	Path    string
	Records []Unreadable
	More    int // unreadable records beyond those listed (Check lists maxProblems per kind)
}

func (e *UnreadableRecordsError) Error() string {
	n := len(e.Records) + e.More
	var ids []string
	for _, u := range e.Records[:min(3, len(e.Records))] {
		ids = append(ids, u.Kind+" "+u.ID)
	}
	s := fmt.Sprintf("store: %s: %d %s cannot be read (%s", e.Path, n, plural(n, "record", "records"), strings.Join(ids, ", "))
	if n > len(ids) {
		s += ", …"
	}
	return s + "): see handoff verify"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
