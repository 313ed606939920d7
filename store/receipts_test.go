package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestPutReceipt: the first report makes the receipt, a new status moves it
// and is kept in the history, a repeat changes nothing, and the history
// keeps the latest 16.
func TestPutReceipt(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(status string, at time.Time) Receipt {
		t.Helper()
		var r Receipt
		if err := st.Update(ctx, func(tx *Tx) error {
			var err error
			r, err = tx.PutReceipt("wa", "wamid.1", status, at)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := st.View(func(tx *Tx) error { _, err := tx.Receipt("wa", "wamid.1"); return err }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Receipt before any report = %v, want ErrNotFound", err)
	}
	put("sent", at)
	put("delivered", at.Add(time.Second))
	r := put("delivered", at.Add(2*time.Second))
	if r.Status != "delivered" || len(r.History) != 2 || !r.UpdatedAt.Equal(at.Add(time.Second)) {
		t.Errorf("after sent, delivered, delivered: %+v", r)
	}
	var got Receipt
	err := st.View(func(tx *Tx) (err error) { got, err = tx.Receipt("wa", "wamid.1"); return err })
	if err != nil || got.Key != "wa:wamid.1" || got.Status != "delivered" || got.V != recordVersion {
		t.Fatalf("Receipt = %+v, %v", got, err)
	}
	for i := range 20 {
		put(fmt.Sprintf("s%02d", i), at.Add(time.Duration(i+3)*time.Second))
	}
	_ = st.View(func(tx *Tx) (err error) { got, err = tx.Receipt("wa", "wamid.1"); return err })
	if len(got.History) != maxReceiptHistory || got.History[0].Status != "s04" || got.Status != "s19" {
		t.Errorf("history = %d entries from %q, latest %q; want 16 from s04, latest s19", len(got.History), got.History[0].Status, got.Status)
	}
	if err := st.View(func(tx *Tx) error { _, err := tx.Receipt("wa", "wamid.2"); return err }); !errors.Is(err, ErrNotFound) {
		t.Errorf("another id = %v, want ErrNotFound", err)
	}
}

// TestMigrationCreatesReceipts: a schema 4 file, from before receipts were
// kept, gets the receipts bucket at open and the current schema version.
func TestMigrationCreatesReceipts(t *testing.T) {
	boltOnly(t)
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketReceipts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("4"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Update(context.Background(), func(tx *Tx) error {
		if v := string(tx.bucket(bucketMeta).Get(keySchema)); v != fmt.Sprint(SchemaVersion) {
			t.Errorf("schema %s after open, want %d", v, SchemaVersion)
		}
		_, err := tx.PutReceipt("sms", "SM1", "delivered", time.Unix(0, 0))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}
