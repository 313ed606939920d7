// Package store owns the database: every record, index and transaction of
// handoff. The records, indexes and Check run over a small engine contract
// (store/engine); bbolt is its first engine (store/engine/boltengine), and
// nothing outside this package knows which engine runs.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/boltengine"
	"github.com/handoff/handoff/store/engine/pgengine"
)

// Sentinel errors, checked with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrClosed    = errors.New("store: closed")
	ErrLeaseLost = errors.New("the job's lease belongs to another execution")
	// ErrUnavailable wraps a commit that failed (disk full, I/O error): the caller's write is not stored.
	ErrUnavailable = errors.New("store: the database cannot commit")
	// ErrReadOnly is a write asked of a store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("store: opened read-only")
)

// FileName is the database file inside the data folder.
const FileName = "handoff.db"

// maxBatch bounds one group commit, so one round's latency stays bounded
// under a flood of writers.
const maxBatch = 512

// Store is the one handle on the database. Writes go through a single
// committer goroutine that folds every queued caller into one transaction
// (group commit); reads use their own read transactions.
type Store struct {
	eng engine.Engine
	// file is the bbolt engine's own operations (the page walk, restore
	// by rename); nil on an engine that is not a bbolt file.
	file   *boltengine.DB
	path   string
	writes chan *writeReq
	// offering counts the writes waiting to be taken by the committer.
	offering atomic.Int64
	quit     chan struct{}
	stopped  chan struct{}
	// deferred says the page walk was left out of the open (see
	// Options.CheckPages): CheckPages is then still to run.
	deferred bool
	repairs  []Repair   // what the open's migrations repaired (Repairs)
	migrated []Migrated // the migrations the open ran (Migrations)
	// damage is what CheckPages found, once it found damage.
	damage atomic.Pointer[error]
	gate   gate  // every transaction passes it; Replace shuts it to swap the file (gate.go)
	seen   seen  // the unreadable records known (unreadable.go)
	hooks  hooks // told of moves inside their transactions (hooks.go)
	ended  ended // jobs completed by their kinds, until FinishJob (jobs.go)
	mmap   int   // Options.MmapSize, for the reopen after a Replace

	// full is the last commit that failed for lack of disk space, until a
	// large enough one succeeds (space.go).
	full atomic.Pointer[NoSpaceError]
	// commits counts the rounds committed since the open (Commits).
	commits atomic.Uint64
	// pg is the engine when it is PostgreSQL's, set at open and never
	// swapped (only a bbolt file is replaced, by a restore), so it is read
	// without the gate that guards eng.
	pg *pgengine.DB
	// onLost is told when the hold on a shared database is lost (OnHoldLost).
	lostMu sync.Mutex
	onLost []func(error)
}

type writeReq struct {
	fn   func(tx *Tx) error
	done chan error
	// reads are keys fn will read, prefetched for the whole round on an
	// engine where each read is a round trip (engine.Prefetcher).
	reads []readKey
}

// readKey is a key of a bucket that a write will read.
type readKey struct {
	bucket []byte
	key    []byte
}

// Options tunes Open.
type Options struct {
	// Timeout waits this long for another process's lock; zero fails at once.
	Timeout time.Duration
	// ReadOnly opens without the committer, for verify and backup tools.
	ReadOnly bool
	// CheckPages checks an existing file more deeply before opening it;
	// serve sets it. A file of at most fullCheckLimit bytes gets the full
	// Check in a child process (checkInChild), records and indexes
	// included, since that still takes well under a second. A larger file
	// whose freelist is not stored in it (written before handoff synced
	// it) gets bbolt's page walk in the child, since bbolt's open walks
	// every page to rebuild the freelist and would crash on a damaged one.
	// A larger file with a stored freelist is opened without reading its
	// pages (the start-up stays under a second and the mmap untouched):
	// what every open checks, the meta pages, the freelist page and the
	// top two levels of every bucket, is then all that runs before it, and
	// Store.Deferred says that the whole walk is still to run (CheckPages).
	CheckPages bool
	// MmapSize is the address space bbolt maps at open; zero is
	// mmapAhead's rule. Tests set a small one, so that a file of a few
	// MiB outgrows it and bbolt must remap while they watch.
	MmapSize int
}

// mmapAhead is the address space mapped at open for a file of size
// bytes: twice the file, rounded up to whole GiB, and at least 1 GiB.
// bbolt remaps when a commit needs pages past the map, and a remap waits
// for every read transaction open at that moment (a backup's copy among
// them) while holding up every other transaction; mapped this far
// ahead, the file must double within one process's life before the
// first remap. It is address space, not memory: only the pages read or
// written count, as they would with any map. On a 32-bit build, 1 GiB.
func mmapAhead(size int64) int {
	const gib = 1 << 30
	if strconv.IntSize < 64 {
		return gib
	}
	n := (2*size + gib - 1) / gib * gib
	if n < gib {
		n = gib
	}
	return int(n)
}

// fullCheckLimit is the largest file CheckPages checks in full: Check
// costs about 8 ms per MiB here (3.4–4.0 s for 489 MB), so 64 MiB is about
// half a second at start-up. Larger files get the page walk, and damage
// inside a record's bytes is left to handoff verify. A variable for tests.
var fullCheckLimit int64 = 64 << 20

// Open opens (creating when absent) the database in dir and migrates it.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create data folder: %w", err)
	}
	return OpenFile(filepath.Join(dir, FileName), opts)
}

// OpenFile opens the database file at path. Only a path where no file
// exists at all becomes a new database: an existing file, empty, truncated
// or foreign included, must pass preflight first, and CheckPages too when set.
func OpenFile(path string, opts Options) (*Store, error) {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 100 * time.Millisecond
	}
	deferred := false
	var unreadable *UnreadableRecordsError // what the check found, when only records cannot be read
	fi, err := os.Lstat(path)
	mmap := opts.MmapSize
	if mmap <= 0 {
		var size int64
		if err == nil {
			size = fi.Size()
		}
		mmap = mmapAhead(size)
	}
	created := !opts.ReadOnly && errors.Is(err, fs.ErrNotExist) // this open makes the file
	if !created {
		m, err := checkStructure(path)
		if err != nil {
			return nil, err
		}
		if opts.CheckPages {
			level := checkLevel("")
			switch {
			case fi != nil && fi.Size() <= fullCheckLimit:
				level = checkFull
			case m.freelist == noFreelist:
				level = checkPages
			default:
				deferred = true
			}
			if level != "" {
				err := checkInChild(context.Background(), path, level)
				if !errors.As(err, &unreadable) && err != nil {
					return nil, err
				}
			}
		}
	}
	bo := boltengine.Options{Timeout: timeout, ReadOnly: opts.ReadOnly, MmapSize: mmap}
	if created {
		// Made under a name of its own, then published (create, space.go).
		s, db, err := create(path, bo)
		if errors.Is(err, errMadeMeanwhile) {
			return OpenFile(path, opts) // another process's, opened as any existing file
		}
		if err != nil {
			return nil, err
		}
		s.file, s.mmap = db, opts.MmapSize
		db.LimitFreelist(freelistSyncMax)
		return s, nil
	}
	db, err := openBolt(path, bo)
	if errors.Is(err, engine.ErrLocked) {
		return nil, inUseError{path}
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s, err := openOn(db, path, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	s.file, s.deferred, s.mmap = db, deferred, opts.MmapSize
	db.LimitFreelist(freelistSyncMax)
	if !opts.ReadOnly {
		sweepLinks(path)
	}
	if unreadable != nil {
		s.seen.add(unreadable.Records...)
	}
	return s, nil
}

// openBolt opens the bbolt file at path as the store runs it: o with the
// store's freelist and page fill.
func openBolt(path string, o boltengine.Options) (*boltengine.DB, error) {
	// Mapped ahead of the file (mmapAhead, o.MmapSize), so a read
	// transaction (a backup's local copy) seldom meets a remap. The
	// open's own commits write the freelist (so does bbolt's, after it
	// rebuilt one); once open, a commit writes it only while it is small
	// and Close writes it (LimitFreelist, freelistSyncMax), so an open of
	// a file whose last commit wrote it reads it instead of walking every
	// page to rebuild it; otherwise the open walks the pages first
	// (checkPages) and bbolt rebuilds it.
	o.MapFreelist = true
	o.Fill = appendFill
	return boltengine.Open(path, o)
}

// openOn runs the store over the open engine eng, whatever its kind: it
// migrates the database (unless readOnly) and starts the committer. On an
// error eng is closed. path names the database: in messages, and its
// folder is the one a no-space error points at.
func openOn(eng engine.Engine, path string, readOnly bool) (*Store, error) {
	s := &Store{eng: eng, path: path, quit: make(chan struct{}), stopped: make(chan struct{})}
	if readOnly {
		close(s.stopped)
		return s, nil
	}
	if _, err := eng.Update(func(tx engine.Tx) error {
		s.repairs, s.migrated = nil, nil
		return migrate(tx, &s.repairs, &s.migrated)
	}); err != nil {
		eng.Close()
		return nil, err
	}
	s.writes = make(chan *writeReq)
	go s.commitLoop()
	return s, nil
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// Close stops the committer after the writes already handed to it and closes the file.
func (s *Store) Close() error {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.stopped
	return s.eng.Close()
}

// freelistSyncMax is the most free and pinned pages a commit writes into
// the freelist: two pages of it. The usual count is a few hundred (each
// commit frees the pages it rewrites); it passes this while a long read
// pins pages, and after one, until the pages are used again.
const freelistSyncMax = 1000

// Tx is one transaction, handed to the function given to Update or View.
// It wraps the engine's transaction privately: callers see records and their
// typed operations (tx.Job, tx.PutJob, tx.Enqueue, tx.EventByKey, ...),
// never buckets, so every index stays in step with its records.
//
// The typed operations are methods, one small set per record type, over
// the private generic tables of tables.go: Go has no generic methods, and
// tx.PutOutbox(&old, &o) reads better at a call site, and in the package
// docs, than store.Put(tx, outboxes, &old, &o); it also keeps the table
// declarations out of reach, so no caller can write a record past its
// indexes. A write takes old, the record as read in the same transaction,
// and moves exactly the index entries that changed.
type Tx struct {
	tx    engine.Tx
	seen  *seen  // the store's memory of unreadable records (Tx.skip)
	hooks *hooks // the store's hooks (hooks.go); nil in a migration's Tx
	// due is the earliest RunAt of the jobs this write made ready (zero:
	// none), which the commit tells (Tx.jobReady).
	due time.Time
	// completed is the jobs this write completed for the kind that ran
	// them (CompleteJob), kept by the commit for FinishJob (Store.ended).
	completed []endedJob
}

// bucket is one of the buckets created at open (on bbolt with the fill
// its keys call for: appendFill, which openBolt hands the engine).
func (tx *Tx) bucket(name []byte) engine.Bucket {
	return tx.tx.Bucket(name)
}

// appendFill is how full bbolt fills a page before it splits one, for the
// buckets whose new keys sort after every key they hold (ULIDs and times
// minted now): bbolt's default, half full, leaves every page of such a
// bucket half empty for good, since no later key lands in it. The records
// written once get full pages; those updated in place (a job's attempts,
// a draft's decision) keep a tenth free for a record to grow into without
// a split. Buckets keyed otherwise (leads, keys, conversations) keep the
// default: their inserts land anywhere. A variable for the benchmark that
// compares it with bbolt's default.
var appendFill = map[string]float64{
	string(bucketEvents):     1.0,
	string(bucketAudit):      1.0,
	string(bucketJobsByCorr): 1.0,
	// Status indexes: the status, then the time it was entered (or a
	// ULID), so a new entry sorts last in its status.
	string(bucketHandoffsByStatus): 1.0,
	string(bucketDraftsByStatus):   1.0,
	string(bucketOutboxByStatus):   1.0,
	string(bucketOutbox):           0.9,
	string(bucketJobs):             0.9,
	string(bucketDrafts):           0.9,
	string(bucketJobsReady):        0.9,
}

// Update runs fn inside a write transaction shared with every other caller
// queued at the same moment (the group commit), and returns fn's own error
// once the transaction is durable: fn's writes are committed if and only if
// Update returns nil.
//
// fn may run more than once: an engine transaction has no savepoints
// (bbolt's has none), so when a neighbour in
// the same round fails, the round is rolled back and run again without it.
// So fn must touch nothing outside tx (no channels, no metrics, no shared
// variables but its own outputs) and must set its outputs afresh on every
// run; side effects belong after Update returns. fn must not keep tx or
// anything read through it once it returns.
//
// A returned error rolls back fn's writes, and only fn's. "Already exists"
// is an answer, not an error: return it in fn's outputs (as RecordEvent's
// Created does), so that a duplicate never costs its neighbours a re-run.
//
// Update never reports failure for a write it committed: once fn is handed
// to the committer, Update waits for the decision even if ctx ends.
func (s *Store) Update(ctx context.Context, fn func(tx *Tx) error) error {
	if s.writes == nil {
		return ErrReadOnly
	}
	return s.update(ctx, fn)
}

// update is Update without the read-only guard, for the store's own methods.
func (s *Store) update(ctx context.Context, fn func(tx *Tx) error) error {
	return s.updateReading(ctx, nil, fn)
}

// updateReading is update for an fn that will read reads: on PostgreSQL
// the round reads every caller's keys of a bucket in one round trip
// before the first fn runs, instead of one per Get.
func (s *Store) updateReading(ctx context.Context, reads []readKey, fn func(tx *Tx) error) error {
	req := &writeReq{fn: fn, done: make(chan error, 1), reads: reads}
	s.offering.Add(1)
	select {
	case s.writes <- req:
		s.offering.Add(-1)
	case <-s.stopped:
		s.offering.Add(-1)
		return ErrClosed
	case <-ctx.Done():
		s.offering.Add(-1)
		return ctx.Err()
	}
	// Once handed over the write will be decided; wait for the decision even
	// if ctx ends, so that the caller never reports failure for a commit.
	return <-req.done
}

// commitLoop is the single writer. It blocks for the first request, takes
// whatever else is already waiting, and commits them together: with one
// caller it commits at once, with many it commits many at a time; no timer.
func (s *Store) commitLoop() {
	defer close(s.stopped)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case r := <-s.writes:
			batch = append(batch[:0], r)
		case <-s.quit:
			return
		}
		batch = s.takeWaiting(batch)
		s.gate.enter()
		s.commit(batch)
		s.gate.exit()
	}
}

// takeWaiting adds to batch the requests already waiting, up to maxBatch.
func (s *Store) takeWaiting(batch []*writeReq) []*writeReq {
	for len(batch) < maxBatch {
		select {
		case r := <-s.writes:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// errRollback aborts a round so that it can be run again without a failed caller.
var errRollback = errors.New("store: roll back the round")

// commit runs one round, one engine transaction. An engine transaction
// has no savepoints, so a caller that fails may
// have written half its records into the shared transaction: the round is
// rolled back and run again without it (as bolt's db.Batch does), and the
// failed caller gets its own error.
func (s *Store) commit(batch []*writeReq) {
	for len(batch) > 0 {
		failed := -1
		var failure error
		var due time.Time // the round's earliest job made ready
		var completed []endedJob
		c, err := s.eng.Update(func(btx engine.Tx) error {
			// The engine may have waited to begin (PostgreSQL's writers'
			// lock, held by another process's round): the callers that
			// came meanwhile join this round rather than wait for the next.
			batch = s.takeWaiting(batch)
			tx := &Tx{tx: btx, seen: &s.seen, hooks: &s.hooks}
			if p, ok := btx.(engine.Prefetcher); ok {
				prefetch(p, batch)
			}
			for i, r := range batch {
				if err := r.fn(tx); err != nil {
					failed, failure = i, err
					return errRollback
				}
			}
			due, completed = tx.due, tx.completed
			if n, ok := btx.(engine.Notifier); ok && !due.IsZero() {
				n.Notify(s.notice(due))
			}
			return nil
		})
		// A caller failed, unless the engine failed the round itself (a
		// read inside it that did not answer): then every caller hears it.
		if failed >= 0 && errors.Is(err, errRollback) {
			batch[failed].done <- failure
			batch = append(batch[:failed], batch[failed+1:]...)
			continue
		}
		s.noteCommit(err, c.Allocated)
		if err != nil {
			// The cause stays in the chain (errors.Is(err, syscall.ENOSPC)).
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if err == nil {
			s.hooks.dueSaid(due)
			s.ended.keep(completed)
		}
		for _, r := range batch {
			r.done <- err
		}
		return
	}
}

// prefetch reads keys of bucket in one go for the Gets that follow, on an
// engine where each read is a round trip (engine.Prefetcher); elsewhere it
// does nothing.
func (tx *Tx) prefetch(bucket []byte, keys []string) {
	p, ok := tx.tx.(engine.Prefetcher)
	if !ok || len(keys) < 2 {
		return
	}
	bs := make([][]byte, len(keys))
	for i, k := range keys {
		bs[i] = []byte(k)
	}
	p.Prefetch(bucket, bs)
}

// prefetch reads, for each bucket, the keys every caller of the round
// said it will read, in one go.
func prefetch(p engine.Prefetcher, batch []*writeReq) {
	var byBucket map[string][][]byte
	for _, r := range batch {
		for _, rk := range r.reads {
			if byBucket == nil {
				byBucket = map[string][][]byte{}
			}
			byBucket[string(rk.bucket)] = append(byBucket[string(rk.bucket)], rk.key)
		}
	}
	for name, keys := range byBucket {
		p.Prefetch([]byte(name), keys)
	}
}

// View runs fn inside a read transaction: a consistent snapshot, however
// many writes commit meanwhile. Writes through tx fail. Anything fn returns
// it must have copied out of tx (the typed operations do).
func (s *Store) View(fn func(tx *Tx) error) error {
	return s.view(fn)
}

// view is View, for the store's own methods.
func (s *Store) view(fn func(tx *Tx) error) error {
	s.gate.enter()
	defer s.gate.exit()
	return s.eng.View(func(btx engine.Tx) error { return fn(&Tx{tx: btx, seen: &s.seen, hooks: &s.hooks}) })
}

// Repairs is what the open's migrations found wrong on disk and rewrote
// (none when the file was already of this schema): serve logs it.
func (s *Store) Repairs() []Repair { return s.repairs }

// Migrations lists the migrations this open ran, oldest first (none for a
// file already at SchemaVersion).
func (s *Store) Migrations() []Migrated { return s.migrated }

// Deferred reports whether the open left the whole page walk out (see
// Options.CheckPages): the caller runs CheckPages once it is ready.
func (s *Store) Deferred() bool { return s.deferred }

// Ping proves the store can commit: a write round trip through the
// committer. Once CheckPages has found damage, Ping answers that instead.
// After a write failed for lack of disk space (NoSpace), its few bytes
// would prove nothing: it writes as much as failed first (probeSpace), and
// answers the *NoSpaceError until that commits.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.damage.Load(); err != nil {
		return *err
	}
	if e := s.full.Load(); e != nil {
		if err := s.probeSpace(ctx, e); err != nil {
			return err
		}
	}
	return s.update(ctx, func(tx *Tx) error {
		return tx.bucket(bucketMeta).Put([]byte("ping"), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	})
}

// getJSON decodes the value at key in bucket b into v; ErrNotFound when absent.
func getJSON(b engine.Bucket, key []byte, v any) error {
	raw := b.Get(key)
	if raw == nil {
		return ErrNotFound
	}
	// json.Unmarshal copies strings out of raw, so v outlives the transaction.
	return json.Unmarshal(raw, v)
}

// putJSON encodes v into bucket b at key.
func putJSON(b engine.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}
