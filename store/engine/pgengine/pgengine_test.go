package pgengine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/boltengine"
	"github.com/handoff/handoff/store/engine/pgengine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

var bk = []byte("b")

// open is a new engine with bucket b (pgtest's).
func open(t testing.TB) *pgengine.DB { return withBucket(t, pgtest.Open(t)) }

// openLocked is a new engine with bucket b whose writes hold the
// writers' lock from their begin (not Optimistic).
func openLocked(t *testing.T) *pgengine.DB {
	return withBucket(t, openOn(t, pgtest.Schema(t), false))
}

// openOptimisticBucket is a new optimistic engine with bucket b.
func openOptimisticBucket(t *testing.T) *pgengine.DB {
	return withBucket(t, openOn(t, pgtest.Schema(t), true))
}

// openOptimistic opens one more optimistic engine on schema, as another
// server process would.
func openOptimistic(t *testing.T, schema string) *pgengine.DB { return openOn(t, schema, true) }

// openOn opens an engine on schema, closed at the test's end.
func openOn(t *testing.T, schema string, optimistic bool) *pgengine.DB {
	t.Helper()
	db, err := pgengine.Open(context.Background(), pgtest.URL(t), pgengine.Options{Schema: schema, MaxConns: 8, TempDir: t.TempDir(), Optimistic: optimistic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// withBucket creates bucket b in db and returns db.
func withBucket(t testing.TB, db *pgengine.DB) *pgengine.DB {
	t.Helper()
	if _, err := db.Update(func(tx engine.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bk)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return db
}

// seed writes the keys and values kv (key, value, key, value …) into
// bucket b in one Update.
func seed(t *testing.T, db *pgengine.DB, kv ...string) {
	t.Helper()
	if _, err := db.Update(func(tx engine.Tx) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := tx.Bucket(bk).Put([]byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func u64(v []byte) uint64 {
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// Many goroutines each read a counter and write it plus one, several
// counters per transaction: with one writer at a time none is lost, and
// each transaction reads the writes it made itself.
func TestNoLostUpdate(t *testing.T) {
	db := open(t)
	const workers, each = 16, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				_, err := db.Update(func(tx engine.Tx) error {
					b := tx.Bucket(bk)
					for _, k := range []string{"count", fmt.Sprintf("w%02d", w)} {
						n := u64(b.Get([]byte(k)))
						if err := b.Put([]byte(k), binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
							return err
						}
						if got := u64(b.Get([]byte(k))); got != n+1 {
							return fmt.Errorf("%s read back %d after writing %d", k, got, n+1)
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	err := db.View(func(tx engine.Tx) error {
		b := tx.Bucket(bk)
		if got := u64(b.Get([]byte("count"))); got != workers*each {
			t.Errorf("count = %d after %d increments; want %d (an update was lost)", got, workers*each, workers*each)
		}
		for w := range workers {
			if got := u64(b.Get([]byte(fmt.Sprintf("w%02d", w)))); got != each {
				t.Errorf("w%02d = %d; want %d", w, got, each)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A View opened while an Update is open (its writes made, its commit not
// yet asked) runs to its end without waiting for it, and sees the state
// before it; once the Update commits, a new View sees its writes.
func TestViewBesideOpenUpdate(t *testing.T) {
	db := open(t)
	if _, err := db.Update(func(tx engine.Tx) error { return tx.Bucket(bk).Put([]byte("a"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	wrote, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := db.Update(func(tx engine.Tx) error {
			b := tx.Bucket(bk)
			if err := b.Put([]byte("a"), []byte("2")); err != nil {
				return err
			}
			if err := b.Put([]byte("new"), []byte("x")); err != nil {
				return err
			}
			// Sent to the server, not only buffered: a cursor read flushes.
			if k, _ := b.Cursor().Seek([]byte("new")); string(k) != "new" {
				return fmt.Errorf("the update's own cursor saw %q; want new", k)
			}
			close(wrote)
			<-release
			return nil
		})
		done <- err
	}()
	select {
	case <-wrote:
	case err := <-done:
		t.Fatalf("the Update ended before its writes were made: %v", err)
	}
	viewed := make(chan error, 1)
	go func() {
		viewed <- db.View(func(tx engine.Tx) error {
			b := tx.Bucket(bk)
			if v := b.Get([]byte("a")); string(v) != "1" {
				return fmt.Errorf("a View beside an open Update read a = %q; want 1", v)
			}
			if k, _ := b.Cursor().Seek([]byte("new")); k != nil {
				return fmt.Errorf("a View beside an open Update saw its uncommitted key %q", k)
			}
			return nil
		})
	}()
	waited := false
	select {
	case err := <-viewed:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * time.Second):
		t.Error("a View waited 30 s for an open Update")
		waited = true
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited {
		<-viewed
	}
	_ = db.View(func(tx engine.Tx) error {
		if v := tx.Bucket(bk).Get([]byte("a")); string(v) != "2" {
			t.Errorf("a = %q after the commit; want 2", v)
		}
		return nil
	})
}

// A write waits for the one before it: while an Update is open, another
// does not start its fn until the first ends.
func TestWritersTakeTurns(t *testing.T) {
	db := open(t)
	inFirst, release := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		_, err := db.Update(func(tx engine.Tx) error {
			close(inFirst)
			<-release
			return tx.Bucket(bk).Put([]byte("first"), []byte("1"))
		})
		firstDone <- err
	}()
	<-inFirst
	secondRan := make(chan string, 1)
	secondDone := make(chan error, 1)
	go func() {
		_, err := db.Update(func(tx engine.Tx) error {
			secondRan <- string(tx.Bucket(bk).Get([]byte("first")))
			return nil
		})
		secondDone <- err
	}()
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if got := <-secondRan; got != "1" {
		t.Errorf("the second writer read first = %q; want 1: it ran beside the first instead of after it", got)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
}

func TestRollback(t *testing.T) {
	db := open(t)
	if _, err := db.Update(func(tx engine.Tx) error { return tx.Bucket(bk).Put([]byte("a"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err := db.Update(func(tx engine.Tx) error {
		b := tx.Bucket(bk)
		_ = b.Put([]byte("a"), []byte("2"))
		_ = b.Put([]byte("b"), []byte("2"))
		b.Cursor().First() // flushed to the server: the rollback must undo it there
		if _, err := tx.CreateBucketIfNotExists([]byte("other")); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Update = %v; want fn's own error as it is", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Errorf("recovered %v; want fn's panic to go on", r)
			}
		}()
		_, _ = db.Update(func(tx engine.Tx) error {
			_ = tx.Bucket(bk).Put([]byte("a"), []byte("3"))
			panic("panic in fn")
		})
	}()
	_ = db.View(func(tx engine.Tx) error {
		if v := tx.Bucket(bk).Get([]byte("a")); string(v) != "1" {
			t.Errorf("a = %q after rolled-back writes; want 1", v)
		}
		if v := tx.Bucket(bk).Get([]byte("b")); v != nil {
			t.Errorf("b = %q after a rolled-back insert; want absent", v)
		}
		if tx.Bucket([]byte("other")) != nil {
			t.Error("a bucket created by a rolled-back transaction exists")
		}
		return nil
	})
	// The pool is whole: the connections given back after the rollbacks work.
	for range 20 {
		if _, err := db.Update(func(tx engine.Tx) error { return tx.Bucket(bk).Put([]byte("c"), []byte("1")) }); err != nil {
			t.Fatal(err)
		}
	}
}

// A read that fails inside Update fails the Update, even when fn returns
// nil: nothing decided on a read that failed commits.
func TestFailedReadFailsTheUpdate(t *testing.T) {
	db := open(t)
	if _, err := db.Update(func(tx engine.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("gone"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Update(func(tx engine.Tx) error {
		if err := tx.Bucket(bk).Put([]byte("decided"), []byte("1")); err != nil {
			return err
		}
		// The table goes behind the engine's back, before this transaction reads it.
		pgtest.Exec(t, fmt.Sprintf("drop table %s.%s", db.Schema(), tableOf(t, db, "gone")))
		if v := tx.Bucket([]byte("gone")).Get([]byte("k")); v != nil {
			return fmt.Errorf("a failed read returned %q", v)
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("Update after a failed read = %v; want the read's error", err)
	}
	// fn's own error, made of the failed read, is not the cause.
	notFound := errors.New("not found")
	if _, err := db.Update(func(tx engine.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("gone too"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Update(func(tx engine.Tx) error {
		pgtest.Exec(t, fmt.Sprintf("drop table %s.%s", db.Schema(), tableOf(t, db, "gone too")))
		if tx.Bucket([]byte("gone too")).Get([]byte("k")) == nil {
			return notFound
		}
		return nil
	})
	if err == nil || errors.Is(err, notFound) || !strings.Contains(err.Error(), "gone too") {
		t.Fatalf("Update whose fn answered a failed read with its own error = %v; want the read's error", err)
	}
	// And so in a View: a record "not found" because its read failed would
	// be taken for one that does not exist.
	err = db.View(func(tx engine.Tx) error {
		if tx.Bucket([]byte("gone too")).Get([]byte("k")) == nil {
			return notFound
		}
		return nil
	})
	if err == nil || errors.Is(err, notFound) || !strings.Contains(err.Error(), "gone too") {
		t.Fatalf("View whose fn answered a failed read with its own error = %v; want the read's error", err)
	}
	_ = db.View(func(tx engine.Tx) error {
		if v := tx.Bucket(bk).Get([]byte("decided")); v != nil {
			t.Error("a write made after a failed read committed")
		}
		return nil
	})
}

// tableOf is the table of bucket name, from the catalog.
func tableOf(t *testing.T, db *pgengine.DB, name string) string {
	t.Helper()
	var tbl string
	conn, err := pgconn.Connect(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	res := conn.ExecParams(context.Background(), fmt.Sprintf("select tbl from %s.handoff_buckets where name = $1", db.Schema()),
		[][]byte{[]byte(name)}, nil, []int16{1}, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 {
		t.Fatalf("the table of %s: %v (%d rows)", name, res.Err, len(res.Rows))
	}
	tbl = string(res.Rows[0][0])
	return tbl
}

func TestValuesAndKeys(t *testing.T) {
	db := open(t)
	long := bytes.Repeat([]byte("k"), pgengine.MaxKeySize)
	_, err := db.Update(func(tx engine.Tx) error {
		b := tx.Bucket(bk)
		if err := b.Put([]byte("empty"), nil); err != nil {
			return err
		}
		if err := b.Put(nil, []byte("x")); !errors.Is(err, pgengine.ErrKeyRequired) {
			t.Errorf("Put(nil key) = %v; want ErrKeyRequired", err)
		}
		if err := b.Put(append(long, 'k'), []byte("x")); !errors.Is(err, pgengine.ErrKeyTooLarge) {
			t.Errorf("Put(a key of %d bytes) = %v; want ErrKeyTooLarge", len(long)+1, err)
		}
		big := bytes.Repeat([]byte{0, 0xff, 'v'}, 1<<20)
		if err := b.Put([]byte("big"), big); err != nil {
			return err
		}
		// The buffer keeps a copy: the caller may reuse its slice.
		reused := []byte("first")
		if err := b.Put([]byte("reused"), reused); err != nil {
			return err
		}
		copy(reused, "xxxxx")
		return b.Put(long, []byte("longest key"))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx engine.Tx) error {
		b := tx.Bucket(bk)
		if v := b.Get([]byte("empty")); v == nil || len(v) != 0 {
			t.Errorf("a key put with no value reads %v; want an empty, non-nil value", v)
		}
		if v := b.Get([]byte("big")); len(v) != 3<<20 || v[1] != 0xff {
			t.Errorf("a 3 MiB value read back as %d bytes", len(v))
		}
		if v := b.Get([]byte("reused")); string(v) != "first" {
			t.Errorf("reused = %q; want first, the bytes as put", v)
		}
		if v := b.Get(long); string(v) != "longest key" {
			t.Errorf("the longest key reads %q", v)
		}
		if err := b.Put([]byte("x"), nil); err == nil {
			t.Error("a Put in a View succeeded")
		}
		if _, err := tx.CreateBucketIfNotExists([]byte("new")); err == nil {
			t.Error("a bucket was created in a View")
		}
		return nil
	})
}

// Bytewise order, with the bytes a collation would get wrong (0x00, 0xff,
// a prefix sorting before its extensions), the same as bbolt's.
func TestOrder(t *testing.T) {
	db := open(t)
	keys := []string{"\xff", "\xff\xff", "\x00", "\x00\x00", "a", "a\x00", "a\xff", "A", "b", "\x7f", "\x80", "ab", "é", "e"}
	_, err := db.Update(func(tx engine.Tx) error {
		for _, k := range keys {
			if err := tx.Bucket(bk).Put([]byte(k), []byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string(nil), keys...)
	sortBytes(want)
	var got []string
	_ = db.View(func(tx engine.Tx) error {
		return tx.Bucket(bk).ForEach(func(k, v []byte) error {
			if !bytes.Equal(k, v) {
				t.Errorf("key %q holds %q", k, v)
			}
			got = append(got, string(k))
			return nil
		})
	})
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("order %q; want bytewise %q", got, want)
	}
}

func sortBytes(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if bytes.Compare([]byte(s[j]), []byte(s[i])) < 0 {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// The same random walk of puts, deletes and cursor moves, inside one write
// transaction and in reads, on bbolt and on PostgreSQL gives the same
// answers: across batch boundaries (hundreds of keys), off either end,
// and with the transaction writing between a cursor's moves (each write
// followed by a fresh Seek, the way the store's cursors re-position, and
// also moves straight after a write, where pgengine reads again from the
// key it stands on).
func TestCursorsMatchBbolt(t *testing.T) {
	pg := open(t)
	bdb, err := boltengine.Open(filepath.Join(t.TempDir(), "ref.db"), boltengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if _, err := bdb.Update(func(tx engine.Tx) error { _, err := tx.CreateBucketIfNotExists(bk); return err }); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	randKey := func() []byte {
		k := make([]byte, 1+r.IntN(3))
		for i := range k {
			k[i] = []byte{0, 1, 'a', 'b', 'c', 0xfe, 0xff}[r.IntN(7)]
		}
		return k
	}
	// Enough keys to cross several batches.
	seed := func(tx engine.Tx) error {
		for i := range 700 {
			if err := tx.Bucket(bk).Put(binary.BigEndian.AppendUint16([]byte{'n'}, uint16(i)), []byte{byte(i)}); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := pg.Update(seed); err != nil {
		t.Fatal(err)
	}
	if _, err := bdb.Update(seed); err != nil {
		t.Fatal(err)
	}
	type step struct {
		op  string
		arg []byte
	}
	script := func(n int, writes bool) []step {
		var s []step
		for range n {
			switch x := r.IntN(20); {
			case x < 1:
				s = append(s, step{op: "first"})
			case x < 2:
				s = append(s, step{op: "last"})
			case x < 4:
				s = append(s, step{op: "seek", arg: randKey()})
			case x < 10:
				s = append(s, step{op: "next"})
			case x < 14:
				s = append(s, step{op: "prev"})
			case x < 16:
				s = append(s, step{op: "get", arg: randKey()})
			case writes && x < 18:
				s = append(s, step{op: "put", arg: randKey()})
			case writes:
				s = append(s, step{op: "del", arg: randKey()})
			default:
				s = append(s, step{op: "next"})
			}
		}
		return s
	}
	run := func(b engine.Bucket, steps []step, bboltRef bool) []string {
		var out []string
		c := b.Cursor()
		positioned := false
		for i, s := range steps {
			var k, v []byte
			switch s.op {
			case "first":
				k, v = c.First()
				positioned = true
			case "last":
				k, v = c.Last()
				positioned = true
			case "seek":
				k, v = c.Seek(s.arg)
				positioned = true
			case "next":
				if !positioned {
					continue
				}
				k, v = c.Next()
			case "prev":
				if !positioned {
					continue
				}
				k, v = c.Prev()
			case "get":
				v = b.Get(s.arg)
				out = append(out, fmt.Sprintf("%d get %q = %q", i, s.arg, v))
				continue
			case "put", "del":
				var err error
				if s.op == "put" {
					err = b.Put(s.arg, []byte(fmt.Sprint(i)))
				} else {
					err = b.Delete(s.arg)
				}
				if err != nil {
					out = append(out, fmt.Sprintf("%d %s: %v", i, s.op, err))
				}
				// bbolt's cursor is undefined after a write to its bucket;
				// the store seeks again, and so does this walk.
				c = b.Cursor()
				positioned = false
				continue
			}
			if k == nil {
				// Off an end: bbolt's cursor then moves in ways of its own
				// (two Nexts off the end, then Prev, skip a key), which the
				// store never asks; both walks start again.
				positioned = false
			}
			out = append(out, fmt.Sprintf("%d %s %q -> %q %q", i, s.op, s.arg, k, v))
		}
		return out
	}
	for round := range 12 {
		writes := round%2 == 0
		steps := script(400, writes)
		var want, got []string
		if writes {
			if _, err := bdb.Update(func(tx engine.Tx) error { want = run(tx.Bucket(bk), steps, true); return nil }); err != nil {
				t.Fatal(err)
			}
			if _, err := pg.Update(func(tx engine.Tx) error { got = run(tx.Bucket(bk), steps, false); return nil }); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = bdb.View(func(tx engine.Tx) error { want = run(tx.Bucket(bk), steps, true); return nil })
			_ = pg.View(func(tx engine.Tx) error { got = run(tx.Bucket(bk), steps, false); return nil })
		}
		if len(want) < 100 {
			t.Fatalf("round %d compared only %d answers", round, len(want))
		}
		for i := range max(len(want), len(got)) {
			var w, g string
			if i < len(want) {
				w = want[i]
			}
			if i < len(got) {
				g = got[i]
			}
			if w != g {
				t.Fatalf("round %d (writes %v): step %s on PostgreSQL; bbolt %s", round, writes, g, w)
			}
		}
	}
}

// The edges of a cursor the store walks by: a Seek past the last key
// then Prev lands on the last; Prev off the first then Next lands on the
// first; an empty bucket answers nil everywhere; a write between two moves
// is seen by the next move, from the key the cursor stands on.
func TestCursorEdges(t *testing.T) {
	db := open(t)
	_, err := db.Update(func(tx engine.Tx) error {
		e, err := tx.CreateBucketIfNotExists([]byte("empty"))
		if err != nil {
			return err
		}
		ec := e.Cursor()
		for name, mv := range map[string]func() ([]byte, []byte){"First": ec.First, "Last": ec.Last, "Next": ec.Next, "Prev": ec.Prev} {
			if k, _ := mv(); k != nil {
				t.Errorf("%s on an empty bucket = %q", name, k)
			}
		}
		if k, _ := ec.Seek([]byte("a")); k != nil {
			t.Errorf("Seek on an empty bucket = %q", k)
		}
		b := tx.Bucket(bk)
		for _, k := range []string{"b", "d", "f"} {
			if err := b.Put([]byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		c := b.Cursor()
		if k, _ := c.Seek([]byte("z")); k != nil {
			t.Errorf("Seek(z) = %q; want nil", k)
		}
		if k, v := c.Prev(); string(k) != "f" || string(v) != "vf" {
			t.Errorf("Prev after a Seek past the end = %q %q; want f vf", k, v)
		}
		c.First()
		if k, _ := c.Prev(); k != nil {
			t.Errorf("Prev before the first = %q", k)
		}
		if k, _ := c.Next(); string(k) != "b" {
			t.Errorf("Next after running off the start = %q; want b", k)
		}
		// Writes while the cursor stands on b, its batch read ahead.
		if err := b.Put([]byte("c"), []byte("vc")); err != nil {
			return err
		}
		if err := b.Delete([]byte("d")); err != nil {
			return err
		}
		if k, _ := c.Next(); string(k) != "c" {
			t.Errorf("Next after putting c beside b = %q; want c", k)
		}
		if k, _ := c.Next(); string(k) != "f" {
			t.Errorf("Next after deleting d = %q; want f", k)
		}
		if err := b.Put([]byte("e"), []byte("ve")); err != nil {
			return err
		}
		if k, _ := c.Prev(); string(k) != "e" {
			t.Errorf("Prev from f after putting e = %q; want e", k)
		}
		if n := b.Stats().KeyN; n != 4 {
			t.Errorf("KeyN = %d; want 4 (b c e f)", n)
		}
		// A fresh cursor never moved answers nil to Next and Prev, as bbolt's.
		if k, _ := b.Cursor().Next(); k != nil {
			t.Errorf("Next of a cursor never placed = %q", k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBuckets(t *testing.T) {
	db := open(t)
	odd := []byte("idx:odd name\x00\xff with a very long tail that no identifier could hold whole, far past 63 bytes")
	_, err := db.Update(func(tx engine.Tx) error {
		o, err := tx.CreateBucketIfNotExists(odd)
		if err != nil {
			return err
		}
		if err := o.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		if err := tx.Bucket(bk).Put([]byte("old"), []byte("1")); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Deleted and made again in one transaction, as a migration does: the
	// new bucket is empty, and a read from before still has the old keys.
	before := make(chan struct{})
	after := make(chan struct{})
	viewErr := make(chan error, 1)
	go func() {
		viewErr <- db.View(func(tx engine.Tx) error {
			close(before)
			<-after
			if v := tx.Bucket(bk).Get([]byte("old")); string(v) != "1" {
				return fmt.Errorf("a read from before the delete lost the bucket's key: %q", v)
			}
			return nil
		})
	}()
	<-before
	_, err = db.Update(func(tx engine.Tx) error {
		if err := tx.DeleteBucket(bk); err != nil {
			return err
		}
		if tx.Bucket(bk) != nil {
			return errors.New("a deleted bucket is still there")
		}
		b, err := tx.CreateBucketIfNotExists(bk)
		if err != nil {
			return err
		}
		if k, _ := b.Cursor().First(); k != nil {
			return fmt.Errorf("a bucket made again holds %q", k)
		}
		if err := tx.DeleteBucket([]byte("never")); err == nil {
			return errors.New("deleting a bucket that does not exist succeeded")
		}
		return b.Put([]byte("new"), []byte("2"))
	})
	if err != nil {
		t.Fatal(err)
	}
	close(after)
	if err := <-viewErr; err != nil {
		t.Error(err)
	}
	var names []string
	_ = db.View(func(tx engine.Tx) error {
		if v := tx.Bucket(bk).Get([]byte("old")); v != nil {
			t.Errorf("a bucket made again still holds the old key: %q", v)
		}
		if v := tx.Bucket(odd).Get([]byte("k")); string(v) != "v" {
			t.Errorf("the odd bucket's key = %q", v)
		}
		return tx.ForEachBucket(func(n []byte) error { names = append(names, string(n)); return nil })
	})
	if fmt.Sprintf("%q", names) != fmt.Sprintf("%q", []string{"b", string(odd)}) {
		t.Errorf("ForEachBucket = %q", names)
	}
	// The retired table is dropped by the next open.
	db2, err := pgengine.Open(context.Background(), pgtest.URL(t), pgengine.Options{Schema: db.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if n := countTables(t, db.Schema()); n != 2+5 { // two buckets; catalog, its generation, retired, commits, version
		t.Errorf("%d tables in the schema after the reopen; want 7 (the deleted bucket's dropped)", n)
	}
}

func countTables(t *testing.T, schema string) int {
	t.Helper()
	conn, err := pgconn.Connect(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	res := conn.ExecParams(context.Background(), "select count(*) from pg_tables where schemaname = $1", [][]byte{[]byte(schema)}, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var n int
	fmt.Sscan(string(res.Rows[0][0]), &n)
	return n
}

// Several processes' opens at once on a new schema: one migrates, the
// others wait for it, and all open. A schema of a newer engine is refused.
func TestMigrations(t *testing.T) {
	schema := pgtest.Schema(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			db, err := pgengine.Open(context.Background(), pgtest.URL(t), pgengine.Options{Schema: schema})
			if err == nil {
				db.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("an open beside others: %v", err)
		}
	}
	pgtest.Exec(t, fmt.Sprintf("update %s.handoff_engine set version = version + 1", schema))
	_, err := pgengine.Open(context.Background(), pgtest.URL(t), pgengine.Options{Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer engine schema = %v; want a refusal naming it newer", err)
	}
}

// A schema made by a build of engine version 2, with a bucket, opens at
// version 3 with the bucket's keys; and a bucket that a process of that
// older build makes afterwards (its catalog rows and table, as it writes
// them, knowing nothing of the generation) is found by the newer one's
// transactions, which check the catalog they kept: the trigger moved it.
func TestMigrationFromVersion2(t *testing.T) {
	schema := pgtest.Schema(t)
	q := pgx.Identifier{schema}.Sanitize()
	pgtest.Exec(t, fmt.Sprintf("begin; set local search_path = %s; create table handoff_engine (version integer not null); insert into handoff_engine values (2); %s; %s; commit",
		q, pgengine.Migrations[0], pgengine.Migrations[1]))
	old := func(n int, name, value string) {
		pgtest.Exec(t, fmt.Sprintf(`begin; set local search_path = %s;
			create table kv%[2]d_%[3]s (key bytea primary key, value bytea not null);
			insert into handoff_buckets (name, tbl) values ('%[3]s', 'kv%[2]d_%[3]s');
			insert into kv%[2]d_%[3]s values ('k', '%[4]s');
			commit`, q, n, name, value))
	}
	old(1, "before", "fish & chips")
	db := openOn(t, schema, false)
	read := func(name string) string {
		t.Helper()
		var v string
		if err := db.View(func(tx engine.Tx) error {
			if b := tx.Bucket([]byte(name)); b != nil {
				v = string(b.Get([]byte("k")))
			} else {
				v = "no bucket"
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := read("before"); v != "fish & chips" {
		t.Errorf("the bucket of version 2 reads %q after the migration; want fish & chips", v)
	}
	if v := read("after"); v != "no bucket" {
		t.Errorf("a bucket not made yet reads %q", v)
	}
	old(2, "after", "שלום ✓")
	if v := read("after"); v != "שלום ✓" {
		t.Errorf("a bucket an older build made beside this one reads %q; want שלום ✓", v)
	}
}

// A catalog whose generation row is gone (deleted by hand) is never
// trusted: every begin reads the catalog, and a bucket made since is found.
func TestCatalogWithoutItsGeneration(t *testing.T) {
	schema := pgtest.Schema(t)
	a := withBucket(t, openOn(t, schema, false))
	b := openOn(t, schema, false)
	q := pgx.Identifier{schema}.Sanitize()
	if err := a.View(func(tx engine.Tx) error { tx.Bucket(bk).Get([]byte("k")); return nil }); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, "delete from "+q+".handoff_catalog")
	if _, err := b.Update(func(tx engine.Tx) error {
		x, err := tx.CreateBucketIfNotExists([]byte("x"))
		if err != nil {
			return err
		}
		return x.Put([]byte("k"), []byte("fish & chips"))
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var v []byte
		if err := a.View(func(tx engine.Tx) error {
			if x := tx.Bucket([]byte("x")); x != nil {
				v = bytes.Clone(x.Get([]byte("k")))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if string(v) != "fish & chips" {
			t.Errorf("a bucket made while the generation row was gone reads %q; want fish & chips", v)
		}
	}
}

// Snapshot writes a bbolt file with every bucket and key, which bbolt opens.
func TestSnapshotIsABboltFile(t *testing.T) {
	db := open(t)
	_, err := db.Update(func(tx engine.Tx) error {
		other, err := tx.CreateBucketIfNotExists([]byte("other"))
		if err != nil {
			return err
		}
		if err := other.Put([]byte("\x00"), nil); err != nil {
			return err
		}
		for i := range 25000 { // more than one bbolt transaction of the copy
			if err := tx.Bucket(bk).Put(binary.BigEndian.AppendUint32(nil, uint32(i)), []byte(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := db.Snapshot(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != n {
		t.Errorf("Snapshot said %d bytes; the file has %d", n, fi.Size())
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt's check of the snapshot: %v", err)
		}
		b := tx.Bucket(bk)
		if b == nil {
			return errors.New("the snapshot has no bucket b")
		}
		if n := b.Stats().KeyN; n != 25000 {
			t.Errorf("the snapshot's b has %d keys; want 25000", n)
		}
		if v := b.Get(binary.BigEndian.AppendUint32(nil, 24999)); string(v) != "24999" {
			t.Errorf("the last key holds %q", v)
		}
		if v := tx.Bucket([]byte("other")).Get([]byte("\x00")); v == nil {
			t.Error("the empty value is missing from the snapshot")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sp, err := db.Space(); err != nil || sp.Bytes <= 0 || sp.PageSize != 8192 {
		t.Errorf("Space = %+v, %v", sp, err)
	}
}

// PostgreSQL's disk_full is engine.ErrNoSpace, its message kept.
func TestNoSpace(t *testing.T) {
	pe := &pgconn.PgError{Code: "53100", Message: "could not extend file: No space left on device"}
	err := pgengine.Classify(fmt.Errorf("pgengine: commit: %w", pe))
	if !errors.Is(err, engine.ErrNoSpace) || !strings.Contains(err.Error(), "No space left") {
		t.Errorf("classify(disk_full) = %v; want ErrNoSpace with the server's words", err)
	}
	var got *pgconn.PgError
	if !errors.As(err, &got) || got.Code != "53100" {
		t.Error("the server's error left the chain")
	}
	if err := pgengine.Classify(&pgconn.PgError{Code: "23505"}); errors.Is(err, engine.ErrNoSpace) {
		t.Error("a unique violation classified as no space")
	}
}

// An exclusive engine refuses a second beside it; when its lock's
// connection is lost (the server ended it) and another session takes the
// lock, its writes are refused, and they come back once it takes the lock
// again.
func TestExclusive(t *testing.T) {
	schema := pgtest.Schema(t)
	ctx := context.Background()
	o := pgengine.Options{Schema: schema, Exclusive: true, HoldCheck: 200 * time.Millisecond}
	a, err := pgengine.Open(ctx, pgtest.URL(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	write := func() error {
		_, err := a.Update(func(tx engine.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bk)
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		})
		return err
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgengine.Open(ctx, pgtest.URL(t), o); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("a second exclusive Open = %v; want ErrLocked", err)
	}
	// Another session: it takes the lock once the server has ended a's
	// connection, before a's watch takes it again (else the round repeats).
	other, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	key := pgengine.ExclusiveKey(schema)
	waitFor(t, "another session takes the lock a lost", func() bool {
		if pid := a.HolderPID(); pid != 0 {
			pgtest.Exec(t, "select pg_terminate_backend($1)", int32(pid))
		}
		for range 50 {
			var got bool
			if err := other.QueryRow(ctx, "select pg_try_advisory_lock($1)", key).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got {
				return true
			}
			time.Sleep(2 * time.Millisecond) // the next look at a condition with a deadline
		}
		return false
	})
	waitFor(t, "a refuses writes while another holds its lock", func() bool {
		return errors.Is(write(), engine.ErrLocked)
	})
	if _, err := other.Exec(ctx, "select pg_advisory_unlock($1)", key); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a takes its lock again and writes", func() bool { return write() == nil })
	if a.HolderPID() == 0 {
		t.Error("a writes without holding its lock")
	}
}

// waitFor polls cond until it holds, failing t after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	start, n := time.Now(), 0
	defer func() { t.Logf("%s: %d looks, %v", what, n, time.Since(start)) }()
	for n = 1; !cond(); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond) // the next look at a condition with a deadline
	}
}

// TestCatalogKept: a transaction hands out buckets from the catalog its
// engine kept, which its begin checks; another process's buckets made,
// made again and deleted since are each found: a bucket the kept catalog
// does not name is looked for in the database, one made again is read
// and written in its new table, and one deleted for good fails the View
// that was handed it, and runs an optimistic Update again without it (a
// write under the lock from its begin checks the catalog before fn runs).
func TestCatalogKept(t *testing.T) {
	schema := pgtest.Schema(t)
	a := withBucket(t, openOn(t, schema, false))
	b := openOn(t, schema, false)
	ao := openOn(t, schema, true)
	x, k := []byte("x"), []byte("k")
	remake := func(value string, keep bool) {
		t.Helper()
		if _, err := b.Update(func(tx engine.Tx) error {
			if tx.Bucket(x) != nil {
				if err := tx.DeleteBucket(x); err != nil {
					return err
				}
			}
			if !keep {
				return nil
			}
			bx, err := tx.CreateBucketIfNotExists(x)
			if err != nil {
				return err
			}
			return bx.Put(k, []byte(value))
		}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(db *pgengine.DB) (string, error) {
		var v string
		err := db.View(func(tx engine.Tx) error {
			if bx := tx.Bucket(x); bx != nil {
				v = string(bx.Get(k))
			} else {
				v = "no bucket"
			}
			return nil
		})
		return v, err
	}
	if v, err := read(a); err != nil || v != "no bucket" {
		t.Fatalf("before x is made, a reads %q, %v", v, err)
	}
	remake("made", true)
	if v, err := read(a); err != nil || v != "made" {
		t.Fatalf("x made by another process after a kept its catalog: a reads %q, %v; want made", v, err)
	}
	remake("made again", true)
	if v, err := read(a); err != nil || v != "made again" {
		t.Fatalf("x made again by another process: a reads %q, %v; want made again", v, err)
	}
	if v, err := read(ao); err != nil || v != "made again" {
		t.Fatalf("the optimistic engine reads %q, %v; want made again", v, err)
	}
	for _, w := range []struct {
		db   *pgengine.DB
		what string
	}{{ao, "an optimistic write"}, {a, "a write under the lock"}} {
		remake("made once more", true)
		if _, err := w.db.Update(func(tx engine.Tx) error { return tx.Bucket(x).Put(k, []byte(w.what)) }); err != nil {
			t.Fatal(err)
		}
		if v, err := read(b); err != nil || v != w.what {
			t.Fatalf("%s of x made again by another process: b reads %q, %v", w.what, v, err)
		}
	}
	remake("", false)
	if v, err := read(a); err == nil || !strings.Contains(err.Error(), "deleted a bucket") {
		t.Fatalf("x deleted for good by another process: a's View read %q, %v; want it to fail, saying a bucket was deleted", v, err)
	}
	if v, err := read(a); err != nil || v != "no bucket" {
		t.Fatalf("after x was deleted, a reads %q, %v; want no bucket", v, err)
	}
	remake("made once more", true)
	if v, err := read(ao); err != nil || v != "made once more" {
		t.Fatalf("a reads %q, %v; want made once more", v, err)
	}
	remake("", false)
	var runs []bool
	if _, err := ao.Update(func(tx engine.Tx) error {
		bx := tx.Bucket(x)
		runs = append(runs, bx != nil)
		if bx != nil {
			bx.Get(k)
		}
		return tx.Bucket(bk).Put(k, []byte("after x"))
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(runs, []bool{true, false}) {
		t.Errorf("an Update handed x deleted for good by another process ran with x %v; want [true false] (run again without it)", runs)
	}
}

// TestRoundTrips counts what one write transaction asks of the server:
// its begin one, the writers' lock and the check of the catalog kept; the
// keys prefetched in several buckets are read, with the first Get's, in
// one round trip; later Gets of them in none; and the buffered writes go
// with the COMMIT in one more. A View that reads nothing asks nothing.
func TestRoundTrips(t *testing.T) {
	db := open(t)
	other := []byte("other")
	if _, err := db.Update(func(tx engine.Tx) error {
		o, err := tx.CreateBucketIfNotExists(other)
		if err != nil {
			return err
		}
		for _, k := range []string{"a", "b"} {
			if err := tx.Bucket(bk).Put([]byte(k), []byte("in b "+k)); err != nil {
				return err
			}
			if err := o.Put([]byte(k), []byte("in other "+k)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Made a bucket: the commit dropped the catalog kept, which the next
	// transaction reads (in a round trip of its own) and keeps again; the
	// one after hands it out from the catalog kept, asking nothing.
	lookTrips := func() int64 {
		t.Helper()
		before := db.Trips()
		if err := db.View(func(tx engine.Tx) error {
			if tx.Bucket(other) == nil {
				t.Error("the bucket just made is not there")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return db.Trips() - before
	}
	if n := lookTrips(); n != 2 {
		t.Errorf("a View after a bucket was made took %d round trips; want 2 (the catalog read with the begin, the end)", n)
	}
	if n := lookTrips(); n != 0 {
		t.Errorf("a View that reads nothing took %d round trips; want 0", n)
	}
	var read, afterReads int64
	before := db.Trips()
	if _, err := db.Update(func(tx engine.Tx) error {
		p := tx.(engine.Prefetcher)
		p.Prefetch(bk, [][]byte{[]byte("a"), []byte("b")})
		p.Prefetch(other, [][]byte{[]byte("a"), []byte("b"), []byte("absent")})
		b, o := tx.Bucket(bk), tx.Bucket(other)
		read = db.Trips()
		want := map[string]string{}
		got := map[string]string{}
		for _, k := range []string{"a", "b", "c"} {
			got["b/"+k] = string(b.Get([]byte(k)))
			got["other/"+k] = string(o.Get([]byte(k)))
		}
		for _, k := range []string{"a", "b"} {
			want["b/"+k], want["other/"+k] = "in b "+k, "in other "+k
		}
		want["b/c"], want["other/c"] = "", ""
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Gets after Prefetch = %v; want %v", got, want)
		}
		afterReads = db.Trips()
		if err := b.Put([]byte("c"), []byte("new")); err != nil {
			return err
		}
		return o.Delete([]byte("a"))
	}); err != nil {
		t.Fatal(err)
	}
	// The begin (the lock, the catalog's check); the prefetched keys with
	// the first Get's ("a" of b); "c" of b, which was not prefetched; "c"
	// of other, the same; then the writes with the COMMIT.
	if n := read - before; n != 1 {
		t.Errorf("the begin took %d round trips; want 1", n)
	}
	if n := afterReads - read; n != 3 {
		t.Errorf("six Gets after prefetching two buckets took %d round trips; want 3 (the prefetch with the first, one for each key not prefetched)", n)
	}
	if n := db.Trips() - afterReads; n != 1 {
		t.Errorf("the writes and the COMMIT took %d round trips; want 1", n)
	}
	if err := db.View(func(tx engine.Tx) error {
		if v := tx.Bucket(bk).Get([]byte("c")); string(v) != "new" {
			t.Errorf("after the commit b/c = %q; want new", v)
		}
		if v := tx.Bucket(other).Get([]byte("a")); v != nil {
			t.Errorf("after the commit other/a = %q; want deleted", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Prefetch reads many keys in one go for the Gets that follow; a Get
// answers what the transaction wrote since (Put, Delete) over what was
// prefetched, and a key prefetched as absent reads absent until written.
func TestPrefetch(t *testing.T) {
	// The rows are changed behind the transaction past the lock: what a
	// locked transaction reads is what it read (an optimistic one runs
	// again: TestOptimisticRerun).
	db := openLocked(t)
	seed(t, db, "a", "old a", "b", "old b", "c", "old c")
	if _, err := db.Update(func(tx engine.Tx) error {
		b := tx.Bucket(bk)
		if err := b.Put([]byte("c"), []byte("new c")); err != nil { // written before the prefetch
			return err
		}
		p, ok := tx.(engine.Prefetcher)
		if !ok {
			t.Fatal("a PostgreSQL transaction is no engine.Prefetcher")
		}
		p.Prefetch(bk, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("absent"), []byte("a"), nil})
		p.Prefetch([]byte("no such bucket"), [][]byte{[]byte("a")})
		// The first Get reads what was prefetched; then the rows change
		// behind the transaction: a prefetched key answers what was read
		// (no other writer commits under the writers' lock; this one is
		// the test's, past the lock).
		if got := string(b.Get([]byte("b"))); got != "old b" {
			t.Errorf("the first Get after Prefetch = %q; want old b", got)
		}
		pgtest.Exec(t, fmt.Sprintf("delete from %s.%s", db.Schema(), tableOf(t, db, string(bk))))
		for k, want := range map[string]string{"a": "old a", "b": "old b", "c": "new c", "absent": ""} {
			if got := string(b.Get([]byte(k))); got != want {
				t.Errorf("Get(%s) after Prefetch = %q; want %q", k, got, want)
			}
		}
		if err := b.Put([]byte("absent"), []byte("now")); err != nil {
			return err
		}
		if err := b.Delete([]byte("a")); err != nil {
			return err
		}
		if got := b.Get([]byte("absent")); string(got) != "now" {
			t.Errorf("Get of a key prefetched absent, then Put = %q; want now", got)
		}
		if got := b.Get([]byte("a")); got != nil {
			t.Errorf("Get of a prefetched key, then Deleted = %q; want nil", got)
		}
		if err := pgengine.Flush(tx); err != nil {
			return err
		}
		if got := b.Get([]byte("absent")); string(got) != "now" {
			t.Errorf("Get of a written key after its flush = %q; want now", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestCommitBatchRefused: a buffered write the server refuses in the
// commit's batch (its table dropped behind the transaction) skips the
// COMMIT: Update returns the refusal, nothing of the transaction is
// kept, and the connection goes back to the pool usable.
func TestCommitBatchRefused(t *testing.T) {
	db := open(t)
	gone := []byte("gone")
	if _, err := db.Update(func(tx engine.Tx) error {
		_, err := tx.CreateBucketIfNotExists(gone)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tbl := tableOf(t, db, string(gone))
	_, err := db.Update(func(tx engine.Tx) error {
		if err := tx.Bucket(bk).Put([]byte("kept?"), []byte("no")); err != nil {
			return err
		}
		if err := tx.Bucket(gone).Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		pgtest.Exec(t, fmt.Sprintf("drop table %s.%s", db.Schema(), tbl))
		return nil
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42P01" {
		t.Fatalf("Update whose buffered write's table was dropped = %v; want the server's undefined_table (42P01)", err)
	}
	for range 3 { // more than the connections the pool has idle: each must be clean
		if err := db.View(func(tx engine.Tx) error {
			if v := tx.Bucket(bk).Get([]byte("kept?")); v != nil {
				t.Errorf("a write of the refused transaction was kept: %q", v)
			}
			return nil
		}); err != nil {
			t.Fatalf("a read after the refused commit: %v", err)
		}
		if _, err := db.Update(func(tx engine.Tx) error { return tx.Bucket(bk).Put([]byte("after"), []byte("ok")) }); err != nil {
			t.Fatalf("a write after the refused commit: %v", err)
		}
	}
}

// Every read is by key, so no plan may scan a table whole: a statement's
// generic plan, which a cached statement keeps for as long as its
// connection lives, was once made while the dedup index was small and
// then scanned all of it on every round (3–6 ms at 80,000 keys).
func TestNoSequentialScans(t *testing.T) {
	db := open(t)
	// 800 keys, analyzed: the size at which a generic plan of the
	// prefetch's "key = any($1)" costs a whole scan below the index's.
	if _, err := db.Update(func(tx engine.Tx) error {
		for i := range 800 {
			if err := tx.Bucket(bk).Put(fmt.Appendf(nil, "demo:%032x", i), []byte("v")); err != nil {
				return err
			}
		}
		return tx.Bucket(bk).Put([]byte("a"), []byte("v a"))
	}); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL 15's count for the transaction may include earlier ones'
	// of its connection not yet reported: what counts is the increase.
	var base int64
	scans := func(tx engine.Tx) int64 {
		t.Helper()
		n, err := pgengine.SeqScans(tx, bk)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	check := func(tx engine.Tx, what string) {
		t.Helper()
		if n := scans(tx) - base; n != 0 {
			t.Errorf("%s: %d sequential scans of the bucket's table; want 0", what, n)
		}
	}
	generic := func(tx engine.Tx) error {
		if err := pgengine.ExecTx(tx, "analyze "+pgengine.TableOf(tx, bk)); err != nil {
			return err
		}
		if err := pgengine.ExecTx(tx, "set local plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		base = scans(tx)
		return nil
	}
	if _, err := db.Update(func(tx engine.Tx) error {
		if err := generic(tx); err != nil {
			return err
		}
		tx.(engine.Prefetcher).Prefetch(bk, [][]byte{[]byte("a"), []byte("b"), []byte("absent")})
		if got := string(tx.Bucket(bk).Get([]byte("a"))); got != "v a" {
			t.Errorf("Get(a) after Prefetch = %q; want %q", got, "v a")
		}
		check(tx, "Prefetch")
		if got := tx.Bucket(bk).Get([]byte("zz")); got != nil {
			t.Errorf("Get(zz) = %q; want nil", got)
		}
		check(tx, "Get")
		c := tx.Bucket(bk).Cursor()
		if k, _ := c.Seek([]byte("demo:")); string(k) != fmt.Sprintf("demo:%032x", 0) {
			t.Errorf("Seek(demo:) = %q; want the first demo key", k)
		}
		if k, _ := c.First(); string(k) != "a" {
			t.Errorf("First = %q; want a", k)
		}
		check(tx, "cursor")
		return tx.Bucket(bk).Put([]byte("d"), []byte("v d"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx engine.Tx) error {
		if err := generic(tx); err != nil {
			return err
		}
		tx.(engine.Prefetcher).Prefetch(bk, [][]byte{[]byte("a"), []byte("d")})
		if got := string(tx.Bucket(bk).Get([]byte("d"))); got != "v d" {
			t.Errorf("View Get(d) = %q; want %q", got, "v d")
		}
		check(tx, "View")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Optimistic writers of two engines (two processes) move the same keys at
// once: each read-modify-write of a shared counter and each Add of
// another is kept, none twice; the writes whose reads another changed ran
// again, and an absent key two of them read, then wrote, is written by
// one and seen by the other (a dedup's check-then-write).
func TestOptimisticWritersSideBySide(t *testing.T) {
	a := openOptimisticBucket(t)
	b := openOptimistic(t, a.Schema())
	const workers, each = 8, 25
	var wg sync.WaitGroup
	var firsts sync.Map // a dedup key → how many transactions found it absent and wrote it
	for w := range workers {
		db := a
		if w%2 == 1 {
			db = b
		}
		wg.Go(func() {
			for i := range each {
				dedup := fmt.Sprintf("dedup-%02d", i) // every worker tries each one
				var created bool
				_, err := db.Update(func(tx engine.Tx) error {
					created = false
					bt := tx.Bucket(bk)
					n := u64(bt.Get([]byte("read")))
					if err := bt.Put([]byte("read"), binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
						return err
					}
					if err := bt.(engine.Adder).Add([]byte("added"), 2); err != nil {
						return err
					}
					if err := bt.(engine.Adder).Add([]byte("added"), -1); err != nil {
						return err
					}
					if bt.Get([]byte(dedup)) == nil {
						created = true
						return bt.Put([]byte(dedup), []byte(fmt.Sprint(w)))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if created {
					v, _ := firsts.LoadOrStore(dedup, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := a.View(func(tx engine.Tx) error {
		bt := tx.Bucket(bk)
		if got := u64(bt.Get([]byte("read"))); got != workers*each {
			t.Errorf("read = %d after %d read-modify-writes; want %d (one was lost)", got, workers*each, workers*each)
		}
		if got := u64(bt.Get([]byte("added"))); got != workers*each {
			t.Errorf("added = %d after %d Adds of +2 and -1; want %d", got, workers*each, workers*each)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range each {
		dedup := fmt.Sprintf("dedup-%02d", i)
		v, ok := firsts.Load(dedup)
		if !ok || v.(*atomic.Int64).Load() != 1 {
			n := int64(0)
			if ok {
				n = v.(*atomic.Int64).Load()
			}
			t.Errorf("%s was found absent and written by %d transactions; want 1", dedup, n)
		}
	}
	if a.Reruns()+b.Reruns() == 0 {
		t.Error("no transaction ran again, though every one moved the same key: the reads were not checked")
	}
	t.Logf("%d transactions, %d ran again", workers*each, a.Reruns()+b.Reruns())
}

// A key changed behind an optimistic transaction after it read it: the
// commit's check finds it, nothing of that run is written, and fn runs
// again, under the lock, on what is there now.
func TestOptimisticRerun(t *testing.T) {
	db := openOptimisticBucket(t)
	seed(t, db, "k", "old")
	var runs []string
	if _, err := db.Update(func(tx engine.Tx) error {
		bt := tx.Bucket(bk)
		got := string(bt.Get([]byte("k")))
		runs = append(runs, got)
		if len(runs) == 1 {
			pgtest.Exec(t, fmt.Sprintf("update %s.%s set value = 'changed' where key = 'k'", db.Schema(), tableOf(t, db, string(bk))))
		}
		return bt.Put([]byte("copy"), []byte(got))
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"old", "changed"}; !reflect.DeepEqual(runs, want) {
		t.Errorf("fn read %q in its runs; want %q", runs, want)
	}
	if err := db.View(func(tx engine.Tx) error {
		if got := string(tx.Bucket(bk).Get([]byte("copy"))); got != "changed" {
			t.Errorf("copy = %q; want the value of the run that committed, changed", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if db.Reruns() != 1 {
		t.Errorf("Reruns = %d; want 1", db.Reruns())
	}
}

// Add below zero: refused by Add itself once the count is known (read,
// written, or under the lock), else by the commit's check, after which
// fn runs again and its Add refuses it; either way nothing is written.
// A count of another length reads as zero, as the store's do.
func TestAddBelowZero(t *testing.T) {
	db := openOptimisticBucket(t)
	seed(t, db, "one", string(binary.BigEndian.AppendUint64(nil, 1)), "odd", "xyz")
	for _, c := range []struct {
		key   string
		delta int64
		read  bool
	}{{"one", -2, false}, {"one", -2, true}, {"absent", -1, false}, {"odd", -1, false}} {
		var runs int
		_, err := db.Update(func(tx engine.Tx) error {
			runs++
			bt := tx.Bucket(bk)
			if c.read {
				bt.Get([]byte(c.key))
			}
			if err := bt.Put([]byte("side"), []byte("effect")); err != nil {
				return err
			}
			return bt.(engine.Adder).Add([]byte(c.key), c.delta)
		})
		if !errors.Is(err, engine.ErrBelowZero) {
			t.Errorf("Add(%s, %d), read first %v: %v; want ErrBelowZero", c.key, c.delta, c.read, err)
		}
		t.Logf("Add(%s, %d), read first %v: %d runs", c.key, c.delta, c.read, runs)
	}
	if err := db.View(func(tx engine.Tx) error {
		bt := tx.Bucket(bk)
		if v := bt.Get([]byte("side")); v != nil {
			t.Errorf("side = %q; want nothing written by a refused Add's transaction", v)
		}
		if got := u64(bt.Get([]byte("one"))); got != 1 {
			t.Errorf("one = %d; want 1", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Update(func(tx engine.Tx) error { return tx.Bucket(bk).(engine.Adder).Add([]byte("odd"), 5) }); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx engine.Tx) error {
		if got := u64(tx.Bucket(bk).Get([]byte("odd"))); got != 5 {
			t.Errorf("odd = %d after adding 5 to a value of another length; want 5", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A key read ahead but not asked for before an optimistic transaction
// takes the lock is not checked, so it must not answer from what was read
// ahead afterwards: a Get under the lock reads what is there now. (A
// count read ahead, changed by another process, then added to under the
// lock, lost that process's move.)
func TestOptimisticReadAheadForgottenAtLock(t *testing.T) {
	db := openOptimisticBucket(t)
	seed(t, db, "asked", "old", "ahead", "old")
	var runs int
	if _, err := db.Update(func(tx engine.Tx) error {
		runs++
		bt := tx.Bucket(bk)
		tx.(engine.Prefetcher).Prefetch(bk, [][]byte{[]byte("asked"), []byte("ahead")})
		bt.Get([]byte("asked")) // reads both
		if runs == 1 {
			pgtest.Exec(t, fmt.Sprintf("update %s.%s set value = 'changed' where key = 'ahead'", db.Schema(), tableOf(t, db, string(bk))))
		}
		bt.Cursor().First() // takes the lock
		if got := string(bt.Get([]byte("ahead"))); got != "changed" {
			t.Errorf("run %d: ahead under the lock = %q; want changed", runs, got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("fn ran %d times; want 1 (the changed key was never asked for before the lock)", runs)
	}
}

// A commit deletes, at most once a minute and off the writers' lock, the
// marks of handoff_commits older than ten minutes; the newer stay, its own
// among them.
func TestMarksPruned(t *testing.T) {
	db := pgtest.Open(t)
	put := func() {
		t.Helper()
		if _, err := db.Update(func(tx engine.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	put()
	marks := func(where string) int {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(), fmt.Sprintf("select count(*) from %s.handoff_commits where %s", db.Schema(), where)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	pgtest.Exec(t, fmt.Sprintf(`insert into %s.handoff_commits (mark, at) values ('\x01', now() - interval '11 minutes'), ('\x02', now() - interval '9 minutes')`, db.Schema()))
	db.PruneDue()
	put()
	waitFor(t, "the old mark deleted", func() bool { return marks("at < now() - interval '10 minutes'") == 0 })
	if n := marks("at >= now() - interval '10 minutes'"); n != 3 {
		t.Errorf("%d newer marks left; want 3 (the two commits' and the one of 9 minutes)", n)
	}
}
