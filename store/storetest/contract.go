package storetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/handoff/handoff/store/engine"
)

// Contract checks the guarantees every engine gives the store
// (store/engine's package docs): rollback on error, serializable writes,
// read snapshots, ordered keys and cursors, buckets. open returns a new,
// empty engine for one subtest, its cleanup registered on t. Each engine's
// own test runs it; the store's suite then runs on top.
func Contract(t *testing.T, open func(t *testing.T) engine.Engine) {
	name := []byte("b")
	setup := func(t *testing.T) engine.Engine {
		t.Helper()
		e := open(t)
		if _, err := e.Update(func(tx engine.Tx) error {
			_, err := tx.CreateBucketIfNotExists(name)
			return err
		}); err != nil {
			t.Fatalf("create a bucket: %v", err)
		}
		return e
	}
	put := func(t *testing.T, e engine.Engine, kv ...string) {
		t.Helper()
		if _, err := e.Update(func(tx engine.Tx) error {
			for i := 0; i < len(kv); i += 2 {
				if err := tx.Bucket(name).Put([]byte(kv[i]), []byte(kv[i+1])); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("put %q: %v", kv, err)
		}
	}
	get := func(t *testing.T, e engine.Engine, k string) (v []byte) {
		t.Helper()
		if err := e.View(func(tx engine.Tx) error {
			v = bytes.Clone(tx.Bucket(name).Get([]byte(k)))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}

	t.Run("an error rolls every write back", func(t *testing.T) {
		e := setup(t)
		put(t, e, "a", "1")
		boom := errors.New("boom")
		_, err := e.Update(func(tx engine.Tx) error {
			if err := tx.Bucket(name).Put([]byte("a"), []byte("2")); err != nil {
				return err
			}
			if err := tx.Bucket(name).Put([]byte("b"), []byte("2")); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update = %v; want fn's own error", err)
		}
		if got := get(t, e, "a"); string(got) != "1" {
			t.Errorf("a = %q after a rolled-back write; want 1", got)
		}
		if got := get(t, e, "b"); got != nil {
			t.Errorf("b = %q after a rolled-back insert; want absent", got)
		}
	})

	t.Run("writes are serializable", func(t *testing.T) {
		e := setup(t)
		const n = 50
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				_, err := e.Update(func(tx engine.Tx) error {
					b := tx.Bucket(name)
					var c uint64
					if v := b.Get([]byte("count")); v != nil {
						c = binary.BigEndian.Uint64(v)
					}
					return b.Put([]byte("count"), binary.BigEndian.AppendUint64(nil, c+1))
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := binary.BigEndian.Uint64(get(t, e, "count")); got != n {
			t.Errorf("%d read-then-write increments left %d; want %d (a write was lost)", n, got, n)
		}
	})

	// The read below waits for a write: the one place a test may, since
	// a write may itself wait for the reads open (bbolt's remap, which the
	// engine's own test rules out by mapping ahead).
	t.Run("a read sees one snapshot", func(t *testing.T) {
		e := setup(t)
		put(t, e, "a", "1")
		inside, wrote := make(chan struct{}), make(chan error, 1)
		err := e.View(func(tx engine.Tx) error {
			go func() {
				<-inside
				_, err := e.Update(func(w engine.Tx) error { return w.Bucket(name).Put([]byte("a"), []byte("2")) })
				wrote <- err
			}()
			// The snapshot is the one of the first read at the latest
			// (PostgreSQL's begins with it): a key other than a.
			tx.Bucket(name).Get([]byte("another"))
			close(inside)
			if err := <-wrote; err != nil {
				return fmt.Errorf("a write beside an open read: %w", err)
			}
			if got := tx.Bucket(name).Get([]byte("a")); string(got) != "1" {
				t.Errorf("a read saw %q after a write committed beside it; want its snapshot's 1", got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, e, "a"); string(got) != "2" {
			t.Errorf("a = %q after the commit; want 2", got)
		}
	})

	t.Run("keys are ordered bytewise", func(t *testing.T) {
		e := setup(t)
		put(t, e, "b", "", "a\x00", "", "a", "", "\xff", "", "ab", "", "c", "")
		want := []string{"a", "a\x00", "ab", "b", "c", "\xff"}
		err := e.View(func(tx engine.Tx) error {
			b := tx.Bucket(name)
			var fwd, back, each []string
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				fwd = append(fwd, string(k))
			}
			for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
				back = append([]string{string(k)}, back...)
			}
			_ = b.ForEach(func(k, _ []byte) error { each = append(each, string(k)); return nil })
			for what, got := range map[string][]string{"First/Next": fwd, "Last/Prev": back, "ForEach": each} {
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s visits %q; want %q", what, got, want)
				}
			}
			if k, _ := c.Seek([]byte("aa")); string(k) != "ab" {
				t.Errorf("Seek(aa) = %q; want the first key after it, ab", k)
			}
			if k, _ := c.Seek([]byte("b")); string(k) != "b" {
				t.Errorf("Seek(b) = %q; want b itself", k)
			}
			if k, _ := c.Seek([]byte("\xff\x00")); k != nil {
				t.Errorf("Seek past the last key = %q; want nil", k)
			}
			if n := b.Stats().KeyN; n != len(want) {
				t.Errorf("Stats().KeyN = %d; want %d", n, len(want))
			}
			if v := b.Get([]byte("b")); v == nil {
				t.Error("a key put with an empty value reads as absent once committed")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("buckets", func(t *testing.T) {
		e := setup(t)
		put(t, e, "a", "1")
		_, err := e.Update(func(tx engine.Tx) error {
			if _, err := tx.CreateBucketIfNotExists([]byte("a-other")); err != nil {
				return err
			}
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create an existing bucket again: %w", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		_ = e.View(func(tx engine.Tx) error {
			return tx.ForEachBucket(func(n []byte) error { names = append(names, string(n)); return nil })
		})
		if fmt.Sprint(names) != "[a-other b]" {
			t.Errorf("ForEachBucket = %q; want [a-other b]", names)
		}
		if got := get(t, e, "a"); string(got) != "1" {
			t.Errorf("creating an existing bucket lost its keys: a = %q", got)
		}
		if _, err := e.Update(func(tx engine.Tx) error { return tx.DeleteBucket(name) }); err != nil {
			t.Fatal(err)
		}
		_ = e.View(func(tx engine.Tx) error {
			if tx.Bucket(name) != nil {
				t.Error("a deleted bucket is still there")
			}
			if tx.Bucket([]byte("never")) != nil {
				t.Error("a bucket never created is not nil")
			}
			return nil
		})
	})

	t.Run("a snapshot is written", func(t *testing.T) {
		e := setup(t)
		put(t, e, "a", "1")
		var buf bytes.Buffer
		n, err := e.Snapshot(&buf)
		if err != nil || n != int64(buf.Len()) || n == 0 {
			t.Errorf("Snapshot = %d bytes, %v; wrote %d", n, err, buf.Len())
		}
		if sp, err := e.Space(); err != nil || sp.Bytes <= 0 {
			t.Errorf("Space = %+v, %v; want a size", sp, err)
		}
	})
}
