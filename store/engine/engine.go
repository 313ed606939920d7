// Package engine is the contract between the store and the database under
// it: an ordered key-value engine of named buckets, read in snapshots and
// written in serializable transactions. The store's records, indexes,
// claims, counts and Check are written against these interfaces only, so
// a second engine fills them without touching the store's record files or
// any package above the store. bbolt (boltengine) is the first engine.
//
// What an engine must guarantee (docs/architecture.md, "Storage engines"):
//   - Update runs fn in one serializable write transaction: no other write
//     is interleaved with it, and it sees every write committed before it.
//     When fn returns an error every write fn made is rolled back. fn may
//     run more than once (an engine that checks its reads at commit runs
//     it again when one no longer holds); only the last run's writes, and
//     its error, count.
//   - Update returns nil only once the transaction is durable: a crash
//     after Update returns loses nothing it wrote.
//   - View runs fn in a read snapshot: every read of fn sees the same
//     committed state, however many writes commit meanwhile. The snapshot
//     is taken when View is called or at fn's first read at the latest
//     (PostgreSQL's begins with that read, in its round trip). A View may
//     be opened while an Update runs (Check does, from inside a round) and
//     sees the state committed before that Update. A commit may wait for
//     the reads open at that moment (bbolt's remap), so a View never waits
//     for an Update.
//   - Keys within a bucket are ordered bytewise (bytes.Compare); cursors
//     visit them in that order, both ways, and Seek lands on the first key
//     at or after its argument.
//   - Slices an engine returns are valid only until the transaction ends;
//     the store copies what it keeps.
package engine

import (
	"errors"
	"io"
)

// ErrBroken marks a problem of Tx.Check that stops the check: the database
// cannot be read further (a truncated file), so the store checks no
// records.
var ErrBroken = errors.New("engine: the database cannot be read")

// ErrNoSpace marks an open or a commit that failed because the disk is full
// or its owner's quota spent: the engine classifies its own errors (bbolt's
// ENOSPC and EDQUOT, however wrapped; PostgreSQL's disk_full), keeping
// their message and chain, and the store tells readiness from it.
var ErrNoSpace = errors.New("engine: no space left for the database")

// ErrLocked is an open refused because another process holds the database.
var ErrLocked = errors.New("engine: the database is in use by another process")

// ErrReadOnlyNode marks a write refused because the server it reached
// takes no writes: a standby, or an old primary after a failover. The
// engine drops that connection, so the next write connects afresh (to
// the new primary, when the URL names several hosts).
var ErrReadOnlyNode = errors.New("engine: the database server takes no writes (a standby)")

// Engine is one open database.
type Engine interface {
	// View runs fn in a read snapshot (see the package docs).
	View(fn func(Tx) error) error
	// Update runs fn in one write transaction and commits it durably
	// before it returns; fn's error rolls the transaction back and is
	// returned as it is. A commit that failed for lack of space is
	// ErrNoSpace. Commit says what the transaction allocated,
	// committed or not (the store tells a full disk from it).
	Update(fn func(Tx) error) (Commit, error)
	// Snapshot writes a consistent copy of the committed database to w in
	// the engine's own backup format, the one its verify and restore
	// read, and returns the bytes written. It holds one read snapshot for
	// as long as w takes, so the store writes it to a local file, never
	// to a slow client.
	Snapshot(w io.Writer) (int64, error)
	// Space is the database's size and its free space, for the settings
	// page and the metrics.
	Space() (Space, error)
	// Close ends the engine; no transaction may be running.
	Close() error
}

// Commit is what one write transaction cost.
type Commit struct {
	// Allocated is the bytes of storage the transaction allocated, known
	// also when the commit failed: how large a write was that failed for
	// lack of space (zero when the engine cannot tell).
	Allocated int64
}

// Space is the size of a database and its free space.
type Space struct {
	Bytes     int64 // what the database takes on disk
	FreePages int   // pages free for reuse inside it
	PageSize  int   // the size of one page
}

// Tx is one transaction, read or write.
type Tx interface {
	// Bucket is the named bucket, nil when it does not exist.
	Bucket(name []byte) Bucket
	// CreateBucketIfNotExists makes the bucket when absent (a write
	// transaction only) and returns it.
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	// DeleteBucket removes the bucket and every key in it.
	DeleteBucket(name []byte) error
	// ForEachBucket calls fn with every bucket's name, in key order.
	ForEachBucket(fn func(name []byte) error) error
	// Check is the engine's own structural check of what the transaction
	// sees (bbolt's pages and freelist); an engine whose storage checks
	// itself returns none. Store.Check adds the records and indexes.
	Check() []error
}

// Prefetcher is a transaction that reads many keys of one bucket in one
// go, ahead of their Gets, which then answer from what it read (until a
// Put or Delete of the key): PostgreSQL's, where each Get is a round trip
// to the server. The store calls it where it knows what a round will read
// (an ingest's dedup key, lead and unique job key). An engine without it
// reads each Get as it comes (bbolt: from memory).
type Prefetcher interface {
	Prefetch(bucket []byte, keys [][]byte)
}

// Notifier is a write transaction that tells the other processes on its
// database something once it commits, and nothing when it rolls back:
// PostgreSQL's (NOTIFY, which their Listen hears). The store tells when
// the earliest job a commit made ready is due, so that the other
// processes' runners need not look at the queue after every commit. An
// engine no other process opens beside this one has none.
type Notifier interface {
	Notify(payload string)
}

// Adder is a Bucket that adds to a counter without reading it first: an
// 8-byte big-endian count, absent (or of another length) read as zero.
// PostgreSQL's, whose writers run side by side and check what each read
// when it commits: a count every write moves would otherwise make every
// pair of them conflict. A count it would take below zero is refused,
// with ErrBelowZero, by Add or by the commit that runs the transaction's
// function again (Update). An engine without it has the store read and
// write the count itself.
type Adder interface {
	Add(key []byte, delta int64) error
}

// ErrBelowZero is an Add that would take a count below zero.
var ErrBelowZero = errors.New("engine: the count would go below zero")

// Bucket is an ordered map of keys to values inside one transaction.
type Bucket interface {
	// Get is the value at key; nil when absent.
	Get(key []byte) []byte
	// Put sets key to value (a write transaction only).
	Put(key, value []byte) error
	// Delete removes key; deleting an absent key is no error.
	Delete(key []byte) error
	// Cursor walks the bucket's keys in order.
	Cursor() Cursor
	// ForEach calls fn with every key and value in key order; fn's error
	// stops the walk and is returned. fn must not write to the bucket.
	ForEach(fn func(k, v []byte) error) error
	// Stats counts the bucket's keys.
	Stats() BucketStats
}

// BucketStats is what a bucket holds.
type BucketStats struct {
	KeyN int // the number of keys
}

// Cursor is a position in a bucket. Each move returns the key and value
// it lands on; a nil key means it ran off either end.
type Cursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	// Seek moves to the first key at or after key.
	Seek(key []byte) (k, v []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
}
