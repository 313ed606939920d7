package pgengine

import (
	"context"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
)

// snapshotChunk is the keys copied into the bbolt file per bbolt
// transaction: a transaction holds its dirty pages in memory.
const snapshotChunk = 10000

// Snapshot writes the database as of one read snapshot to w as a bbolt
// file of the same buckets and keys: the format handoff verify, restore
// and the backups of a bbolt store read, so a PostgreSQL database can be
// verified and moved back to a file. The file is built in TempDir (one
// read transaction on PostgreSQL lasts as long as the copy, never as long
// as w takes), then copied to w and removed.
func (d *DB) Snapshot(w io.Writer) (int64, error) {
	tmp, err := os.CreateTemp(d.tempDir, ".handoff-pgsnapshot-*.db")
	if err != nil {
		return 0, fmt.Errorf("pgengine: snapshot: %w", err)
	}
	path := tmp.Name()
	tmp.Close()
	defer os.Remove(path)
	if err := d.snapshotTo(path); err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("pgengine: snapshot: %w", err)
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return n, fmt.Errorf("pgengine: snapshot: %w", err)
	}
	return n, nil
}

// snapshotTo copies every bucket and key of one View into a new bbolt
// file at path.
func (d *DB) snapshotTo(path string) error {
	// NoSync: the file is a scratch copy, synced once by Close's commit
	// being the last; it is read back at once and removed.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoFreelistSync: false})
	if err != nil {
		return fmt.Errorf("pgengine: snapshot: %w", err)
	}
	err = d.View(func(t engine.Tx) error {
		return t.ForEachBucket(func(name []byte) error {
			return copyBucket(t.(*tx), t.Bucket(name).(*bucket), bdb)
		})
	})
	if cerr := bdb.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pgengine: snapshot: %w", cerr)
	}
	return err
}

// copyBucket streams b's rows, in key order, into the bucket of the same
// name of bdb, snapshotChunk keys a bbolt transaction.
func copyBucket(t *tx, b *bucket, bdb *bolt.DB) error {
	if err := bdb.Update(func(btx *bolt.Tx) error {
		_, err := btx.CreateBucket(b.name)
		return err
	}); err != nil {
		return fmt.Errorf("pgengine: snapshot: bucket %q: %w", b.name, err)
	}
	rows, err := t.conn.Query(context.Background(), "select key, value from "+quoteIdent(b.tbl)+" order by key")
	if err != nil {
		return classify(fmt.Errorf("pgengine: snapshot: read bucket %q: %w", b.name, err))
	}
	defer rows.Close()
	more := true
	for more {
		more = false
		err := bdb.Update(func(btx *bolt.Tx) error {
			bb := btx.Bucket(b.name)
			bb.FillPercent = 1.0 // keys arrive in order: full pages
			for n := 0; n < snapshotChunk; n++ {
				if !rows.Next() {
					return nil
				}
				var k, v []byte
				if err := rows.Scan(&k, &v); err != nil {
					return err
				}
				if v == nil {
					v = []byte{}
				}
				if err := bb.Put(k, v); err != nil {
					return err
				}
			}
			more = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("pgengine: snapshot: bucket %q: %w", b.name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("pgengine: snapshot: read bucket %q: %w", b.name, err))
	}
	return nil
}

// Space is the database's size (pg_database_size) and PostgreSQL's page
// size; the free space inside its tables is PostgreSQL's to reuse
// (VACUUM), so FreePages is zero.
func (d *DB) Space() (engine.Space, error) {
	var sp engine.Space
	var block int
	err := d.pool.QueryRow(context.Background(),
		"select pg_database_size(current_database()), current_setting('block_size')::int").Scan(&sp.Bytes, &block)
	if err != nil {
		return engine.Space{}, classify(fmt.Errorf("pgengine: the database's size: %w", err))
	}
	sp.PageSize = block
	return sp, nil
}
