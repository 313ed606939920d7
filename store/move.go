package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
)

// The move between a bbolt file and PostgreSQL (handoff migrate, issue
// 33): every bucket and key of one read snapshot of the source copied,
// byte for byte, into an empty target, then every bucket's key count and
// SHA-256 of its keys and values compared on both sides and the store's
// Check run on the target. The records are not decoded: the move is below
// them, so what the source holds, the target holds.

// DefaultMoveBatch is the keys a move sends per round trip (PostgreSQL)
// or commits per bbolt transaction (a file).
const DefaultMoveBatch = 10000

// MoveOptions tunes a move.
type MoveOptions struct {
	// Batch is the keys per round trip or bbolt transaction; zero is
	// DefaultMoveBatch.
	Batch int
	// Progress, when set, is called after each batch with the bucket
	// being copied and the keys copied so far, in all.
	Progress func(bucket string, keys int64)
}

func (o MoveOptions) batch() int {
	if o.Batch > 0 {
		return o.Batch
	}
	return DefaultMoveBatch
}

// BucketSum is one bucket as a move saw it.
type BucketSum struct {
	Name  string
	Keys  int
	Bytes int64    // its keys' and values' bytes
	Sum   [32]byte // SHA-256 of each key and value, length-prefixed, in key order
}

// Moved is what a move copied, and verified equal on both sides.
type Moved struct {
	Buckets []BucketSum
	// Target is where the copy went: the PostgreSQL schema, or the file.
	Target string
	// Copy and Verify are how long the two steps took.
	Copy, Verify time.Duration
}

// Keys is the keys copied, in all.
func (m Moved) Keys() int64 {
	var n int64
	for _, b := range m.Buckets {
		n += int64(b.Keys)
	}
	return n
}

// Bytes is the keys' and values' bytes copied, in all.
func (m Moved) Bytes() int64 {
	var n int64
	for _, b := range m.Buckets {
		n += b.Bytes
	}
	return n
}

// Digest is one hash of every bucket's sum, in name order: the same on
// both sides when the move verified.
func (m Moved) Digest() string {
	h := sha256.New()
	for _, b := range m.Buckets {
		writeLen(h, []byte(b.Name))
		h.Write(b.Sum[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NotEmptyError is a move's target that already holds handoff data.
type NotEmptyError struct {
	Target  string
	Buckets int
}

func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("%s already holds handoff data (%d buckets): migrate moves into an empty database only", e.Target, e.Buckets)
}

// summer sums one bucket as its keys go by.
type summer struct {
	name  string
	keys  int
	bytes int64
	h     hash.Hash
}

func newSummer(name []byte) *summer { return &summer{name: string(name), h: sha256.New()} }

func (s *summer) add(k, v []byte) {
	s.keys++
	s.bytes += int64(len(k) + len(v))
	writeLen(s.h, k)
	writeLen(s.h, v)
}

func (s *summer) sum() BucketSum {
	b := BucketSum{Name: s.name, Keys: s.keys, Bytes: s.bytes}
	copy(b.Sum[:], s.h.Sum(nil))
	return b
}

func writeLen(h hash.Hash, p []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	h.Write(n[:])
	h.Write(p)
}

// sums reads every bucket of tx: its keys walked and hashed, and its
// engine's own count (Stats) checked against the walk.
func sums(tx engine.Tx) ([]BucketSum, error) {
	var out []BucketSum
	err := tx.ForEachBucket(func(name []byte) error {
		b := tx.Bucket(name)
		s := newSummer(name)
		if err := b.ForEach(func(k, v []byte) error { s.add(k, v); return nil }); err != nil {
			return err
		}
		if n := b.Stats().KeyN; n != s.keys {
			return fmt.Errorf("bucket %q counts %d keys but %d were read", name, n, s.keys)
		}
		out = append(out, s.sum())
		return nil
	})
	return out, err
}

// compareSums is nil when want and got are the same buckets with the same
// counts and hashes, else the first difference in a sentence.
func compareSums(want, got []BucketSum, target string) error {
	byName := map[string]BucketSum{}
	for _, g := range got {
		byName[g.Name] = g
	}
	for _, w := range want {
		g, ok := byName[w.Name]
		switch {
		case !ok:
			return fmt.Errorf("verify: %s has no bucket %q", target, w.Name)
		case g.Keys != w.Keys:
			return fmt.Errorf("verify: bucket %q has %d keys in %s, %d in the source", w.Name, g.Keys, target, w.Keys)
		case g.Sum != w.Sum:
			return fmt.Errorf("verify: bucket %q of %s differs from the source's (%d keys each, other keys or values)", w.Name, target, w.Keys)
		}
		delete(byName, w.Name)
	}
	for name := range byName {
		return fmt.Errorf("verify: %s has a bucket %q the source has not", target, name)
	}
	return nil
}

// openMovePostgres opens the PostgreSQL engine at url for a move, exclusive
// (as serve holds it), so no server runs on it meanwhile.
func openMovePostgres(ctx context.Context, url string) (*pgengine.DB, error) {
	// An unreachable server is an answer within a bound, not a hang.
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := pgengine.Open(octx, url, pgengine.Options{Exclusive: true, MaxConns: 4})
	if errors.Is(err, engine.ErrLocked) {
		return nil, inUseError{"the PostgreSQL database"}
	}
	if err != nil {
		return nil, fmt.Errorf("open the PostgreSQL database: %w", err)
	}
	return db, nil
}

// MoveToPostgres copies the bbolt file at path (its server stopped: a
// file another process holds is refused, InUse) into the empty PostgreSQL
// database at url, in ONE write transaction of the target, so a failure
// or a kill midway leaves the target as empty as it was: a re-run starts
// again. Every bucket is created and its keys sent opts.Batch a round
// trip, read from one read transaction of the file. Then both sides are
// summed (counts and hashes, the target's in a read snapshot of its own)
// and the store's Check runs on the target. A target that holds any
// bucket is refused (*NotEmptyError). The file must be at this binary's
// schema: the target is then at it too, and serve opens it as it is.
func MoveToPostgres(ctx context.Context, path, url string, opts MoveOptions) (Moved, error) {
	v, err := FileSchema(path)
	if err != nil {
		return Moved{}, err
	}
	if v != SchemaVersion {
		return Moved{}, fmt.Errorf("%s is at schema %d and this handoff writes %d: open it once with this handoff's serve (which migrates it), stop the server, then migrate", path, v, SchemaVersion)
	}
	src, err := OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		return Moved{}, err
	}
	defer src.Close()
	db, err := openMovePostgres(ctx, url)
	if err != nil {
		return Moved{}, err
	}
	target := "PostgreSQL schema " + db.Schema()
	st, err := openOn(db, target, true) // read-only: no migration, no committer
	if err != nil {
		return Moved{}, err
	}
	defer st.Close()

	var want []BucketSum
	batch := opts.batch()
	start := time.Now()
	err = src.eng.View(func(stx engine.Tx) error {
		_, err := db.Update(func(dtx engine.Tx) error {
			want = nil
			n := 0
			if err := dtx.ForEachBucket(func([]byte) error { n++; return nil }); err != nil {
				return err
			}
			if n > 0 {
				return &NotEmptyError{Target: target, Buckets: n}
			}
			var copied int64
			return stx.ForEachBucket(func(name []byte) error {
				b, err := dtx.CreateBucketIfNotExists(name)
				if err != nil {
					return err
				}
				s := newSummer(name)
				pending := 0
				err = stx.Bucket(name).ForEach(func(k, v []byte) error {
					s.add(k, v)
					if err := b.Put(k, v); err != nil {
						return fmt.Errorf("bucket %q, a key of %d bytes: %w", name, len(k), err)
					}
					if pending++; pending == batch {
						pending = 0
						copied += int64(batch)
						if err := pgengine.Flush(dtx); err != nil {
							return err
						}
						if opts.Progress != nil {
							opts.Progress(string(name), copied)
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				if err := pgengine.Flush(dtx); err != nil {
					return err
				}
				copied += int64(pending)
				if opts.Progress != nil {
					opts.Progress(string(name), copied)
				}
				want = append(want, s.sum())
				return nil
			})
		})
		return err
	})
	if err != nil {
		return Moved{}, fmt.Errorf("copy %s into %s (one transaction: run migrate again, which starts over, or finds it committed and refuses): %w", path, target, err)
	}
	m := Moved{Buckets: want, Target: target, Copy: time.Since(start)}
	start = time.Now()
	var got []BucketSum
	if err := db.View(func(tx engine.Tx) error {
		var err error
		got, err = sums(tx)
		return err
	}); err != nil {
		return m, fmt.Errorf("verify %s: %w", target, err)
	}
	if err := compareSums(want, got, target); err != nil {
		return m, err
	}
	if err := st.Check(); err != nil {
		return m, fmt.Errorf("verify: the store's check of %s: %w", target, err)
	}
	m.Verify = time.Since(start)
	return m, nil
}

// MoveToFile copies the PostgreSQL database at url (its server stopped:
// the engine's exclusive lock is taken for the copy) into a new bbolt
// file at path, never over an existing one: the file is built beside it
// under a temporary name from one read snapshot, opts.Batch keys a bbolt
// transaction, synced, then verified (VerifyFile: bbolt's structure and
// the store's Check, in a child process; and every bucket's count and
// hash against the snapshot's) and only then linked to path. A database
// with no handoff data is refused.
func MoveToFile(ctx context.Context, url, path string, opts MoveOptions) (Moved, error) {
	if _, err := os.Lstat(path); err == nil {
		return Moved{}, fmt.Errorf("%s already exists: migrate writes a new file only", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return Moved{}, err
	}
	db, err := openMovePostgres(ctx, url)
	if err != nil {
		return Moved{}, err
	}
	defer db.Close()
	source := "PostgreSQL schema " + db.Schema()
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".handoff-migrate-*.db")
	if err != nil {
		return Moved{}, err
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpPath)
	bdb, err := bolt.Open(tmpPath, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return Moved{}, fmt.Errorf("create %s: %w", tmpPath, err)
	}
	var want []BucketSum
	batch := opts.batch()
	var copied int64
	start := time.Now()
	err = db.View(func(tx engine.Tx) error {
		n := 0
		err := tx.ForEachBucket(func(name []byte) error {
			n++
			s := newSummer(name)
			if err := bdb.Update(func(btx *bolt.Tx) error {
				_, err := btx.CreateBucket(name)
				return err
			}); err != nil {
				return err
			}
			c := tx.Bucket(name).Cursor()
			k, v := c.First()
			for k != nil {
				err := bdb.Update(func(btx *bolt.Tx) error {
					bb := btx.Bucket(name)
					bb.FillPercent = 0.9 // keys arrive in order; room left for the server's inserts
					for i := 0; i < batch && k != nil; i++ {
						s.add(k, v)
						if err := bb.Put(bytes.Clone(k), bytes.Clone(v)); err != nil {
							return fmt.Errorf("bucket %q, a key of %d bytes: %w", name, len(k), err)
						}
						copied++
						k, v = c.Next()
					}
					return nil
				})
				if err != nil {
					return err
				}
				if opts.Progress != nil {
					opts.Progress(string(name), copied)
				}
			}
			want = append(want, s.sum())
			return nil
		})
		if err == nil && n == 0 {
			return fmt.Errorf("%s holds no handoff data", source)
		}
		return err
	})
	if cerr := bdb.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Moved{}, fmt.Errorf("copy %s into %s: %w", source, path, err)
	}
	if err := syncFile(tmpPath); err != nil {
		return Moved{}, err
	}
	m := Moved{Buckets: want, Target: path, Copy: time.Since(start)}
	start = time.Now()
	if err := VerifyFile(tmpPath); err != nil {
		return m, fmt.Errorf("verify the copy of %s: %w", source, err)
	}
	cp, err := OpenFile(tmpPath, Options{ReadOnly: true})
	if err != nil {
		return m, err
	}
	var got []BucketSum
	err = cp.eng.View(func(tx engine.Tx) error {
		var err error
		got, err = sums(tx)
		return err
	})
	if cerr := cp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return m, fmt.Errorf("verify the copy of %s: %w", source, err)
	}
	if err := compareSums(want, got, path); err != nil {
		return m, err
	}
	m.Verify = time.Since(start)
	// A link never replaces a file: one made meanwhile stays and is named.
	if err := os.Link(tmpPath, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return m, fmt.Errorf("%s already exists: migrate writes a new file only", path)
		}
		return m, err
	}
	return m, syncDir(dir)
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
