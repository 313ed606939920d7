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
		s.full.Store(&NoSpaceError{Dir: filepath.Dir(s.path), At: time.Now(), Need: alloc, Err: err})
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

// unmake undoes the file an open created when the open failed: bbolt
// leaves it behind, often 0 bytes when the disk is full, and every later
// open would refuse it as empty. A file that existed before is never
// touched. For lack of space the error says what to do.
func unmake(path string, created bool, err error) error {
	if !created {
		return err
	}
	if rmErr := os.Remove(path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		return fmt.Errorf("%w; the half-made %s could not be removed (%v): remove it before the next start", err, path, rmErr)
	}
	if noSpace(err) {
		return &CreateError{Path: path, Err: err}
	}
	return fmt.Errorf("%w; the half-made %s was removed", err, path)
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
