package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
)

// putLinkedReceipt stores a receipt about providerID on channel with
// status at at and, when outboxID is set, links it to that row.
func putLinkedReceipt(t *testing.T, st *Store, channel, providerID, status string, at time.Time, outboxID string) {
	t.Helper()
	if err := st.Update(context.Background(), func(tx *Tx) error {
		if _, err := tx.PutReceipt(channel, providerID, status, at); err != nil {
			return err
		}
		if outboxID == "" {
			return nil
		}
		_, err := tx.LinkReceipt(channel, providerID, outboxID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func hasReceipt(t *testing.T, st *Store, channel, providerID string) bool {
	t.Helper()
	err := st.View(func(tx *Tx) error { _, err := tx.Receipt(channel, providerID); return err })
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatalf("receipt %s:%s: %v", channel, providerID, err)
	}
	return err == nil
}

// TestRetentionPrunesReceipts: a receipt goes with the outbox row it is
// about when retention deletes the row's event; an old receipt about no
// kept row goes by age; a receipt about a kept row stays whatever its age,
// and young receipts stay. The cleanup's Check proves the indexes after.
func TestRetentionPrunesReceipts(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	now := t0.Add(60 * 24 * time.Hour)
	old, young := now.Add(-retention-time.Hour), now.Add(-retention+time.Hour)
	cutoff := now.Add(-retention)

	sentOld := buildEvent(t, st, "web:rr-1", old, sentReply)
	putLinkedReceipt(t, st, "web", "prov-1", "delivered", old.Add(3*time.Minute), sentOld.OutboxID)
	// A link made by the send's answer before any status: no time entry.
	if err := st.Update(ctx, func(tx *Tx) error {
		_, err := tx.LinkReceipt("web", "prov-1b", sentOld.OutboxID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sentYoung := buildEvent(t, st, "web:rr-2", young, sentReply)
	// Old statuses about a row that is kept (its event is young).
	putLinkedReceipt(t, st, "web", "prov-2", "delivered", old, sentYoung.OutboxID)
	putLinkedReceipt(t, st, "web", "stray-old", "delivered", old, "")
	putLinkedReceipt(t, st, "web", "stray-young", "delivered", young, "")

	if n, err := st.PruneEvents(ctx, cutoff); err != nil || n != 1 {
		t.Fatalf("PruneEvents = %d, %v; want the old sent reply's event", n, err)
	}
	for _, id := range []string{"prov-1", "prov-1b"} {
		if hasReceipt(t, st, "web", id) {
			t.Errorf("the receipt %s outlived its outbox row %s", id, sentOld.OutboxID)
		}
	}
	if err := st.Check(); err != nil {
		t.Fatalf("Check after pruning the events: %v", err)
	}
	n, err := st.PruneOutside(ctx, cutoff)
	if err != nil || n != 1 {
		t.Fatalf("PruneOutside = %d, %v; want 1 (the old receipt about no row)", n, err)
	}
	for id, want := range map[string]bool{"prov-2": true, "stray-old": false, "stray-young": true} {
		if got := hasReceipt(t, st, "web", id); got != want {
			t.Errorf("receipt %s kept = %v, want %v", id, got, want)
		}
	}
	if n, err := st.PruneOutside(ctx, cutoff); err != nil || n != 0 {
		t.Errorf("second PruneOutside = %d, %v; want 0", n, err)
	}
}

// TestCheckProvesReceiptIndexes breaks each receipt index, and a receipt's
// link, one at a time; Check names each, and passes again once repaired.
func TestCheckProvesReceiptIndexes(t *testing.T) {
	st := openTest(t)
	b := buildEvent(t, st, "web:rc-1", t0, sentReply)
	at := t0.Add(time.Hour)
	putLinkedReceipt(t, st, "web", "prov-1", "delivered", at, b.OutboxID)
	var r Receipt
	err := st.View(func(tx *Tx) (err error) { r, err = tx.Receipt("web", "prov-1"); return err })
	if err != nil {
		t.Fatal(err)
	}
	ghost := r
	ghost.Key, ghost.ProviderID, ghost.OutboxID = "web:ghost", "ghost", "01NOSUCHROW"
	ghostRaw, err := json.Marshal(ghost)
	if err != nil {
		t.Fatal(err)
	}
	byOutbox, byTime := receiptOutboxKey(&r), receiptTimeKey(&r)
	for _, tc := range []struct {
		name           string
		damage, repair func(tx engine.Tx) error
		want           string
	}{
		{"receipt missing from idx_receipts_by_outbox",
			func(tx engine.Tx) error { return tx.Bucket(bucketReceiptsByOutbox).Delete(byOutbox) },
			func(tx engine.Tx) error { return tx.Bucket(bucketReceiptsByOutbox).Put(byOutbox, nil) },
			"is not in idx_receipts_by_outbox"},
		{"stray key in idx_receipts_by_outbox",
			func(tx engine.Tx) error {
				return tx.Bucket(bucketReceiptsByOutbox).Put([]byte("01OTHER\x00web:prov-1"), nil)
			},
			func(tx engine.Tx) error {
				return tx.Bucket(bucketReceiptsByOutbox).Delete([]byte("01OTHER\x00web:prov-1"))
			},
			"idx_receipts_by_outbox entry"},
		{"receipt missing from idx_receipts_by_time",
			func(tx engine.Tx) error { return tx.Bucket(bucketReceiptsByTime).Delete(byTime) },
			func(tx engine.Tx) error { return tx.Bucket(bucketReceiptsByTime).Put(byTime, nil) },
			"is not in idx_receipts_by_time"},
		{"stray key in idx_receipts_by_time",
			func(tx engine.Tx) error { return tx.Bucket(bucketReceiptsByTime).Put(timeKey(at, "web:nobody"), nil) },
			func(tx engine.Tx) error { return tx.Bucket(bucketReceiptsByTime).Delete(timeKey(at, "web:nobody")) },
			"idx_receipts_by_time entry"},
		{"receipt about a row that is gone",
			func(tx engine.Tx) error {
				g := ghost
				if err := tx.Bucket(bucketReceiptsByOutbox).Put(receiptOutboxKey(&g), nil); err != nil {
					return err
				}
				if err := tx.Bucket(bucketReceiptsByTime).Put(receiptTimeKey(&g), nil); err != nil {
					return err
				}
				return tx.Bucket(bucketReceipts).Put([]byte(g.Key), ghostRaw)
			},
			func(tx engine.Tx) error {
				g := ghost
				if err := tx.Bucket(bucketReceiptsByOutbox).Delete(receiptOutboxKey(&g)); err != nil {
					return err
				}
				if err := tx.Bucket(bucketReceiptsByTime).Delete(receiptTimeKey(&g)); err != nil {
					return err
				}
				return tx.Bucket(bucketReceipts).Delete([]byte(g.Key))
			},
			"receipt web:ghost is about outbox row 01NOSUCHROW"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := st.raw(tc.damage); err != nil {
				t.Fatal(err)
			}
			err := st.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v; want it to say %q", err, tc.want)
			}
			if err := st.raw(tc.repair); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(); err != nil {
				t.Errorf("Check after the repair: %v", err)
			}
		})
	}
}

// TestMigrationIndexesReceipts: a schema 7 file, whose receipts have no
// indexes, gets both at open, filled from its receipts; a receipt about a
// row retention already deleted goes, as it would have with its row.
func TestMigrationIndexesReceipts(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := buildEvent(t, st, "web:rm-1", t0, sentReply)
	putLinkedReceipt(t, st, "web", "prov-1", "delivered", t0.Add(time.Hour), b.OutboxID)
	putLinkedReceipt(t, st, "web", "unlinked", "sent", t0.Add(time.Hour), "")
	st.Close()

	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	orphan, _ := json.Marshal(Receipt{V: recordVersion, Key: "web:orphan", Channel: "web", ProviderID: "orphan", Status: "read", UpdatedAt: t0, OutboxID: "01GONEROW"})
	err = db.Update(func(tx *bolt.Tx) error {
		for _, bk := range [][]byte{bucketReceiptsByOutbox, bucketReceiptsByTime} {
			if err := tx.DeleteBucket(bk); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketReceipts).Put([]byte("web:orphan"), orphan); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("7"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The schema 7 file checks as what it is, without the indexes.
	if err := VerifyFile(filepath.Join(dir, FileName)); err != nil {
		t.Fatalf("VerifyFile of the schema 7 file: %v", err)
	}

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Check(); err != nil {
		t.Fatalf("Check after the migration: %v", err)
	}
	for id, want := range map[string]bool{"prov-1": true, "unlinked": true, "orphan": false} {
		if got := hasReceipt(t, st, "web", id); got != want {
			t.Errorf("receipt %s kept = %v, want %v", id, got, want)
		}
	}
	var entries [2]int
	if err := st.View(func(tx *Tx) error {
		entries = [2]int{tx.bucket(bucketReceiptsByOutbox).Stats().KeyN, tx.bucket(bucketReceiptsByTime).Stats().KeyN}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if entries != [2]int{1, 2} {
		t.Errorf("idx_receipts_by_outbox, idx_receipts_by_time hold %v entries; want [1 2]", entries)
	}
}

// TestPruneReceiptsManyChunks: more old receipts than one transaction
// takes all go in one PruneOutside.
func TestPruneReceiptsManyChunks(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	const n = 2*retentionChunk + 50
	if err := st.Update(ctx, func(tx *Tx) error {
		for i := range n {
			if _, err := tx.PutReceipt("web", fmt.Sprintf("old-%04d", i), "delivered", t0.Add(time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := st.PruneOutside(ctx, t0.Add(time.Hour))
	if err != nil || got != n {
		t.Fatalf("PruneOutside = %d, %v; want %d", got, err, n)
	}
	if hasReceipt(t, st, "web", "old-0000") || hasReceipt(t, st, "web", fmt.Sprintf("old-%04d", n-1)) {
		t.Error("old receipts are left after the prune")
	}
}

// TestPruneReceiptsResumesPastKeptOnes: a chunk that reads only receipts
// about kept rows still hands on where it stopped, so the next chunk reads
// what is after them instead of those again, and the stray behind them goes.
func TestPruneReceiptsResumesPastKeptOnes(t *testing.T) {
	st := openTest(t)
	kept := buildEvent(t, st, "web:rk-1", t0, sentReply)
	for i := range 3 {
		putLinkedReceipt(t, st, "web", fmt.Sprintf("kept-%d", i), "delivered", t0.Add(time.Duration(i)*time.Second), kept.OutboxID)
	}
	putLinkedReceipt(t, st, "web", "stray", "delivered", t0.Add(time.Minute), "")
	cutoff := t0.Add(time.Hour)
	var after []byte
	var deleted []int
	for range 4 { // 2 chunks of 2 read all 4; a third one would find nothing
		var got int
		if err := st.Update(context.Background(), func(tx *Tx) error {
			var err error
			got, after, err = pruneReceipts(tx, cutoff, after, 2)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, got)
		if after == nil {
			break
		}
	}
	if !slices.Equal(deleted, []int{0, 1, 0}) {
		t.Errorf("chunks of 2 deleted %v, want [0 1 0]: the kept three read once, the stray deleted", deleted)
	}
	if hasReceipt(t, st, "web", "stray") || !hasReceipt(t, st, "web", "kept-2") {
		t.Error("want the stray receipt gone and the kept row's receipts kept")
	}
}
