package pgengine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
	"github.com/handoff/handoff/store/engine/pgengine/pgserver"
)

// replicated starts a primary and a streaming standby of it, each a
// private cluster of its own (not pgtest's shared server: these tests
// stop one), stopped at t's cleanup; and the URL naming both, primary
// first, with extra key=value settings.
func replicated(t *testing.T) (primary, standby *pgserver.Server, urlOf func(extra string) string) {
	t.Helper()
	ctx := context.Background()
	primary, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Stop() }) // a second Stop is harmless
	standby, err = primary.StartStandby(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop() })
	// Two unix socket folders, both port 5432: pgconn tries the hosts in
	// order (a host beginning with / is a socket folder).
	return primary, standby, func(extra string) string {
		return fmt.Sprintf("host=%s,%s port=5432,5432 user=handoff dbname=postgres sslmode=disable connect_timeout=5 %s",
			primary.Dir, standby.Dir, extra)
	}
}

var kept = []byte("kept")

func putKept(db *pgengine.DB, key string) error {
	_, err := db.Update(func(tx engine.Tx) error {
		b, err := tx.CreateBucketIfNotExists(kept)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), []byte("reçu ✓ "+key))
	})
	return err
}

// keptKeys is every key of the kept bucket.
func keptKeys(t *testing.T, db *pgengine.DB) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	if err := db.View(func(tx engine.Tx) error {
		b := tx.Bucket(kept)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if string(v) != "reçu ✓ "+string(k) {
				return fmt.Errorf("key %q holds %q", k, v)
			}
			got[string(k)] = true
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// A failover under load, as serve opens the database (Shared): writers
// keep writing while the primary stops and its standby is promoted. No
// write succeeds while there is no primary (the standby, read only, is
// refused by ValidateConnect); writes succeed again on the promoted
// standby with the same engine, never reopened; every write that
// succeeded, before or after, is there; and the hold, the lead and
// Listen are each taken again on the new primary.
func TestFailover(t *testing.T) {
	ctx := context.Background()
	primary, standby, urlOf := replicated(t)
	db, err := pgengine.Open(ctx, urlOf(""), pgengine.Options{Shared: true, HoldCheck: 100 * time.Millisecond, Notify: [][]byte{kept}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.HolderPID() == 0 {
		t.Fatal("no hold after Open")
	}
	// The lead and Listen, as serve runs them, each on a connection of
	// its own.
	bg, cancel := context.WithCancel(ctx)
	var leads, woken atomic.Int32
	var bgDone sync.WaitGroup
	defer func() { cancel(); bgDone.Wait() }()
	bgDone.Go(func() {
		db.Lead(bg, 100*time.Millisecond, func(lctx context.Context) { leads.Add(1); <-lctx.Done() })
	})
	bgDone.Go(func() {
		if err := db.Listen(bg, func() { woken.Add(1) }); err != nil {
			t.Errorf("Listen: %v", err)
		}
	})
	waitFor(t, "the lead taken", func() bool { return leads.Load() == 1 })

	// phase: 0 the primary up, 1 stopped and the standby not yet
	// promoted, 2 promoting or promoted.
	var phase atomic.Int32
	var mu sync.Mutex
	var succeeded []string
	var falseSuccess []string
	var downErrs atomic.Int32
	var lastErr atomic.Pointer[error]
	var after atomic.Int32 // writers that succeeded in phase 2
	const writers = 3
	stop := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			doneAfter := false
			for i := 0; !doneAfter && time.Now().Before(stop); i++ {
				key := fmt.Sprintf("w%d-%06d", w, i)
				p0 := phase.Load()
				err := putKept(db, key)
				p1 := phase.Load()
				if err != nil {
					if p0 == 1 && p1 == 1 {
						downErrs.Add(1)
						lastErr.Store(&err)
					}
					// A sender's retry interval, not a wait for a condition:
					// a refused write answers at once (the hold is lost), and
					// retrying without a pause would only burn a core.
					time.Sleep(2 * time.Millisecond)
					continue
				}
				mu.Lock()
				succeeded = append(succeeded, key)
				if p0 == 1 && p1 == 1 {
					falseSuccess = append(falseSuccess, key)
				}
				mu.Unlock()
				if p0 == 2 {
					after.Add(1)
					doneAfter = true
				}
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(succeeded) }
	waitFor(t, "writes on the primary", func() bool { return count() >= 30 })
	before := count()
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	phase.Store(1)
	waitFor(t, "writes refused with no primary", func() bool { return downErrs.Load() >= 10 })
	if e := lastErr.Load(); e != nil {
		t.Logf("a write with no primary: %v", *e)
	}
	phase.Store(2)
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every writer writes on the promoted standby", func() bool { return after.Load() == writers })
	wg.Wait()
	if len(falseSuccess) > 0 {
		t.Errorf("%d writes succeeded with no primary: %v", len(falseSuccess), falseSuccess)
	}
	got := keptKeys(t, db)
	missing := 0
	for _, k := range succeeded {
		if !got[k] {
			missing++
			t.Errorf("write %s succeeded and is not on the new primary", k)
		}
	}
	t.Logf("%d writes succeeded (%d before the primary stopped), %d refused while down, %d missing", len(succeeded), before, downErrs.Load(), missing)

	// The hold is taken again, on the new primary.
	waitFor(t, "the hold taken on the new primary", func() bool { return db.HolderPID() != 0 })
	c, err := pgx.Connect(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "select count(*) from pg_locks where locktype = 'advisory' and granted and pid = $1",
		int32(db.HolderPID())).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("the hold's session (pid %d) holds no advisory lock on the new primary", db.HolderPID())
	}
	// The lead is taken again there (LeadPID asks the new primary's
	// pg_locks), and run again.
	waitFor(t, "the lead taken on the new primary", func() bool {
		pid, err := db.LeadPID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pid != 0 && leads.Load() >= 2
	})
	// Listen listens again there: once its session is on the new
	// primary, a commit wakes it.
	waitFor(t, "Listen on the new primary", func() bool {
		var n int
		if err := c.QueryRow(ctx, "select count(*) from pg_stat_activity where query like 'listen %'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	w0 := woken.Load()
	if err := putKept(db, "heard"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a commit on the new primary wakes Listen", func() bool { return woken.Load() > w0 })
}

// A URL that lets the pool reach a standby (target_session_attrs=any,
// the primary first, as a URL naming a cluster's nodes may be): once the
// primary stops, a new connection lands on the standby, and a write
// there is refused as engine.ErrReadOnlyNode, never a success, and its
// connection dropped, not given to the next write. Reads go on there.
// Once the standby is promoted, the same engine writes again. An engine
// on the default URL (read-write asked) meanwhile never reaches the
// standby: its writes and reads fail to connect, then succeed on the
// promoted standby.
func TestReadOnlyNodeRefused(t *testing.T) {
	ctx := context.Background()
	primary, standby, urlOf := replicated(t)
	db, err := pgengine.Open(ctx, urlOf("target_session_attrs=any"), pgengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := putKept(db, "before"); err != nil {
		t.Fatal(err)
	}
	// Beside it, an engine on the default URL (both hosts, no
	// target_session_attrs, no hold): its pool never connects to the
	// standby at all.
	strict, err := pgengine.Open(ctx, urlOf(""), pgengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	// And one that holds the schema (Shared, as serve): its hold, an
	// advisory lock the other processes look for on the primary, must
	// never be taken on a standby, whatever the URL allows.
	held, err := pgengine.Open(ctx, urlOf("target_session_attrs=any"), pgengine.Options{Shared: true, HoldCheck: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	tries := held.HoldTries()
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	// Once the watch has found the hold lost and tried to take it again
	// (HolderPID waits for a take under way), it is either taken or not.
	waitFor(t, "the hold tried again thrice, or taken", func() bool {
		n := held.HoldTries()
		return n >= tries+3 || n > tries && held.HolderPID() != 0
	})
	if pid := held.HolderPID(); pid != 0 {
		t.Errorf("the hold was taken (pid %d) with only a standby up; want it taken only on a primary", pid)
	}
	for i := range 3 {
		err := putKept(strict, fmt.Sprintf("strict-down-%d", i))
		if err == nil {
			t.Fatal("a write succeeded with no primary")
		}
		t.Logf("default URL, no primary: %v", err)
	}
	if err := strict.View(func(engine.Tx) error { return nil }); err == nil {
		t.Error("a read on the default URL succeeded on the standby; want it refused by ValidateConnect")
	}
	// The pool's connections to the stopped primary fail first; then a
	// new one reaches the standby.
	i := 0
	waitFor(t, "a write refused as ErrReadOnlyNode", func() bool {
		i++
		err := putKept(db, fmt.Sprintf("down-%d", i))
		if err == nil {
			t.Fatalf("write down-%d succeeded with no primary", i)
		}
		if i <= 3 {
			t.Logf("write down-%d: %v (%d connections)", i, err, db.PoolConns())
		}
		return errors.Is(err, engine.ErrReadOnlyNode)
	})
	// The connection is dropped (the pool closes a dropped one on a
	// goroutine of its own, so it leaves the count soon after): a
	// connection given back would stay in the pool, idle, for good.
	dropped := func() bool { return db.PoolConns() == 0 }
	waitFor(t, "the standby's connection dropped", dropped)
	// Each write is refused again, on a new connection each time.
	for range 3 {
		if err := putKept(db, "again"); !errors.Is(err, engine.ErrReadOnlyNode) {
			t.Fatalf("a write on the standby: %v; want ErrReadOnlyNode", err)
		}
		waitFor(t, "the standby's connection dropped", dropped)
	}
	// Reads are served by the standby, with what the primary committed.
	if got := keptKeys(t, db); !got["before"] || len(got) != 1 {
		t.Errorf("read on the standby: %v; want only the write from before", got)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := putKept(db, "after"); err != nil {
		t.Fatalf("a write on the promoted standby: %v", err)
	}
	if got := keptKeys(t, db); !got["before"] || !got["after"] || len(got) != 2 {
		t.Errorf("after the promotion: %v; want before and after", got)
	}
	if err := putKept(strict, "strict-after"); err != nil {
		t.Errorf("a write on the default URL after the promotion: %v", err)
	}
	waitFor(t, "the hold taken on the promoted standby", func() bool { return held.HolderPID() != 0 })
	// Its pool's connection to the stopped primary fails its first write.
	waitFor(t, "a write of the holding engine after the promotion", func() bool { return putKept(held, "held-after") == nil })
}
