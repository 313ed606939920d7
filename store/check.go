package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/handoff/handoff/store/engine"
)

// Check verifies the file: bbolt's own page check, the schema version, and
// that every index agrees with its records in both directions, each record
// decoded strictly. It returns every problem found, joined: structural
// damage and unreadable records alike (Inspect tells them apart). bbolt's
// page check is not safe beside a
// writer, so on a live store it runs while the committer holds the write
// lock (a read-only store has no writer), in a read transaction of its
// own: the round's write transaction may already hold its neighbours'
// writes, which bbolt reads in a way the check cannot use (an entry put
// with an empty value reads as absent until it is committed, and
// Bucket.Stats counts only committed pages).
func (s *Store) Check() error {
	r, err := s.Inspect()
	if err != nil {
		return err
	}
	return r.Err()
}

// CheckReport is what Check found, in the two parts that mean different
// things for the file.
type CheckReport struct {
	// Damaged is what makes the file unsound: bbolt's pages and meta, the
	// schema version, a missing bucket, an index or count that disagrees
	// with the records that can be read. A file with any is refused.
	Damaged []error
	// Unreadable is each record whose bytes do not decode, or decode only
	// leniently (a key this version does not know, invalid UTF-8), up to
	// maxProblems of each kind; MoreUnreadable counts the rest. Index
	// entries naming such a record, and the job counts when a job cannot
	// be read, are its problem and not reported apart. A file with only
	// these is served (each shows as an unreadable row) but fails verify.
	Unreadable     []Unreadable
	MoreUnreadable int
}

// Err is every problem of the report joined, unreadable records after the
// damage; nil when the file is sound.
func (r CheckReport) Err() error { return errors.Join(r.errs()...) }

// errs is every problem of the report.
func (r CheckReport) errs() []error {
	problems := slices.Clone(r.Damaged)
	for i := range r.Unreadable {
		problems = append(problems, fmt.Errorf("check: %w", &r.Unreadable[i]))
	}
	if r.MoreUnreadable > 0 {
		problems = append(problems, fmt.Errorf("check: %d more records cannot be read", r.MoreUnreadable))
	}
	return problems
}

// Inspect is Check's report, its two parts apart. The error is only for a
// check that could not run at all.
func (s *Store) Inspect() (CheckReport, error) {
	var r CheckReport
	fn := func(tx *Tx) error { r = inspect(tx); return nil }
	var err error
	if s.writes == nil {
		err = s.view(fn)
	} else {
		err = s.update(context.Background(), func(tx *Tx) error { return s.committed(tx, fn) })
	}
	if err == nil {
		s.seen.add(r.Unreadable...)
	}
	return r, err
}

// committed runs fn as one caller of a commit round, on the committed
// state, not the round's transaction tx. The committer is inside the gate
// already, and tx does not commit (or remap the file) until this returns,
// so a read transaction beside it is safe here.
func (s *Store) committed(_ *Tx, fn func(*Tx) error) error {
	return s.eng.View(func(rtx engine.Tx) error { return fn(&Tx{tx: rtx}) })
}

// checkCommitted is Check as one caller of a commit round (see committed).
func (s *Store) checkCommitted(tx *Tx) error {
	return s.committed(tx, check)
}

// check is Check inside a transaction.
func check(tx *Tx) error { return inspect(tx).Err() }

// checking is a check under way: what CheckReport gathers, how many
// records of each kind are unreadable, and which ("<kind> 0x00 <key>").
type checking struct {
	damaged        []error
	unreadable     []Unreadable
	moreUnreadable int
	undecodable    map[string]int
	suspect        map[string]bool
}

func newChecking() *checking {
	return &checking{undecodable: map[string]int{}, suspect: map[string]bool{}}
}

// inspect is Inspect inside a transaction.
func inspect(tx *Tx) CheckReport {
	damage := func(errs ...error) CheckReport { return CheckReport{Damaged: errs} }
	// The engine's own check first: on bbolt its pages, a truncated file
	// refused before the walk (engine.ErrBroken: nothing more is read).
	problems := tx.tx.Check()
	if len(problems) > 0 && errors.Is(problems[0], engine.ErrBroken) {
		return damage(problems...)
	}
	meta := tx.bucket(bucketMeta)
	if meta == nil {
		return damage(errors.New("check: no meta bucket: this is not a handoff database"))
	}
	// An older schema is fine: Open migrates it. A newer one is not ours to read.
	schema, err := strconv.Atoi(string(meta.Get(keySchema)))
	if err != nil || schema < 1 || schema > SchemaVersion {
		problems = append(problems, fmt.Errorf("check: schema version %q, want 1 to %d", meta.Get(keySchema), SchemaVersion))
	}
	for _, b := range allBuckets {
		if tx.bucket(b) == nil {
			problems = append(problems, fmt.Errorf("check: bucket %s is missing", b))
		}
	}
	if schema >= 3 && tx.bucket(bucketBulk) == nil {
		problems = append(problems, fmt.Errorf("check: bucket %s is missing", bucketBulk))
	}
	if schema >= 7 && tx.bucket(bucketHandoffsByTerm) == nil {
		problems = append(problems, fmt.Errorf("check: bucket %s is missing", bucketHandoffsByTerm))
	}
	if schema >= 14 && tx.bucket(bucketDraftsPending) == nil {
		problems = append(problems, fmt.Errorf("check: bucket %s is missing", bucketDraftsPending))
	}
	if schema >= 8 {
		for _, b := range [][]byte{bucketReceiptsByOutbox, bucketReceiptsByTime} {
			if tx.bucket(b) == nil {
				problems = append(problems, fmt.Errorf("check: bucket %s is missing", b))
			}
		}
	}
	if len(problems) > 0 {
		return damage(problems...)
	}
	r := newChecking()
	// Every index, both ways, derived from its declaration (tables.go).
	if schema >= 9 {
		eventsTable.check(tx, r)
	} else {
		eventsTableV8.check(tx, r)
	}
	if schema >= 4 {
		jobsTable.check(tx, r)
	} else {
		jobsTableV3.check(tx, r)
	}
	if schema >= 14 {
		draftsTable.check(tx, r)
	} else {
		draftsTableV13.check(tx, r)
	}
	switch {
	case schema >= 12:
		handoffsTable.check(tx, r)
	case schema >= 7:
		handoffsTableV11.check(tx, r)
	default:
		handoffsTableV6.check(tx, r)
	}
	outboxTable.check(tx, r)
	keysTable.check(tx, r)
	if tx.bucket(bucketBulk) != nil { // schema 3 on
		bulkTable.check(tx, r)
	}
	switch {
	case schema >= 8:
		receiptsTable.check(tx, r)
		r.damaged = append(r.damaged, checkReceiptRows(tx)...)
	case tx.bucket(bucketReceipts) != nil: // schema 5 on
		receiptsTableV7.check(tx, r)
	}
	// What no index declaration says.
	r.damaged = append(r.damaged, checkDraftEvents(tx)...)
	r.damaged = append(r.damaged, checkDraftCounts(tx, schema >= 2)...)
	if r.undecodable["draft"] == 0 { // else the figures are off by the drafts that cannot be read
		r.damaged = append(r.damaged, checkDraftFigures(tx, schema >= 11)...) // stats.go
		r.damaged = append(r.damaged, checkQualityFigures(tx)...)             // quality.go
	}
	if r.undecodable["lead"] == 0 && schema >= 13 { // else off by the leads that cannot be read
		r.damaged = append(r.damaged, checkLeadCounts(tx)...) // stats.go
	}
	if r.undecodable["outbox row"] == 0 && schema >= 11 { // else off by the rows that cannot be read
		r.damaged = append(r.damaged, checkOutboxCounts(tx)...) // outboxcounts.go
	}
	if r.undecodable["job"] == 0 { // else the counts are off by the jobs that cannot be read
		r.damaged = append(r.damaged, checkJobCounts(tx, schema >= 4)...)
	}
	r.damaged = append(r.damaged, checkJobFollowers(tx)...)                       // checkderived.go
	r.damaged = append(r.damaged, checkDraftCountsByChannel(tx, schema >= 11)...) // checkderived.go
	r.damaged = append(r.damaged, checkOutboxDrafts(tx)...)
	r.damaged = append(r.damaged, checkTokens(tx, r)...)
	r.damaged = append(r.damaged, checkCards(tx, r)...)     // cards.go
	r.damaged = append(r.damaged, checkReminders(tx, r)...) // reminders.go
	r.damaged = append(r.damaged, checkFacts(tx, r)...)     // facts.go
	return CheckReport{Damaged: r.damaged, Unreadable: r.unreadable, MoreUnreadable: r.moreUnreadable}
}

// checkDraftEvents proves that every event with a draft exists.
func checkDraftEvents(tx *Tx) []error {
	var problems []error
	eventsByKey := tx.bucket(bucketEventsByKey)
	_ = tx.bucket(bucketDraftsByEvent).ForEach(func(k, v []byte) error {
		if eventsByKey.Get(k) == nil {
			problems = append(problems, fmt.Errorf("check: draft %s has no event %s", v, k))
		}
		return nil
	})
	return problems
}

// checkDraftCounts proves the per-status counts in meta (schema 2 on).
func checkDraftCounts(tx *Tx, counted bool) []error {
	if !counted {
		return nil
	}
	var problems []error
	for st, n := range recountDrafts(tx) {
		if got := count(tx, draftCountKey(st)); got != n {
			problems = append(problems, fmt.Errorf("check: the %s draft count says %d, idx_drafts_by_status holds %d", st, got, n))
		}
	}
	return problems
}

// checkOutboxDrafts proves that every reply has an approved draft pointing at it.
func checkOutboxDrafts(tx *Tx) []error {
	var problems []error
	_ = tx.bucket(bucketOutbox).ForEach(func(k, v []byte) error {
		var o Outbox
		if json.Unmarshal(v, &o) != nil || o.Kind != "" {
			return nil // an unreadable row is reported by the outbox table's check; only a reply has a draft
		}
		d, err := tx.Draft(o.DraftID)
		if _, ok := AsUnreadable(err); ok {
			return nil // the draft's own problem, named by the drafts table's check
		}
		if err != nil || d.Status != DraftApproved || d.OutboxID != o.ID {
			problems = append(problems, fmt.Errorf("check: outbox row %s has no approved draft %s pointing at it", k, o.DraftID))
		}
		return nil
	})
	return problems
}

// checkTokens proves idx_tokens_by_id by hand: a token's primary key is
// the hash of its secret, which the record does not hold, so it has no
// table declaration.
func checkTokens(tx *Tx, r *checking) []error {
	var problems []error
	toks, byID := tx.bucket(bucketTokens), tx.bucket(bucketTokensByID)
	_ = toks.ForEach(func(hash, v []byte) error {
		var t Token
		if err := unmarshal(v, &t, true); err != nil {
			r.unreadable = append(r.unreadable, Unreadable{Kind: "token", ID: fmt.Sprintf("%x", hash[:4]), Reason: clip(err.Error())})
			if json.Unmarshal(v, &t) != nil {
				return nil
			}
		}
		if !bytes.Equal(byID.Get([]byte(t.ID)), hash) {
			problems = append(problems, fmt.Errorf("check: token %s (%s) is not in idx_tokens_by_id", t.ID, t.Name))
		}
		return nil
	})
	if a, b := toks.Stats().KeyN, byID.Stats().KeyN; a != b {
		problems = append(problems, fmt.Errorf("check: %d tokens but %d keys in idx_tokens_by_id", a, b))
	}
	return problems
}
