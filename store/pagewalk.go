package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/handoff/handoff/store/engine/boltengine"
)

// A page walk with plain reads (ReadAt, never the mmap), bounds-checked at
// every step, so that a damaged page is an error here, not a crash: the
// cheap part runs before bbolt opens a file, the whole walk runs in the
// background once the server is ready (Store.CheckPages). It reads what
// bbolt would read: every branch and leaf page of every bucket, their
// types, element bounds and key order, and, on the whole walk, that no
// page is reached twice or both reached and free.

// bbolt's page flags and element layout (go.etcd.io/bbolt/internal/common).
const (
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	elemSize         = 16 // branch: pos, ksize, pgid; leaf: flags, pos, ksize, vsize
	bucketHeaderSize = 16 // root pgid, sequence
	maxTreeDepth     = 64 // far deeper than any real file: a cycle, not a tree
)

// openCheckLevels is how many levels of each bucket's tree the check at
// open reads: the bucket's root page and its children. That is what every
// read of the bucket goes through first, a few hundred pages at most in a
// file of millions; deeper pages are left to the background walk. A
// variable for tests.
var openCheckLevels = 2

// walker reads the pages of one bbolt file as of one meta page.
type walker struct {
	r      io.ReaderAt
	ps     int64
	pgid   uint64 // the meta's high-water mark: pages 0 .. pgid-1 exist
	levels int    // levels of each bucket tree to read; 0: all
	seen   []uint64
	free   []uint64
	bufs   [][]byte // one per depth, reused: a page's keys bound its children's
}

// errDamage is a damaged page, in one sentence.
type errDamage struct{ msg string }

func (e errDamage) Error() string { return e.msg }

func damage(format string, a ...any) error { return errDamage{fmt.Sprintf(format, a...)} }

// newWalker prepares a walk of the file r as of meta m. With whole set it
// also keeps one bit per page, to find pages reached twice or reached and free.
func newWalker(r io.ReaderAt, m meta, levels int, whole bool) *walker {
	w := &walker{r: r, ps: int64(m.pageSize), pgid: m.pgid, levels: levels}
	if whole {
		w.seen = make([]uint64, (m.pgid+63)/64)
		w.free = make([]uint64, (m.pgid+63)/64)
	}
	return w
}

func bit(set []uint64, id uint64) bool { return set[id/64]&(1<<(id%64)) != 0 }
func setBit(set []uint64, id uint64)   { set[id/64] |= 1 << (id % 64) }

// page reads page id and its overflow pages into the buffer of depth,
// checking that they exist and that the header names the page.
func (w *walker) page(id uint64, depth int) ([]byte, uint16, error) {
	if id < 2 || id >= w.pgid {
		return nil, 0, damage("a page points to page %d, outside the file's %d pages", id, w.pgid)
	}
	// One read for the page itself (its header first), a second only for
	// the overflow pages it names: a walk of a big file is mostly reads.
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, nil)
	}
	if int64(cap(w.bufs[depth])) < w.ps {
		w.bufs[depth] = make([]byte, w.ps)
	}
	head := w.bufs[depth][:w.ps]
	if _, err := w.r.ReadAt(head, int64(id)*w.ps); err != nil {
		return nil, 0, damage("page %d cannot be read: %v", id, err)
	}
	ne := binary.NativeEndian
	flags, overflow := ne.Uint16(head[8:10]), uint64(ne.Uint32(head[12:16]))
	if got := ne.Uint64(head[0:8]); got != id {
		return nil, 0, damage("page %d is damaged: its header says page %d", id, got)
	}
	if id+overflow >= w.pgid {
		return nil, 0, damage("page %d is damaged: its %d overflow pages run past the file's %d pages", id, overflow, w.pgid)
	}
	n := (1 + int64(overflow)) * w.ps
	buf := head
	if overflow > 0 {
		if int64(cap(w.bufs[depth])) < n {
			grown := make([]byte, n)
			copy(grown, head)
			w.bufs[depth] = grown
		}
		buf = w.bufs[depth][:n]
		if _, err := w.r.ReadAt(buf[w.ps:], int64(id+1)*w.ps); err != nil {
			return nil, 0, damage("page %d cannot be read: %v", id, err)
		}
	}
	if w.seen != nil {
		for i := id; i <= id+overflow; i++ {
			switch {
			case bit(w.seen, i):
				return nil, 0, damage("page %d is damaged: it is reached twice", i)
			case bit(w.free, i):
				return nil, 0, damage("page %d is damaged: it is in use and on the freelist", i)
			}
			setBit(w.seen, i)
		}
	}
	return buf, flags, nil
}

// freelist reads the freelist page at id and, on a whole walk, marks its pages free.
func (w *walker) freelist(id uint64) error {
	buf, flags, err := w.page(id, 0)
	if err != nil {
		return fmt.Errorf("the freelist: %w", err)
	}
	if flags != freelistPageFlag {
		return damage("the freelist page %d is damaged: it has page flags %#x", id, flags)
	}
	ne := binary.NativeEndian
	n, at := uint64(ne.Uint16(buf[10:12])), uint64(pageHeaderSize)
	if n == 0xFFFF { // the count does not fit in the header: it is the first element
		if len(buf) < pageHeaderSize+8 {
			return damage("the freelist page %d is damaged: it is too short", id)
		}
		n, at = ne.Uint64(buf[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > (uint64(len(buf))-at)/8 {
		return damage("the freelist page %d is damaged: it counts %d free pages, more than it holds", id, n)
	}
	for i := range n {
		f := ne.Uint64(buf[at+8*i:])
		if f < 2 || f >= w.pgid {
			return damage("the freelist page %d is damaged: it lists page %d, outside the file's %d pages", id, f, w.pgid)
		}
		if w.free != nil {
			if bit(w.seen, f) {
				return damage("page %d is damaged: it is in use and on the freelist", f)
			}
			setBit(w.free, f)
		}
	}
	return nil
}

// tree reads the bucket tree whose root is page id; keys must lie in
// [lo, hi) (nil: unbounded). level counts from the bucket's root page.
func (w *walker) tree(ctx context.Context, id uint64, bucket string, lo, hi []byte, level, depth int) error {
	if depth > maxTreeDepth {
		return damage("page %d is damaged: the pages of bucket %q nest more than %d deep", id, bucket, maxTreeDepth)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	buf, flags, err := w.page(id, depth)
	if err != nil {
		return err
	}
	return w.elements(ctx, buf, flags, id, bucket, lo, hi, level, depth)
}

// elements checks the elements of one branch or leaf page (p, read from
// page id; an inline bucket's page has id 0) and walks on.
func (w *walker) elements(ctx context.Context, p []byte, flags uint16, id uint64, bucket string, lo, hi []byte, level, depth int) error {
	ne := binary.NativeEndian
	count := uint64(ne.Uint16(p[10:12]))
	where := fmt.Sprintf("page %d of bucket %q", id, bucket)
	if id == 0 {
		where = fmt.Sprintf("the inline page of bucket %q", bucket)
	}
	if flags != branchPageFlag && flags != leafPageFlag {
		return damage("%s is damaged: it is neither a branch nor a leaf page (flags %#x)", where, flags)
	}
	if uint64(pageHeaderSize)+count*elemSize > uint64(len(p)) {
		return damage("%s is damaged: its %d elements do not fit in it", where, count)
	}
	var prev []byte
	for i := range count {
		e := uint64(pageHeaderSize) + i*elemSize
		var pos, ksize, vsize uint64
		if flags == branchPageFlag {
			pos, ksize = uint64(ne.Uint32(p[e:])), uint64(ne.Uint32(p[e+4:]))
		} else {
			pos, ksize, vsize = uint64(ne.Uint32(p[e+4:])), uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		}
		if e+pos+ksize+vsize > uint64(len(p)) {
			return damage("%s is damaged: element %d points past the page's end", where, i)
		}
		key := p[e+pos : e+pos+ksize]
		switch {
		case i > 0 && bytes.Compare(prev, key) >= 0:
			return damage("%s is damaged: its keys are out of order at element %d", where, i)
		case lo != nil && bytes.Compare(key, lo) < 0, hi != nil && bytes.Compare(key, hi) >= 0:
			return damage("%s is damaged: element %d's key lies outside the range its parent gives it", where, i)
		}
		prev = key
		if flags == branchPageFlag {
			if child := ne.Uint64(p[e+8:]); child < 2 || child >= w.pgid {
				return damage("%s is damaged: element %d points to page %d, outside the file's %d pages", where, i, child, w.pgid)
			}
			if w.levels > 0 && level+1 >= w.levels {
				continue
			}
			next := hi
			if i+1 < count {
				f := uint64(pageHeaderSize) + (i+1)*elemSize
				fpos, fks := uint64(ne.Uint32(p[f:])), uint64(ne.Uint32(p[f+4:]))
				if f+fpos+fks > uint64(len(p)) {
					return damage("%s is damaged: element %d points past the page's end", where, i+1)
				}
				next = p[f+fpos : f+fpos+fks]
			}
			if err := w.tree(ctx, ne.Uint64(p[e+8:]), bucket, key, next, level+1, depth+1); err != nil {
				return err
			}
			continue
		}
		if ne.Uint32(p[e:])&bucketLeafFlag == 0 {
			continue
		}
		v := p[e+pos+ksize : e+pos+ksize+vsize]
		if len(v) < bucketHeaderSize {
			return damage("%s is damaged: bucket %q's header is cut short", where, key)
		}
		name := string(key)
		if root := ne.Uint64(v); root != 0 {
			if err := w.tree(ctx, root, name, nil, nil, 0, depth+1); err != nil {
				return err
			}
			continue
		}
		inline := v[bucketHeaderSize:]
		if len(inline) < pageHeaderSize {
			return damage("%s is damaged: bucket %q's inline page is cut short", where, key)
		}
		if err := w.elements(ctx, inline, ne.Uint16(inline[8:10]), 0, name, nil, nil, 0, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// walkMeta walks the file r as of meta m: the freelist, then the buckets.
func (w *walker) walkMeta(ctx context.Context, m meta) error {
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	return w.tree(ctx, m.root, "", nil, nil, 0, 0)
}

// checkStructure is the check at open: preflight's meta pages, then the
// freelist page and the first openCheckLevels levels of every bucket's
// tree, with plain reads. It returns the newest meta.
func checkStructure(path string) (meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return meta{}, &DamagedError{Path: path, Problem: "cannot be opened: " + err.Error()}
	}
	defer f.Close()
	m, err := newestMeta(path, f)
	if err == nil {
		if werr := newWalker(f, m, openCheckLevels, false).walkMeta(context.Background(), m); werr != nil {
			err = damaged(path, "%v", werr)
		}
	}
	if err != nil && lockedByOther(f) {
		return meta{}, inUseError{path}
	}
	return m, err
}

// CheckPages walks every page of the open file with plain reads, as of a
// read transaction that pins them, without touching the mmap: the pages
// go through the page cache, not into the server's memory. It is the part
// of the damaged-file check that no longer runs before a large file is
// opened (see Options.CheckPages); a *DamagedError it returns is also
// what Ping answers from then on, so /readyz fails with it.
func (s *Store) CheckPages(ctx context.Context) error {
	err := s.checkPages(ctx)
	var de *DamagedError
	if errors.As(err, &de) {
		s.damage.Store(&err)
	}
	return err
}

func (s *Store) checkPages(ctx context.Context) error {
	// The read transaction keeps every page of its snapshot from being
	// freed and reused while the walk reads it, and it holds the store's
	// gate (view), so a restore cannot swap the file between its open and
	// the walk. Its meta is the one of the two on disk with its transaction
	// id; a commit may rewrite that meta page between the start of the
	// transaction and the read, so try again then.
	for range 10 {
		found := false
		err := s.view(func(tx *Tx) error {
			id, ok := boltengine.TxID(tx.tx)
			if !ok {
				found = true // not a bbolt file: its engine checks its own storage
				return nil
			}
			f, err := os.Open(s.path)
			if err != nil {
				return fmt.Errorf("store: check pages of %s: %w", s.path, err)
			}
			defer f.Close()
			m, ok, err := metaOf(s.path, f, id)
			if err != nil || !ok {
				return err
			}
			found = true
			defer dropCache(f) // readahead_linux.go
			return newWalker(f, m, 0, true).walkMeta(ctx, m)
		})
		var dmg errDamage
		if errors.As(err, &dmg) {
			return &DamagedError{Path: s.path, Problem: "failed its page check: " + dmg.msg}
		}
		if err != nil || found {
			return err
		}
	}
	return fmt.Errorf("store: check pages of %s: the meta pages kept changing under the check", s.path)
}

// dropFileCache drops the page cache that a sequential read of the live
// file at path (a backup's copy: bbolt's WriteTo reads it through a file
// of its own) left in large folios, as the page walk does (dropCache):
// a later commit's 4 KiB pwrite into one would dirty, and write back, the
// whole folio. Pages the server's mmap holds stay.
func dropFileCache(path string) {
	if f, err := os.Open(path); err == nil {
		dropCache(f)
		f.Close()
	}
}

// metaOf reads both meta pages of f and returns the one of transaction txid.
func metaOf(path string, f *os.File, txid uint64) (meta, bool, error) {
	m0, err := readMeta(path, f, 0, 0)
	if err != nil {
		return meta{}, false, err
	}
	m1, err := readMeta(path, f, 1, int64(m0.pageSize))
	if err != nil {
		return meta{}, false, err
	}
	for _, m := range []meta{m0, m1} {
		if m.txid == txid {
			return m, true, nil
		}
	}
	return meta{}, false, nil
}

// readMeta reads and checks meta page n at offset off.
func readMeta(path string, f *os.File, n int, off int64) (meta, error) {
	buf := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		return meta{}, damaged(path, "read meta page %d: %v", n, err)
	}
	m := decodeMeta(buf)
	if p := m.problem(n); p != "" {
		return meta{}, damaged(path, "%s", p)
	}
	return m, nil
}
