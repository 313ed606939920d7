package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Check verifies the file: bbolt's own page check, the schema version, and
// that every index agrees with its records in both directions. It returns
// every problem found, joined. bbolt's page check is not safe beside a
// writer, so on a live store it runs while the committer holds the write
// lock (a read-only store has no writer), in a read transaction of its
// own: the round's write transaction may already hold its neighbours'
// writes, which bbolt reads in a way the check cannot use (an entry put
// with an empty value reads as absent until it is committed, and
// Bucket.Stats counts only committed pages).
func (s *Store) Check() error {
	if s.writes == nil {
		return s.view(check)
	}
	return s.update(context.Background(), checkCommitted)
}

// checkCommitted is Check as one caller of a commit round: it checks the
// committed state, not the round's transaction tx. The committer is inside
// the gate already, and tx does not commit (or remap the file) until this
// returns, so a read transaction beside it is safe here.
func checkCommitted(tx *Tx) error {
	rtx, err := tx.tx.DB().Begin(false)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer func() { _ = rtx.Rollback() }()
	return check(&Tx{tx: rtx})
}

// check is Check inside a transaction.
func check(tx *Tx) error {
	// A truncated file (a broken download) would make bbolt's page walk read
	// past the end of the mapping and die with SIGBUS: refuse it first.
	if fi, err := os.Stat(tx.tx.DB().Path()); err == nil && fi.Size() < tx.tx.Size() {
		return fmt.Errorf("check: the file is truncated: it has %d bytes but its pages reach %d", fi.Size(), tx.tx.Size())
	}
	var problems []error
	for err := range tx.tx.Check() {
		problems = append(problems, fmt.Errorf("bbolt: %w", err))
	}
	meta := tx.bucket(bucketMeta)
	if meta == nil {
		return errors.New("check: no meta bucket: this is not a handoff database")
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
	if schema >= 8 {
		for _, b := range [][]byte{bucketReceiptsByOutbox, bucketReceiptsByTime} {
			if tx.bucket(b) == nil {
				problems = append(problems, fmt.Errorf("check: bucket %s is missing", b))
			}
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	// Every index, both ways, derived from its declaration (tables.go).
	if schema >= 9 {
		problems = append(problems, eventsTable.check(tx)...)
	} else {
		problems = append(problems, eventsTableV8.check(tx)...)
	}
	if schema >= 4 {
		problems = append(problems, jobsTable.check(tx)...)
	} else {
		problems = append(problems, jobsTableV3.check(tx)...)
	}
	problems = append(problems, draftsTable.check(tx)...)
	if schema >= 7 {
		problems = append(problems, handoffsTable.check(tx)...)
	} else {
		problems = append(problems, handoffsTableV6.check(tx)...)
	}
	problems = append(problems, outboxTable.check(tx)...)
	problems = append(problems, keysTable.check(tx)...)
	if tx.bucket(bucketBulk) != nil { // schema 3 on
		problems = append(problems, bulkTable.check(tx)...)
	}
	switch {
	case schema >= 8:
		problems = append(problems, receiptsTable.check(tx)...)
		problems = append(problems, checkReceiptRows(tx)...)
	case tx.bucket(bucketReceipts) != nil: // schema 5 on
		problems = append(problems, receiptsTableV7.check(tx)...)
	}
	// What no index declaration says.
	problems = append(problems, checkDraftEvents(tx)...)
	problems = append(problems, checkDraftCounts(tx, schema >= 2)...)
	problems = append(problems, checkJobCounts(tx, schema >= 4)...)
	problems = append(problems, checkOutboxDrafts(tx)...)
	problems = append(problems, checkTokens(tx)...)
	return errors.Join(problems...)
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
		if json.Unmarshal(v, &o) != nil || o.Kind == OutboxAlert {
			return nil // an unreadable row is reported by the outbox table's check
		}
		if d, err := tx.Draft(o.DraftID); err != nil || d.Status != DraftApproved || d.OutboxID != o.ID {
			problems = append(problems, fmt.Errorf("check: outbox row %s has no approved draft %s pointing at it", k, o.DraftID))
		}
		return nil
	})
	return problems
}

// checkTokens proves idx_tokens_by_id by hand: a token's primary key is
// the hash of its secret, which the record does not hold, so it has no
// table declaration.
func checkTokens(tx *Tx) []error {
	var problems []error
	toks, byID := tx.bucket(bucketTokens), tx.bucket(bucketTokensByID)
	_ = toks.ForEach(func(hash, v []byte) error {
		var t Token
		if err := json.Unmarshal(v, &t); err != nil {
			problems = append(problems, fmt.Errorf("check: token %x: %w", hash[:4], err))
			return nil
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
