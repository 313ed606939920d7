package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/boltengine"
)

// NoSpaceError is a commit that failed because the filesystem holding the
// database is full (ENOSPC) or its owner's quota is spent (EDQUOT). The
// store remembers the last one (Store.NoSpace) until a write at least as
// large commits, so that readiness says what the webhooks meet: a probe's
// few bytes still fit in the file's free pages long after a webhook's
// kilobytes stop fitting on the disk.
type NoSpaceError struct {
	Dir  string    // the data folder, the one to free space on
	At   time.Time // when the write failed
	Need int64     // the bytes the failed commit had allocated when it failed
	Err  error     // the cause, as the system said it
}

func (e *NoSpaceError) Error() string {
	return fmt.Sprintf("a write failed at %s for lack of disk space (%v): free space on the disk holding %s; writes and readiness come back once a write of that size commits",
		e.At.UTC().Format(time.RFC3339), e.cause(), e.Dir)
}

func (e *NoSpaceError) Unwrap() error { return e.Err }

// cause is the system's words without the path, which Error names itself.
func (e *NoSpaceError) cause() string {
	switch {
	case errors.Is(e.Err, syscall.EDQUOT):
		return syscall.EDQUOT.Error()
	case errors.Is(e.Err, syscall.ENOSPC):
		return syscall.ENOSPC.Error()
	}
	return e.Err.Error()
}

// noSpace reports whether err says the disk is full or the quota spent:
// the engine classifies its own errors (engine.ErrNoSpace).
func noSpace(err error) bool {
	return errors.Is(err, engine.ErrNoSpace)
}

// spaceProbeMax caps the write that proves space is back: the default
// body limit, one largest webhook. A failed round of many webhooks asks
// for no more than that: each is retried, and one that fits commits.
const spaceProbeMax = 1 << 20

// spaceProbeMin is the smallest probe, well past the few pages a lease
// renewal or a session allocates in the file's free pages.
const spaceProbeMin = 64 << 10

// probeSize is how large a commit clears e: what failed, within the bounds.
func (e *NoSpaceError) probeSize() int64 {
	return min(max(e.Need, spaceProbeMin), spaceProbeMax)
}

// NoSpace is the last write that failed for lack of disk space, until a
// write at least as large (up to a largest webhook) has committed since;
// nil when there is none. It costs an atomic load.
func (s *Store) NoSpace() error {
	if e := s.full.Load(); e != nil {
		return e
	}
	return nil
}

// noteCommit remembers a commit's outcome: a failure for lack of space,
// with what it had allocated, or a success of alloc bytes, which clears
// the last failure when it is at least its probe size.
func (s *Store) noteCommit(err error, alloc int64) {
	switch {
	case err == nil:
		s.commits.Add(1)
		if e := s.full.Load(); e != nil && alloc >= e.probeSize() {
			s.full.CompareAndSwap(e, nil)
		}
	case noSpace(err):
		dir := filepath.Dir(s.path)
		if s.file == nil {
			dir = s.path // another engine's database, named as a whole
		}
		s.full.Store(&NoSpaceError{Dir: dir, At: time.Now(), Need: alloc, Err: err})
	}
}

// Commits is how many rounds of writes (group commits) have committed
// since the open; it costs an atomic load. app starts its background page
// walk once this stands nearly still (a quiet moment), so that a burst of
// webhooks at start-up does not share the machine with it.
func (s *Store) Commits() uint64 { return s.commits.Load() }

// probeKey is the meta key of the write that proves space is back.
var probeKey = []byte("space-probe")

// probeSpace writes a value of e's probe size and deletes it again, in two
// commits, so that Ping sees space come back without waiting for a
// webhook; the first commit clears the store's memory of e (noteCommit).
// It returns the store's no-space error when the write still fails.
func (s *Store) probeSpace(ctx context.Context, e *NoSpaceError) error {
	value := make([]byte, e.probeSize())
	err := s.update(ctx, func(tx *Tx) error { return tx.bucket(bucketMeta).Put(probeKey, value) })
	if err != nil {
		if full := s.NoSpace(); full != nil {
			return full
		}
		return err
	}
	return s.update(ctx, func(tx *Tx) error { return tx.bucket(bucketMeta).Delete(probeKey) })
}

// A new database is made under a name of its own beside path (newPattern:
// CreateTemp's exclusive create, so no other process knows it), migrated
// there, and only then published at path by a hard link, which fails
// when path exists. So path never names a half-made file, and an open
// that fails removes only its own: two processes creating the database
// at the same instant cannot remove each other's (one that loses the
// link opens the winner's file instead, as any existing one), and a
// crash mid-create leaves a hidden name (swept once it is old and
// unlocked: sweepNew) instead of a 0-byte handoff.db that every later
// start refuses.

// newPattern is CreateTemp's pattern of a database being made, beside it.
func newPattern(path string) string { return "." + filepath.Base(path) + ".new-*" }

// sweepAge is how old an unlocked half-made database must be before a
// create removes it: a create takes milliseconds, so one this old was
// left by a process that died.
const sweepAge = time.Hour

// errMadeMeanwhile is a create whose link found path taken: another
// process published its database first.
var errMadeMeanwhile = errors.New("store: another process created the database meanwhile")

// createHooks are for tests (none runs in parallel): made, when set,
// runs after a create's file is made and migrated, before it is
// published, and an error fails the create there; removing, when set,
// runs once that failed create's file is closed, before it is removed.
var createHooks struct {
	made     func() error
	removing func()
}

// create makes a new database at path, as the block above describes. It
// answers errMadeMeanwhile when another process published one first.
func create(path string, o boltengine.Options) (*Store, *boltengine.DB, error) {
	sweepNew(path)
	f, err := os.CreateTemp(filepath.Dir(path), newPattern(path))
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return nil, nil, &CreateError{Path: path, Err: err}
		}
		return nil, nil, fmt.Errorf("store: create %s: %w", path, err)
	}
	made := f.Name()
	f.Close()
	db, err := openBolt(made, o)
	if err != nil {
		return nil, nil, unmake(path, made, fmt.Errorf("store: open %s: %w", path, err))
	}
	s, err := openOn(db, path, false) // closes db on an error
	if err == nil && createHooks.made != nil {
		if err = createHooks.made(); err != nil {
			s.Close()
			if createHooks.removing != nil {
				createHooks.removing()
			}
		}
	}
	if err != nil {
		return nil, nil, unmake(path, made, err)
	}
	if err := publish(made, path); err != nil {
		s.Close()
		os.Remove(made)
		return nil, nil, err
	}
	db.Renamed(path)
	return s, db, nil
}

// publish gives the made file its name path, never replacing a file
// there (errMadeMeanwhile), and removes the made name.
func publish(made, path string) error {
	err := os.Link(made, path)
	switch {
	case errors.Is(err, fs.ErrExist):
		return errMadeMeanwhile
	case err != nil:
		// A filesystem without hard links: a rename that never replaces
		// a file there (renameat2's RENAME_NOREPLACE), or, where the
		// system has none, a refusal: a plain rename could replace a file
		// another process published meanwhile, and its data with it.
		switch rerr := renameNoReplace(made, path); {
		case errors.Is(rerr, fs.ErrExist):
			return errMadeMeanwhile
		case rerr != nil:
			return fmt.Errorf("store: create %s: this filesystem can neither link nor rename without replacing (link: %v; rename: %v): put the data folder on a local filesystem", path, err, rerr)
		}
	default:
		os.Remove(made)
	}
	// A folder that cannot be synced (some filesystems refuse) leaves
	// the name's durability to the system.
	_ = syncDir(filepath.Dir(path))
	return nil
}

// sweepNew removes what a create that died left beside path: a made file
// older than sweepAge that no process holds (bbolt's lock).
func sweepNew(path string) {
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), newPattern(path)))
	for _, p := range left {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil && time.Since(fi.ModTime()) > sweepAge && !lockedByOther(f) {
			os.Remove(p)
		}
		f.Close()
	}
}

// sweepLinks removes a made name still linked to path itself, which a
// create that died between publishing and removing it leaves: the same
// file under a second name, harmless to remove, and else it would keep
// the old database's space after a restore replaced path.
func sweepLinks(path string) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), newPattern(path)))
	for _, p := range left {
		if li, err := os.Stat(p); err == nil && os.SameFile(fi, li) {
			os.Remove(p)
		}
	}
}

// unmake removes made, the file a create made for path, when the create
// failed: bbolt leaves it behind, often 0 bytes when the disk is full.
// No other process knows its name, so nothing another opened is touched.
// For lack of space the error says what to do.
func unmake(path, made string, err error) error {
	if rmErr := os.Remove(made); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		return fmt.Errorf("%w; the half-made %s could not be removed (%v): remove it", err, made, rmErr)
	}
	if noSpace(err) {
		return &CreateError{Path: path, Err: err}
	}
	return fmt.Errorf("%w; nothing of %s was left behind", err, path)
}

// CreateError is a new database that could not be made for lack of disk
// space; nothing of it was left behind.
type CreateError struct {
	Path string
	Err  error
}

func (e *CreateError) Error() string {
	return fmt.Sprintf("store: cannot create %s: %s, and nothing was left behind: free space on the disk holding %s, then start again",
		e.Path, (&NoSpaceError{Err: e.Err}).cause(), filepath.Dir(e.Path))
}

func (e *CreateError) Unwrap() error { return e.Err }
