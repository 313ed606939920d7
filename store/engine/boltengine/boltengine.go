// Package boltengine is the store's first engine: one bbolt file. It
// implements engine.Engine and adds what only a bbolt file has (its
// transaction ids for the page walk, its page check, its file lock); the
// store's bbolt file layer (preflight, the page walk, backups to files,
// restore by rename) calls those, nothing above the store does.
//
// The wrappers are pointer conversions of bbolt's own types, so a bucket
// or cursor handed out through the engine interfaces costs no allocation
// beyond bbolt's.
package boltengine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
)

// Options tunes Open; the zero value is bbolt's defaults.
type Options struct {
	// Timeout waits this long for another process's lock; then Open
	// fails with engine.ErrLocked. Zero waits forever (bbolt's rule).
	Timeout  time.Duration
	ReadOnly bool
	// MmapSize is the address space mapped at open (bbolt's InitialMmapSize).
	MmapSize int
	// PreLoadFreelist reads (or rebuilds) the freelist at open, as a
	// read-write open does, also when ReadOnly.
	PreLoadFreelist bool
	// MapFreelist keeps the freelist as bbolt's hash map instead of its
	// sorted array (FreelistMapType): the same file, a cheaper commit.
	MapFreelist bool
	// Fill is how full a page is filled before it splits, per bucket name
	// (bbolt's Bucket.FillPercent); a bucket not in it keeps bbolt's
	// default. The map is read at every Bucket call, so a caller may
	// change it between transactions.
	Fill map[string]float64
}

// DB is one open bbolt file.
type DB struct {
	db   *bolt.DB
	fill map[string]float64
	// syncMax, above zero, is the most free and pinned pages a commit
	// writes into the freelist (LimitFreelist); zero: every commit does.
	syncMax atomic.Int64
	// path is the file's name now (Rename); bbolt keeps the one it opened.
	path atomic.Pointer[string]
}

var _ engine.Engine = (*DB)(nil)

// Open opens (creating when absent and not ReadOnly) the bbolt file at path.
func Open(path string, o Options) (*DB, error) {
	bo := &bolt.Options{
		Timeout:         o.Timeout,
		ReadOnly:        o.ReadOnly,
		InitialMmapSize: o.MmapSize,
		PreLoadFreelist: o.PreLoadFreelist,
	}
	if o.MapFreelist {
		bo.FreelistType = bolt.FreelistMapType
	}
	db, err := bolt.Open(path, 0o600, bo)
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %w", engine.ErrLocked, err)
	}
	if err != nil {
		return nil, classify(err)
	}
	d := &DB{db: db, fill: o.Fill}
	d.path.Store(&path)
	return d, nil
}

// Path is the file's path.
func (d *DB) Path() string { return *d.path.Load() }

// Renamed tells the engine the open file is now also (or only) at path,
// as after a link or rename by its creator: bbolt keeps the name it opened.
func (d *DB) Renamed(path string) { d.path.Store(&path) }

// LimitFreelist makes a commit write the freelist only while it holds at
// most max free and pinned pages, and Close write it (one empty commit),
// so the next open reads it instead of rebuilding it from every page. A
// commit writes all of it, 8 bytes a page, and a long read (a page walk,
// a backup's copy) pins every page freed meanwhile: written on every
// commit, each commit's freelist grew with the last (20 MiB a commit on a
// 1M-event file, bench grow). Zero writes it on every commit (bbolt's
// default), as the commits before the call do.
func (d *DB) LimitFreelist(max int) { d.syncMax.Store(int64(max)) }

// Close closes the file, writing its freelist first when LimitFreelist
// may have left it out (a failure only costs the next open the rebuild).
func (d *DB) Close() error {
	if d.syncMax.Load() > 0 && !d.db.IsReadOnly() {
		d.syncMax.Store(0)
		_, _ = d.Update(func(engine.Tx) error { return nil })
	}
	return d.db.Close()
}

// View runs fn in a read transaction.
func (d *DB) View(fn func(engine.Tx) error) error {
	return d.db.View(func(btx *bolt.Tx) error { return fn(&tx{t: btx, fill: d.fill, path: d.Path()}) })
}

// Update runs fn in a write transaction and commits it (fsynced) before it
// returns: bbolt's db.Update, which also returns the bytes of pages the
// transaction allocated, committed or not.
func (d *DB) Update(fn func(engine.Tx) error) (engine.Commit, error) {
	btx, err := d.db.Begin(true)
	if err != nil {
		return engine.Commit{}, classify(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = btx.Rollback() // fn failed, or panicked (the panic goes on), as in db.Update
		}
	}()
	if err := fn(&tx{t: btx, fill: d.fill, path: d.Path()}); err != nil {
		return engine.Commit{}, err
	}
	closed = true // Commit closes the transaction, whether it fails or not
	// Set under the write lock Begin took: only a writer reads it.
	if max := d.syncMax.Load(); max > 0 {
		st := d.db.Stats()
		d.db.NoFreelistSync = int64(st.FreePageN+st.PendingPageN) > max
	} else {
		d.db.NoFreelistSync = false
	}
	err = btx.Commit()
	stats := btx.Stats()
	return engine.Commit{Allocated: stats.GetPageAlloc()}, classify(err)
}

// classify marks err engine.ErrNoSpace when it says the disk is full or
// the quota spent. bbolt wraps some errors with %s (growing the file), so
// the words count too.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &noSpace{err}
	}
	msg := err.Error()
	if strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error()) {
		return &noSpace{err}
	}
	return err
}

// noSpace is engine.ErrNoSpace with bbolt's error, its message and chain unchanged.
type noSpace struct{ err error }

func (e *noSpace) Error() string        { return e.err.Error() }
func (e *noSpace) Unwrap() error        { return e.err }
func (e *noSpace) Is(target error) bool { return target == engine.ErrNoSpace }

// Snapshot writes the file as of one read transaction to w (bbolt's
// tx.WriteTo): a bbolt file that Open reads back.
func (d *DB) Snapshot(w io.Writer) (n int64, err error) {
	err = d.db.View(func(btx *bolt.Tx) error {
		n, err = btx.WriteTo(w)
		return err
	})
	return n, err
}

// Space is the file's size as of a read transaction, its free pages and
// its page size.
func (d *DB) Space() (engine.Space, error) {
	var sp engine.Space
	err := d.db.View(func(btx *bolt.Tx) error {
		sp.Bytes = btx.Size()
		return nil
	})
	sp.FreePages, sp.PageSize = d.db.Stats().FreePageN, d.db.Info().PageSize
	return sp, err
}

// TxID is the bbolt transaction id of t, a transaction of this package:
// the meta page it reads carries it (the page walk finds its meta by it).
func TxID(t engine.Tx) (uint64, bool) {
	bt, ok := t.(*tx)
	if !ok {
		return 0, false
	}
	return uint64(bt.t.ID()), true
}

// tx is a bbolt transaction.
type tx struct {
	t    *bolt.Tx
	fill map[string]float64
	path string // the file's name (DB.Path)
}

func (t *tx) Bucket(name []byte) engine.Bucket {
	b := t.t.Bucket(name)
	if b == nil {
		return nil // a nil *bucket in the interface would not compare equal to nil
	}
	if f, ok := t.fill[string(name)]; ok {
		b.FillPercent = f
	}
	return (*bucket)(b)
}

func (t *tx) CreateBucketIfNotExists(name []byte) (engine.Bucket, error) {
	b, err := t.t.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return (*bucket)(b), nil
}

func (t *tx) DeleteBucket(name []byte) error { return t.t.DeleteBucket(name) }

func (t *tx) ForEachBucket(fn func(name []byte) error) error {
	return t.t.ForEach(func(name []byte, _ *bolt.Bucket) error { return fn(name) })
}

// Check is bbolt's page check (tx.Check) of the transaction's pages. A
// truncated file (a broken download) would make that walk read past the
// end of the mapping and die with SIGBUS, so it is refused first.
func (t *tx) Check() []error {
	fi, err := os.Stat(t.path)
	if err != nil {
		return []error{fmt.Errorf("check: the file's size: %w", err)}
	}
	if fi.Size() < t.t.Size() {
		return []error{&truncated{have: fi.Size(), reach: t.t.Size()}}
	}
	var problems []error
	for err := range t.t.Check() {
		problems = append(problems, fmt.Errorf("bbolt: %w", err))
	}
	return problems
}

// truncated is a file shorter than its pages: engine.ErrBroken.
type truncated struct{ have, reach int64 }

func (e *truncated) Error() string {
	return fmt.Sprintf("check: the file is truncated: it has %d bytes but its pages reach %d", e.have, e.reach)
}

func (e *truncated) Is(target error) bool { return target == engine.ErrBroken }

// bucket is a bbolt bucket.
type bucket bolt.Bucket

func (b *bucket) Get(key []byte) []byte       { return (*bolt.Bucket)(b).Get(key) }
func (b *bucket) Put(key, value []byte) error { return (*bolt.Bucket)(b).Put(key, value) }
func (b *bucket) Delete(key []byte) error     { return (*bolt.Bucket)(b).Delete(key) }
func (b *bucket) Cursor() engine.Cursor       { return (*cursor)((*bolt.Bucket)(b).Cursor()) }
func (b *bucket) Stats() engine.BucketStats {
	return engine.BucketStats{KeyN: (*bolt.Bucket)(b).Stats().KeyN}
}
func (b *bucket) ForEach(fn func(k, v []byte) error) error { return (*bolt.Bucket)(b).ForEach(fn) }

// cursor is a bbolt cursor.
type cursor bolt.Cursor

func (c *cursor) First() ([]byte, []byte)        { return (*bolt.Cursor)(c).First() }
func (c *cursor) Last() ([]byte, []byte)         { return (*bolt.Cursor)(c).Last() }
func (c *cursor) Seek(k []byte) ([]byte, []byte) { return (*bolt.Cursor)(c).Seek(k) }
func (c *cursor) Next() ([]byte, []byte)         { return (*bolt.Cursor)(c).Next() }
func (c *cursor) Prev() ([]byte, []byte)         { return (*bolt.Cursor)(c).Prev() }

// Bolt is the bbolt handle itself, for the bbolt engine's own tests and
// benchmarks (its page and commit counts); the store never calls it.
func (d *DB) Bolt() *bolt.DB { return d.db }
