// Package storetest is the store's test kit: the engine every store test
// runs on (Chosen, Engines: the conformance suite), and damaged copies of a
// bbolt database file, for the tests of every command that reads one. It reads bbolt's page layout with plain
// byte reads (go.etcd.io/bbolt/internal/common), so the pages it damages
// are real branch and leaf pages of the file, found by walking it from the
// root, not guessed.
package storetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Case is one damaged file: its name in the test table and its bytes.
type Case struct {
	Name string
	Data []byte
	// RecordsOnly marks damage inside a record's bytes, where bbolt's page
	// structure is sound: only a full check (verify, restore, backup) sees it.
	RecordsOnly bool
}

// Page is a reachable branch or leaf page and the bucket it belongs to
// ("" for the root, which lists the buckets).
type Page struct {
	ID     uint64
	Branch bool
	Bucket string
	Count  int
}

var ne = binary.NativeEndian

const (
	headerSize   = 16
	elemSize     = 16 // branch: pos, ksize, pgid; leaf: flags, pos, ksize, vsize
	branchFlag   = 0x01
	leafFlag     = 0x02
	bucketLeaf   = 0x01
	metaRootAt   = headerSize + 16
	metaTxidAt   = headerSize + 48
	metaPgSizeAt = headerSize + 8
)

// Layout returns the page size of the bbolt file good (meta page 0) and
// every branch and leaf page reachable from its root, parent before child.
func Layout(good []byte) (pageSize int, pages []Page, err error) {
	if len(good) < 2*4096 {
		return 0, nil, fmt.Errorf("storetest: %d bytes is no database", len(good))
	}
	ps := int(ne.Uint32(good[metaPgSizeAt:]))
	root := ne.Uint64(good[metaRootAt:])
	var walk func(id uint64, bucket string) error
	walk = func(id uint64, bucket string) error {
		off := int(id) * ps
		if off+ps > len(good) {
			return fmt.Errorf("storetest: page %d is past the end", id)
		}
		p := good[off:]
		flags, count := ne.Uint16(p[8:]), int(ne.Uint16(p[10:]))
		switch flags {
		case branchFlag:
			pages = append(pages, Page{ID: id, Branch: true, Bucket: bucket, Count: count})
			for i := range count {
				if err := walk(ne.Uint64(p[headerSize+i*elemSize+8:]), bucket); err != nil {
					return err
				}
			}
		case leafFlag:
			pages = append(pages, Page{ID: id, Bucket: bucket, Count: count})
			for i := range count {
				e := headerSize + i*elemSize
				if ne.Uint32(p[e:])&bucketLeaf == 0 {
					continue
				}
				k, v := leafKV(p, i)
				if child := ne.Uint64(v); child != 0 { // 0: an inline bucket, no page of its own
					if err := walk(child, string(k)); err != nil {
						return err
					}
				}
			}
		default:
			return fmt.Errorf("storetest: page %d has flags %#x", id, flags)
		}
		return nil
	}
	return ps, pages, walk(root, "")
}

// leafKV returns the key and value of element i of the leaf page p.
func leafKV(p []byte, i int) (k, v []byte) {
	e := headerSize + i*elemSize
	pos, ksize, vsize := int(ne.Uint32(p[e+4:])), int(ne.Uint32(p[e+8:])), int(ne.Uint32(p[e+12:]))
	k = p[e+pos : e+pos+ksize]
	return k, p[e+pos+ksize : e+pos+ksize+vsize]
}

// Cases damages copies of good, a database file that ends at its last page
// (a backup, as Store.Backup writes it), whose bucket named bucket spans a
// branch page and leaf pages with at least two JSON records each.
func Cases(good []byte, bucket string) ([]Case, error) {
	ps, pages, err := Layout(good)
	if err != nil {
		return nil, err
	}
	var branch, leaf *Page
	for i := range pages {
		p := &pages[i]
		switch {
		case p.Bucket == bucket && p.Branch && branch == nil:
			branch = p
		case p.Bucket == bucket && !p.Branch && p.Count >= 2 && leaf == nil:
			leaf = p
		}
	}
	if branch == nil || leaf == nil {
		return nil, fmt.Errorf("storetest: bucket %s has no branch page or no leaf page of two records: record more", bucket)
	}
	at := func(id uint64, off int) int { return int(id)*ps + off }
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	firstValue := func(b []byte) int { // offset of the first record's first byte in leaf
		p := b[at(leaf.ID, 0):]
		e := headerSize
		return at(leaf.ID, e+int(ne.Uint32(p[e+4:]))+int(ne.Uint32(p[e+8:])))
	}
	if v := good[firstValue(good)]; v != '{' {
		return nil, fmt.Errorf("storetest: the first record on page %d starts with %q, not a JSON object", leaf.ID, v)
	}
	n := len(good)
	text := bytes.Repeat([]byte("this is a text file, not a database\n"), 400)
	sqlite := append([]byte("SQLite format 3\x00"), make([]byte, 8*ps)...)
	return []Case{
		{Name: "zero length", Data: []byte{}},
		{Name: "cut inside meta page 0", Data: good[:100]},
		{Name: "cut inside meta page 1", Data: good[:ps+100]},
		{Name: "cut after the meta pages", Data: good[:2*ps]},
		{Name: "cut mid-file", Data: good[:n/2]},
		{Name: "one page short", Data: good[:n-ps]},
		{Name: "meta page 0 checksum", Data: edit(func(b []byte) { b[metaTxidAt] ^= 0xff })},
		{Name: "meta page 1 magic", Data: edit(func(b []byte) { b[ps+headerSize] ^= 0xff })},
		{Name: "meta page 0 header", Data: edit(func(b []byte) { b[8] = 0x10 })},
		{Name: "branch page type", Data: edit(func(b []byte) { b[at(branch.ID, 8)] = 0x20 })},
		{Name: "branch page child far past the end", Data: edit(func(b []byte) {
			ne.PutUint64(b[at(branch.ID, headerSize+8):], 1<<40)
		})},
		{Name: "branch page child just past the end", Data: edit(func(b []byte) {
			// Inside bbolt's mapping, which is rounded up, but past the
			// file's last byte: reading it is SIGBUS.
			ne.PutUint64(b[at(branch.ID, headerSize+8):], uint64(n/ps))
		})},
		{Name: "leaf page element past the end", Data: edit(func(b []byte) {
			ne.PutUint32(b[at(leaf.ID, headerSize+4):], 0x7ffffff0)
		})},
		{Name: "leaf page keys out of order", Data: edit(func(b []byte) {
			p := b[at(leaf.ID, 0):]
			k, _ := leafKV(p, 0)
			k[0] = 0xff
		})},
		{Name: "leaf page record bytes", Data: edit(func(b []byte) { b[firstValue(b)] = 'X' }), RecordsOnly: true},
		{Name: "text file", Data: text},
		{Name: "SQLite header", Data: sqlite},
	}, nil
}
