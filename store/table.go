package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// A table is one record type's bucket and every secondary index over it,
// declared once (tables.go). Inserting, moving, deleting and checking
// index entries all derive from that one declaration, so no code path can
// write a record and forget one of its indexes, and Check proves exactly
// what the writes maintain.
type table[T any] struct {
	name   string          // what one record is called in errors: "job"
	bucket []byte          // the records, by primary key
	key    func(*T) []byte // the record's primary key
	// label names a record in Check's messages ("01J… (available)"); nil: its key.
	label   func(*T) string
	indexes []index[T]
	// read, when set, is how check reads a record instead of decode (an
	// older schema's records that its migration repairs: tables.go).
	read func(raw []byte, v *T, strict bool) error
}

// checkDecode reads a record for check (strict) and strays.
func (t *table[T]) checkDecode(raw []byte, v *T, strict bool) error {
	if t.read != nil {
		return t.read(raw, v, strict)
	}
	return decodeAs(raw, v, strict)
}

// An index is one secondary index of a table, in its own bucket.
type index[T any] struct {
	bucket []byte
	// key is the record's entry; nil when the record is not in the index
	// (idx_jobs_ready holds only jobs that can run): that is the condition.
	key func(*T) []byte
	// keys, instead of key, gives a record several entries (none: not in
	// the index), each ending with the primary key, with no value
	// (idx_handoffs_by_term: one entry per word of a lead's name).
	keys func(*T) [][]byte
	// value is the entry's value, naming the record (its primary key); nil:
	// the value is empty and the entry's key ends with the primary key.
	value func(*T) []byte
	// ref reads, from one entry, the primary key of the record it belongs to.
	ref func(k, v []byte) []byte
	// shared: records share entry keys and the entry names the last one
	// inserted (idx_drafts_by_event: every version of an event's draft has
	// its event key, and the entry names the current version).
	shared bool
}

// all is every entry key of v in ix: none when v is not in it.
func (ix *index[T]) all(v *T) [][]byte {
	if ix.keys != nil {
		return ix.keys(v)
	}
	if k := ix.key(v); k != nil {
		return [][]byte{k}
	}
	return nil
}

// entry is the value an index entry holds for v: nil for an index without values.
func (ix *index[T]) entry(v *T) []byte {
	if ix.value == nil {
		return nil
	}
	return ix.value(v)
}

// describe names v in errors.
func (t *table[T]) describe(v *T) string {
	if t.label != nil {
		return t.name + " " + t.label(v)
	}
	return fmt.Sprintf("%s %s", t.name, t.key(v))
}

// get reads the record at key: ErrNotFound when absent. The record is
// decoded, so it outlives the transaction.
func (t *table[T]) get(tx *Tx, key []byte) (T, error) {
	raw := tx.bucket(t.bucket).Get(key)
	if raw == nil {
		var zero T
		return zero, ErrNotFound
	}
	v := new(T) // on the heap only when there is a record to decode
	if err := decode(raw, v); err != nil {
		var zero T
		return zero, unreadableOf(t.name, key, err)
	}
	return *v, nil
}

// has reports whether a record is stored at key, without decoding it.
func (t *table[T]) has(tx *Tx, key []byte) bool {
	return tx.bucket(t.bucket).Get(key) != nil
}

// lookup follows the entry at k of index ix (a value index) to its record:
// ErrNotFound when there is no entry. An entry naming a record that cannot
// be read is damage, not absence, and never reads as ErrNotFound: the
// record's *Unreadable, or the missing record named.
func (t *table[T]) lookup(tx *Tx, ix *index[T], k []byte) (T, error) {
	var zero T
	v := tx.bucket(ix.bucket).Get(k)
	if v == nil {
		return zero, ErrNotFound
	}
	pk := ix.ref(k, v)
	rec, err := t.get(tx, pk)
	if errors.Is(err, ErrNotFound) {
		return zero, fmt.Errorf("%s points at %s %s, which does not exist", ix.bucket, t.name, pk)
	}
	if err != nil {
		return zero, fmt.Errorf("%s points at %s %s: %w", ix.bucket, t.name, pk, err)
	}
	return rec, nil
}

// insert writes a new record and its index entries. It trusts the caller
// that nothing is stored under v's key (it looked in this transaction, or
// minted a fresh ULID): a new record has no old entries to remove, and
// writing over a stored one would leave that one's entries behind. put
// with old nil is the insert that looks first.
func (t *table[T]) insert(tx *Tx, v *T) error {
	raw, err := encode(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", t.describe(v), err)
	}
	return t.insertRaw(tx, v, raw)
}

// insertRaw is insert with v already encoded as raw, so the encoding can
// happen outside the committer (RecordEvent): inside, it only copies bytes.
func (t *table[T]) insertRaw(tx *Tx, v *T, raw []byte) error {
	for i := range t.indexes {
		ix := &t.indexes[i]
		for _, k := range ix.all(v) {
			if err := tx.bucket(ix.bucket).Put(k, ix.entry(v)); err != nil {
				return err
			}
		}
	}
	return tx.bucket(t.bucket).Put(t.key(v), raw)
}

// put writes v over old, the record as stored (a copy taken before v was
// changed), moving each index entry whose key or value changed. With old
// nil it inserts v, refusing a key that holds a record already.
func (t *table[T]) put(tx *Tx, old, v *T) error {
	if old == nil {
		if t.has(tx, t.key(v)) {
			return fmt.Errorf("insert %s: a record is already stored under that key", t.describe(v))
		}
		return t.insert(tx, v)
	}
	pk := t.key(v)
	if opk := t.key(old); !bytes.Equal(opk, pk) {
		return fmt.Errorf("put %s over %s %s: a record's key never changes", t.describe(v), t.name, opk)
	}
	for i := range t.indexes {
		ix := &t.indexes[i]
		if ix.keys != nil {
			if err := ix.move(tx, ix.keys(old), ix.keys(v)); err != nil {
				return err
			}
			continue
		}
		ko, kn := ix.key(old), ix.key(v)
		vo, vn := ix.entry(old), ix.entry(v)
		if bytes.Equal(ko, kn) && (ko == nil) == (kn == nil) && bytes.Equal(vo, vn) {
			continue
		}
		if ko != nil {
			if err := ix.remove(tx, ko, vo); err != nil {
				return err
			}
		}
		if kn != nil {
			if err := tx.bucket(ix.bucket).Put(kn, vn); err != nil {
				return err
			}
		}
	}
	raw, err := encode(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", t.describe(v), err)
	}
	return tx.bucket(t.bucket).Put(pk, raw)
}

// move replaces the entries before of a several-entry index with after,
// touching only the keys that differ.
func (ix *index[T]) move(tx *Tx, before, after [][]byte) error {
	b := tx.bucket(ix.bucket)
	for _, k := range before {
		if !slices.ContainsFunc(after, func(n []byte) bool { return bytes.Equal(n, k) }) {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	for _, k := range after {
		if !slices.ContainsFunc(before, func(o []byte) bool { return bytes.Equal(o, k) }) {
			if err := b.Put(k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// remove deletes the entry at k when it is the record's: an entry with a
// value is left alone when it names another record (the live job that
// took a unique key over, the newer version of a draft).
func (ix *index[T]) remove(tx *Tx, k, value []byte) error {
	b := tx.bucket(ix.bucket)
	if ix.value != nil && !bytes.Equal(b.Get(k), value) {
		return nil
	}
	return b.Delete(k)
}

// delete removes the stored record v and its index entries.
func (t *table[T]) delete(tx *Tx, v *T) error {
	for i := range t.indexes {
		ix := &t.indexes[i]
		for _, k := range ix.all(v) {
			if err := ix.remove(tx, k, ix.entry(v)); err != nil {
				return err
			}
		}
	}
	return tx.bucket(t.bucket).Delete(t.key(v))
}

// maxProblems bounds what check reports per index, so that one lost index
// of a million records is one screen, not a million lines.
const maxProblems = 20

// check proves that the table's records and indexes agree in both
// directions: every record is in every index whose condition it meets
// (under the entry its declaration gives, naming it), and every entry
// belongs to a record that has it. The second half is counted: the entries
// that records own must be all the entries. When the count disagrees the
// index is walked to name the entries nobody owns.
//
// Each record is decoded strictly (unmarshal): one that does not (bytes
// that are not JSON, a key it does not know, invalid UTF-8) is unreadable,
// and its entries cannot be proven from it (what a lenient read makes of
// it lacks the field the flipped byte hid), so an entry naming it is its
// problem, not the index's. The disagreements no unreadable record
// explains go to r.damaged.
func (t *table[T]) check(tx *Tx, r *checking) {
	report := func(n *int, err error) {
		if *n++; *n <= maxProblems {
			r.damaged = append(r.damaged, err)
		}
	}
	type tally struct{ owned, bad int }
	tallies := make([]tally, len(t.indexes))
	undecodable := 0
	_ = tx.bucket(t.bucket).ForEach(func(pk, raw []byte) error {
		var v T
		if err := t.checkDecode(raw, &v, true); err != nil {
			if undecodable++; undecodable <= maxProblems {
				r.unreadable = append(r.unreadable, *unreadableOf(t.name, pk, err))
			} else {
				r.moreUnreadable++
			}
			r.undecodable[t.name]++
			r.suspect[t.name+"\x00"+string(pk)] = true
			return nil
		}
		for i := range t.indexes {
			ix, n := &t.indexes[i], &tallies[i]
			for _, k := range ix.all(&v) {
				got := tx.bucket(ix.bucket).Get(k)
				switch {
				case got == nil:
					report(&n.bad, fmt.Errorf("check: %s is not in %s (%q)", t.describe(&v), ix.bucket, k))
				case ix.value == nil || bytes.Equal(got, ix.value(&v)):
					n.owned++
				case !ix.shared:
					report(&n.bad, fmt.Errorf("check: %s: its entry in %s names %s %s", t.describe(&v), ix.bucket, t.name, got))
				}
			}
		}
		return nil
	})
	for i := range t.indexes {
		ix, n := &t.indexes[i], &tallies[i]
		entries := tx.bucket(ix.bucket).Stats().KeyN
		if entries != n.owned {
			strays, unexplained, explained := t.strays(tx, ix, &n.bad, r)
			if unexplained > 0 || explained == 0 {
				r.damaged = append(r.damaged, fmt.Errorf("check: %s holds %d entries, but the %s records own %d", ix.bucket, entries, t.name, n.owned))
			}
			r.damaged = append(r.damaged, strays...)
		}
		if n.bad > maxProblems {
			r.damaged = append(r.damaged, fmt.Errorf("check: %d more problems with %s", n.bad-maxProblems, ix.bucket))
		}
	}
}

// problems is check's findings as errors, damage and unreadable records alike.
func (t *table[T]) problems(tx *Tx) []error {
	r := newChecking()
	t.check(tx, r)
	return CheckReport{Damaged: r.damaged, Unreadable: r.unreadable, MoreUnreadable: r.moreUnreadable}.errs()
}

// strays names the entries of ix that belong to no record: the record they
// name is absent or has another entry. An entry naming a record that
// cannot be read is not named (explained): the record is.
func (t *table[T]) strays(tx *Tx, ix *index[T], bad *int, r *checking) (problems []error, unexplained, explained int) {
	records := tx.bucket(t.bucket)
	_ = tx.bucket(ix.bucket).ForEach(func(k, v []byte) error {
		pk := ix.ref(k, v)
		var why string
		raw := records.Get(pk)
		var rec T
		switch {
		case raw == nil:
			why = "which does not exist"
		case r.suspect[t.name+"\x00"+string(pk)] || t.checkDecode(raw, &rec, false) != nil:
			explained++
			return nil
		case ix.keys != nil:
			if slices.ContainsFunc(ix.keys(&rec), func(o []byte) bool { return bytes.Equal(o, k) }) {
				return nil
			}
			why = "which has no such entry"
		default:
			own := ix.key(&rec)
			switch {
			case own == nil:
				why = "which does not belong in it"
			case !bytes.Equal(own, k):
				why = fmt.Sprintf("whose entry is %q", own)
			case ix.value != nil && !bytes.Equal(v, ix.value(&rec)):
				why = fmt.Sprintf("but names %q", v)
			default:
				return nil
			}
		}
		unexplained++
		if *bad++; *bad <= maxProblems {
			problems = append(problems, fmt.Errorf("check: %s entry %q names %s %s, %s", ix.bucket, k, t.name, pk, why))
		}
		return nil
	})
	return problems, unexplained, explained
}

// Index entries name their record in one of these ways.

// refValue: the entry's value is the primary key.
func refValue(_, v []byte) []byte { return v }

// refKey: the entry's key is the primary key.
func refKey(k, _ []byte) []byte { return k }

// refAfterTime: the key is 8 time bytes and the primary key (timeKey).
func refAfterTime(k, _ []byte) []byte {
	if len(k) < 8 {
		return nil
	}
	return k[8:]
}

// refAfter returns a ref for keys "<prefix> sep <primary key>", the
// separator being the first sep in the key, skipping skip more bytes after
// it (a status 0x00 and a time).
func refAfter(sep byte, skip int) func(k, v []byte) []byte {
	return func(k, _ []byte) []byte {
		i := bytes.IndexByte(k, sep)
		if i < 0 || len(k) < i+1+skip {
			return nil
		}
		return k[i+1+skip:]
	}
}

// refAfterLast returns a ref for keys "<prefix> sep <primary key>" whose
// primary key never holds sep (a ULID) while the prefix may.
func refAfterLast(sep byte) func(k, v []byte) []byte {
	return func(k, _ []byte) []byte {
		return k[bytes.LastIndexByte(k, sep)+1:]
	}
}
