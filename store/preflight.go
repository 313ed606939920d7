package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
)

// DamagedError says that a file is not a sound handoff database, and why,
// in one sentence: Problem reads after the file's name ("cannot be opened:
// it is truncated: …", "failed verification: …").
type DamagedError struct {
	Path    string
	Problem string
}

func (e *DamagedError) Error() string { return "store: " + e.Path + " " + e.Problem }

// damaged returns a DamagedError for a file that cannot be opened.
func damaged(path, format string, a ...any) error {
	return &DamagedError{Path: path, Problem: "cannot be opened: " + fmt.Sprintf(format, a...)}
}

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common): a page starts
// with a 16-byte header (id, flags, count, overflow); a meta page holds,
// after it, magic, version, page size, flags, the root bucket (root page,
// sequence), the freelist page, the high-water mark, the transaction id and
// an FNV-64a checksum of everything before it, in the machine's byte order.
const (
	pageHeaderSize   = 16
	metaSize         = 64
	metaChecksumAt   = 56
	metaPageFlag     = 0x04
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	noFreelist       = ^uint64(0)
	minPageSize      = 1 << 10
	maxPageSize      = 1 << 24
	firstMetaReadLen = 0x1000 // what bbolt reads to find the page size
)

// meta is one decoded meta page.
type meta struct {
	pageID, flags      uint64
	magic, version     uint32
	pageSize           uint32
	root, freelist     uint64
	pgid, txid         uint64
	checksum, computed uint64
}

func decodeMeta(page []byte) meta {
	ne := binary.NativeEndian
	m := page[pageHeaderSize : pageHeaderSize+metaSize]
	h := fnv.New64a()
	h.Write(m[:metaChecksumAt])
	return meta{
		pageID:   ne.Uint64(page[0:8]),
		flags:    uint64(ne.Uint16(page[8:10])),
		magic:    ne.Uint32(m[0:4]),
		version:  ne.Uint32(m[4:8]),
		pageSize: ne.Uint32(m[8:12]),
		root:     ne.Uint64(m[16:24]),
		freelist: ne.Uint64(m[32:40]),
		pgid:     ne.Uint64(m[40:48]),
		txid:     ne.Uint64(m[48:56]),
		checksum: ne.Uint64(m[56:64]),
		computed: h.Sum64(),
	}
}

// problem says what is wrong with meta page n, or "" when nothing is.
func (m meta) problem(n int) string {
	switch {
	case m.magic != boltMagic:
		return fmt.Sprintf("meta page %d is damaged: it lacks bbolt's magic number", n)
	case m.version != boltVersion:
		return fmt.Sprintf("meta page %d has bbolt file format version %d, this handoff reads version %d", n, m.version, boltVersion)
	case m.checksum != m.computed:
		return fmt.Sprintf("meta page %d is damaged: its checksum does not match", n)
	case m.flags != metaPageFlag || m.pageID != uint64(n):
		return fmt.Sprintf("meta page %d is damaged: its page header says page %d with flags %#x", n, m.pageID, m.flags)
	case m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0:
		return fmt.Sprintf("meta page %d is damaged: page size %d is not a power of two from 1 KiB to 16 MiB", n, m.pageSize)
	case m.root < 2 || m.root >= m.pgid || (m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid)):
		return fmt.Sprintf("meta page %d is damaged: its root page %d or freelist page %d is outside its %d pages", n, m.root, m.freelist, m.pgid)
	}
	return ""
}

// preflight refuses, in one sentence, a file that bbolt would crash on at
// open or silently misread, using ordinary reads: bbolt maps the file, a
// read past the end of a truncated file is then SIGBUS, and no recover()
// catches that. It checks the size, both meta pages (magic, version,
// checksum, header, page size, page ids) and that the file holds every
// page its newest meta counts. It does not walk the pages; see checkInChild.
//
// Both meta pages must be sound, though bbolt itself would fall back to
// the older one: the 64 bytes of a meta sit in one disk sector, which
// disks write whole, so a torn meta after a crash is not a thing to expect
// and a bad one means the file was damaged, likely elsewhere too.
func preflight(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &DamagedError{Path: path, Problem: "cannot be opened: " + err.Error()}
	}
	defer f.Close()
	_, err = newestMeta(path, f)
	if err != nil && lockedByOther(f) {
		return inUseError{path}
	}
	return err
}

// newestMeta is preflight on the open file f; it returns the newest meta.
func newestMeta(path string, f *os.File) (meta, error) {
	fi, err := f.Stat()
	if err != nil {
		return meta{}, damaged(path, "%v", err)
	}
	size := fi.Size()
	if fi.IsDir() {
		return meta{}, damaged(path, "it is a folder")
	}
	if size == 0 {
		return meta{}, damaged(path, "it is empty (0 bytes)")
	}
	head := make([]byte, firstMetaReadLen)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return meta{}, damaged(path, "%v", err)
	}
	head = head[:n]
	if len(head) < pageHeaderSize+metaSize {
		if len(head) >= pageHeaderSize+4 && binary.NativeEndian.Uint32(head[pageHeaderSize:]) == boltMagic {
			return meta{}, damaged(path, "it is truncated: it has %d bytes, not even one meta page", size)
		}
		return meta{}, damaged(path, "it is not a bbolt database (it starts with %s)", startOf(head))
	}
	if decodeMeta(head).magic != boltMagic && !hasSecondMeta(f, size) {
		return meta{}, damaged(path, "it is not a bbolt database (it starts with %s)", startOf(head))
	}
	m0 := decodeMeta(head)
	if p := m0.problem(0); p != "" {
		return meta{}, damaged(path, "%s", p)
	}
	ps := int64(m0.pageSize)
	if size < 2*ps {
		return meta{}, damaged(path, "it is truncated: it has %d bytes, fewer than its two meta pages (%d bytes)", size, 2*ps)
	}
	page1 := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(page1, ps); err != nil {
		return meta{}, damaged(path, "read meta page 1: %v", err)
	}
	m1 := decodeMeta(page1)
	if p := m1.problem(1); p != "" {
		return meta{}, damaged(path, "%s", p)
	}
	if m1.pageSize != m0.pageSize {
		return meta{}, damaged(path, "its meta pages disagree on the page size (%d and %d)", m0.pageSize, m1.pageSize)
	}
	newest := m0
	if m1.txid > m0.txid {
		newest = m1
	}
	if need := int64(newest.pgid) * ps; size < need {
		return meta{}, damaged(path, "it is truncated: it has %d bytes, but its pages reach %d (%d pages of %d bytes)", size, need, newest.pgid, ps)
	}
	return newest, nil
}

// hasSecondMeta reports whether a meta page with bbolt's magic number sits
// where bbolt looks for the second one when the first is unreadable: so
// that a file whose first page alone is damaged is called damaged, not foreign.
func hasSecondMeta(f *os.File, size int64) bool {
	for ps := int64(minPageSize); ps <= maxPageSize && ps+pageHeaderSize+metaSize <= size; ps <<= 1 {
		buf := make([]byte, pageHeaderSize+metaSize)
		if _, err := f.ReadAt(buf, ps); err == nil && decodeMeta(buf).magic == boltMagic {
			return true
		}
	}
	return false
}

// startOf quotes the first bytes of a foreign file, which often name its format.
func startOf(b []byte) string {
	b = b[:min(len(b), 16)]
	s := fmt.Sprintf("%q", b)
	if strings.Count(s, `\x`) > len(b)/2 {
		return fmt.Sprintf("bytes % x", b)
	}
	return s
}
