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
		tx.(engine.Notifier).Notify("kept " + key)
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
	db, err := pgengine.Open(ctx, urlOf(""), pgengine.Options{Shared: true, HoldCheck: 100 * time.Millisecond})
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
		if err := db.Listen(bg, func(string) { woken.Add(1) }); err != nil {
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

// A crash of PostgreSQL (an immediate shutdown: WAL not yet written is
// lost) under writers: every write whose Update returned nil is there
// after the restart. A COMMIT ends the writers' lock before its WAL
// reaches the disk, and Update waits for that flush after it; without
// the wait, the commits acknowledged since the WAL was last written are
// lost. The WAL writer's own flushes are put off (wal_writer_delay), so
// that only the engine's flush can have made a commit durable; and so it
// is when the server's own synchronous_commit is off.
func TestCrashKeepsEveryCommit(t *testing.T) {
	for _, def := range []string{"on", "off"} {
		t.Run("synchronous_commit="+def, func(t *testing.T) { crashKeepsEveryCommit(t, def) })
	}
}

func crashKeepsEveryCommit(t *testing.T, syncDefault string) {
	ctx := context.Background()
	srv, err := pgserver.Start(ctx, pgserver.Options{Settings: []string{"wal_writer_delay=10000ms", "wal_writer_flush_after=0", "synchronous_commit=" + syncDefault}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	db, err := pgengine.Open(ctx, srv.URL+" connect_timeout=5", pgengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	var acked []string
	var crashed atomic.Bool
	var afterCrash, failed atomic.Int32
	var lastErr atomic.Pointer[error]
	const writers = 4
	stop := time.Now().Add(60 * time.Second)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				was := crashed.Load()
				key := fmt.Sprintf("w%d-%06d", w, i)
				if err := putKept(db, key); err != nil {
					failed.Add(1)
					lastErr.Store(&err)
					// A sender's retry interval while the server restarts, not a
					// wait for a condition.
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
				if was {
					afterCrash.Add(1)
					return
				}
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor(t, "writes before the crash", func() bool { return count() >= 200 })
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	crashed.Store(true)
	waitFor(t, "every writer writes after the crash", func() bool { return afterCrash.Load() == writers })
	wg.Wait()
	got := keptKeys(t, db)
	lost := 0
	for _, k := range acked {
		if !got[k] {
			lost++
			if lost <= 5 {
				t.Errorf("write %s was acknowledged and is gone after the crash", k)
			}
		}
	}
	t.Logf("%d writes acknowledged, %d lost in the crash, %d failed", len(acked), lost, failed.Load())
	if e := lastErr.Load(); e != nil {
		t.Logf("the last write that failed: %v", *e)
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes lost", lost, len(acked))
	}
}

// A commit's flush to disk waits outside the writers' lock: while one
// Update waits in its flush (made slow: every WAL flush of the server
// waits 100 ms first, commit_delay), the lock is free, so another
// process's writer could take it and commit meanwhile.
func TestFlushAfterTheLock(t *testing.T) {
	ctx := context.Background()
	srv, err := pgserver.Start(ctx, pgserver.Options{Settings: []string{"commit_delay=100000", "commit_siblings=0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	db, err := pgengine.Open(ctx, srv.URL, pgengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	// flushing is the server process running the flush, and when it began
	// it; 0 when none is.
	flushing := func() (pid int, since time.Time) {
		err := other.QueryRow(ctx, `select pid, query_start from pg_stat_activity
			where state = 'active' and query = $1 and pid <> pg_backend_pid()`, pgengine.FlushStmt).Scan(&pid, &since)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return pid, since
	}
	// Each try writes a key and looks for its flush; the lock is tried
	// while the flush is seen running before and after the try. A try
	// whose flush ended before the second look proves nothing and is made
	// again.
	for try := 0; ; try++ {
		if try == 20 {
			t.Fatal("in 20 writes, the writers' lock was never tried while a flush ran")
		}
		done := make(chan error, 1)
		go func() { done <- putKept(db, fmt.Sprintf("k%d", try)) }()
		var pid int
		var since time.Time
		waitFor(t, "a commit's flush running", func() bool { pid, since = flushing(); return pid != 0 })
		var free bool
		if err := other.QueryRow(ctx, "select pg_try_advisory_lock($1)", db.WritersLock()).Scan(&free); err != nil {
			t.Fatal(err)
		}
		if free {
			if _, err := other.Exec(ctx, "select pg_advisory_unlock($1)", db.WritersLock()); err != nil {
				t.Fatal(err)
			}
		}
		pid2, since2 := flushing()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if pid2 != pid || !since2.Equal(since) {
			continue // the flush ended before the second look
		}
		if !free {
			t.Fatal("the writers' lock was held while its commit's flush ran")
		}
		break
	}
	if got := keptKeys(t, db); len(got) == 0 {
		t.Error("no key written")
	}
}
