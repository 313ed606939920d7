package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

// OpenURL opens a store on PostgreSQL that keeps what it committed across
// a reopen; a second opens beside it (several servers share a database),
// and a move's exclusive hold opens beside neither.
func TestOpenURL(t *testing.T) {
	schema := pgtest.Schema(t)
	url := pgtest.URL(t) + " search_path=" + schema
	ctx := context.Background()
	st, err := OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, st, "web:m1", t0)
	second, err := OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatalf("a second OpenURL beside an open one: %v", err)
	}
	if !st.Shared() || !second.Shared() {
		t.Error("stores on one PostgreSQL database do not say they share it")
	}
	if ev, err := second.EventByKey("web:m1"); err != nil || ev.ID != rec.Event.ID {
		t.Errorf("the second store's EventByKey = %+v, %v; want event %s", ev, err, rec.Event.ID)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err := openMovePostgres(ctx, url); !errors.As(err, new(inUseError)) {
		if db != nil {
			db.Close()
		}
		t.Errorf("a move into a database a store has open = %v; want it refused as in use", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatalf("OpenURL after the first closed: %v", err)
	}
	defer st.Close()
	if len(st.Migrations()) != 0 {
		t.Errorf("a reopen ran migrations %v", st.Migrations())
	}
	ev, err := st.EventByKey("web:m1")
	if err != nil || ev.ID != rec.Event.ID {
		t.Errorf("EventByKey after the reopen = %+v, %v; want event %s", ev, err, rec.Event.ID)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	// A backup of the PostgreSQL database is a bbolt file that verifies and
	// opens as a store with the same records: the way back to a file.
	dir := t.TempDir()
	bf, _, err := st.BackupToDir(dir, t0, BackupOptions{Keep: 2})
	if err != nil {
		t.Fatalf("BackupToDir: %v", err)
	}
	if err := VerifyFile(bf.Path); err != nil {
		t.Errorf("VerifyFile of the backup: %v", err)
	}
	copied, err := OpenFile(bf.Path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the backup: %v", err)
	}
	defer copied.Close()
	if ev, err := copied.EventByKey("web:m1"); err != nil || ev.ID != rec.Event.ID {
		t.Errorf("the backup's event = %+v, %v; want %s", ev, err, rec.Event.ID)
	}
}

// A job running on a server that no longer holds the database (it closed,
// or was killed, mid-job) is released by another server at once, not at
// its lease's end; a live server's jobs are not.
func TestReleaseOwners(t *testing.T) {
	ctx := context.Background()
	a, b := twoServers(t)
	if a.Owner() == "" || a.Owner() == b.Owner() {
		t.Fatalf("owners %q and %q; want two names", a.Owner(), b.Owner())
	}
	enqueueAt(t, a, t0, 3)
	j := claimOne(t, a, t0, time.Hour)
	if ownerOf(j.ExecutionID) != a.Owner() {
		t.Fatalf("execution %s claimed by %s; want its owner named", j.ExecutionID, a.Owner())
	}
	running, err := b.RunningOwners()
	if err != nil || len(running) != 1 || running[a.Owner()] != 1 {
		t.Fatalf("RunningOwners = %v, %v; want %s running 1", running, err, a.Owner())
	}
	alive, err := b.OwnersAlive(ctx, []string{a.Owner(), "gone"})
	if err != nil || !alive[a.Owner()] || alive["gone"] {
		t.Fatalf("OwnersAlive = %v, %v; want only %s", alive, err, a.Owner())
	}
	if err := a.Close(); err != nil { // the server goes with its job running
		t.Fatal(err)
	}
	// Its session ends on the server shortly after the client hangs up.
	if err := proc.Poll(ctx, 30*time.Second, func(time.Duration) time.Duration { return 10 * time.Millisecond }, func() (bool, error) {
		alive, err := b.OwnersAlive(ctx, []string{a.Owner()})
		return !alive[a.Owner()], err
	}); err != nil {
		t.Fatalf("OwnersAlive after %s closed: %v; want it gone", a.Owner(), err)
	}
	now := t0.Add(time.Minute) // well inside the hour's lease
	released, err := b.ReleaseOwners(ctx, now, map[string]bool{a.Owner(): true})
	if err != nil || len(released) != 1 || released[0].ID != j.ID || released[0].State != JobRetryable {
		t.Fatalf("ReleaseOwners = %+v, %v; want job %s retryable", released, err, j.ID)
	}
	got := mustJob(t, b, j.ID)
	if last := got.Attempts[len(got.Attempts)-1]; last.Outcome != OutcomeLeaseExpired {
		t.Errorf("the released attempt's outcome = %q; want %q", last.Outcome, OutcomeLeaseExpired)
	}
	again := claimOne(t, b, now.Add(time.Hour), time.Minute)
	if again.ID != j.ID || ownerOf(again.ExecutionID) != b.Owner() {
		t.Errorf("the claim after the release = %s by %s; want %s by %s", again.ID, again.ExecutionID, j.ID, b.Owner())
	}
	if err := b.Check(); err != nil {
		t.Error(err)
	}
}

// A claim on PostgreSQL: its read transaction, then its write, reading
// one cursor a kind of the ready index (the walk's cursor becomes the
// kind's head) and, ahead, its jobs and the counts it moves. Every read
// of the write is a round trip under the writers' lock, while every
// other writer of the database waits.
func TestClaimRoundTrips(t *testing.T) {
	st, err := OpenURL(context.Background(), pgtest.URL(t)+" search_path="+pgtest.Schema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, kind := range []string{"a", "b", "c"} {
		for range 2 {
			nj := NewJob{ID: ulid.Make().String(), Kind: kind, Key: ulid.Make().String(), MaxAttempts: 3}
			if err := st.Update(context.Background(), func(tx *Tx) error { _, _, err := tx.Enqueue(nj, "corr", t0); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := st.RoundTrips()
	got, err := st.Claim(context.Background(), t0.Add(time.Minute), AnyJobs(6), time.Minute)
	if err != nil || len(got) != 6 {
		t.Fatalf("Claim = %d jobs, %v; want 6", len(got), err)
	}
	// The View: the walk's first read with its begin, a read at each next
	// kind and one past the last, its end; the write: its begin (the
	// writers' lock, the catalog's check), the same four reads, the jobs
	// and counts read ahead, the writes with the COMMIT.
	if n := st.RoundTrips() - before; n != 5+7 {
		t.Errorf("claiming 6 jobs of 3 kinds took %d round trips; want %d", n, 5+7)
	}
}

// A round whose begin waits for the writers' lock (another process's
// round holds it) takes the writes that came meanwhile: three writers, the
// first waiting for the lock and the other two queued behind it, commit in
// one round once the lock is free, not two.
func TestRoundTakesWritesThatCameDuringTheLock(t *testing.T) {
	ctx := context.Background()
	st, err := OpenURL(ctx, pgtest.URL(t)+" search_path="+pgtest.Schema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	key := st.pg.WritersLock()
	if _, err := other.Exec(ctx, "select pg_advisory_lock($1)", key); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 3)
	write := func() {
		nj := NewJob{ID: ulid.Make().String(), Kind: "a", Key: ulid.Make().String(), MaxAttempts: 3}
		done <- st.Update(ctx, func(tx *Tx) error { _, _, err := tx.Enqueue(nj, "corr", t0); return err })
	}
	go write()
	if err := proc.Eventually(ctx, 20*time.Second, func() (bool, error) {
		var n int
		err := other.QueryRow(ctx, `select count(*) from pg_locks where locktype = 'advisory' and not granted
			and (classid::bigint << 32) | objid::bigint = $1`, key).Scan(&n)
		return n == 1, err
	}); err != nil {
		t.Fatalf("the first write waiting for the writers' lock: %v", err)
	}
	go write()
	go write()
	if err := proc.Eventually(ctx, 20*time.Second, func() (bool, error) { return st.offering.Load() == 2, nil }); err != nil {
		t.Fatalf("two writes queued behind it: %v", err)
	}
	before := st.Commits()
	if _, err := other.Exec(ctx, "select pg_advisory_unlock($1)", key); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := st.Commits() - before; n != 1 {
		t.Errorf("the three writes took %d rounds; want 1", n)
	}
}

// A commit that makes a job ready tells, once it has committed, when the
// earliest is due: this store's DueHook, and the other servers' Listen
// (never this one's own), each with the job's RunAt (rounded up to the
// millisecond on the wire). A write that rolled back tells nothing.
func TestDueTold(t *testing.T) {
	a, b := twoServers(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the Listens end before the stores close (twoServers' cleanup)
	hooked := make(chan time.Time, 16)
	a.HookDue(func(at time.Time) { hooked <- at })
	heardA, heardB := make(chan time.Time, 64), make(chan time.Time, 64)
	for st, heard := range map[*Store]chan time.Time{a: heardA, b: heardB} {
		go st.Listen(ctx, func(at time.Time) { heard <- at })
	}
	now := time.Now()
	enqueue := func(key string, runAt time.Time, fail error) error {
		return a.Update(ctx, func(tx *Tx) error {
			for i, at := range []time.Time{runAt.Add(time.Minute), runAt} {
				id := ulid.Make().String()
				if _, _, err := tx.Enqueue(NewJob{ID: id, Kind: "test", Key: key + string(rune('0'+i)), MaxAttempts: 1, RunAt: at}, "c", now); err != nil {
					return err
				}
			}
			return fail
		})
	}
	boom := errors.New("boom")
	if err := enqueue("rolled back & gone", now, boom); !errors.Is(err, boom) {
		t.Fatalf("a write that fails = %v; want %v", err, boom)
	}
	// B's Listen starts on its own: commit until B hears one.
	// Each commit's notice, as B should hear it: the earliest RunAt,
	// rounded up. B may hear one a commit or more later.
	told := map[int64]bool{} // Unix ms
	var heard time.Time
	deadline := time.After(30 * time.Second)
	for i := 0; heard.IsZero(); i++ {
		runAt := now.Add(time.Duration(i+1)*time.Hour + 1234567*time.Nanosecond)
		if err := enqueue("fish & chips ✓ "+string(rune('a'+i%26)), runAt, nil); err != nil {
			t.Fatal(err)
		}
		told[runAt.Truncate(time.Millisecond).Add(time.Millisecond).UnixMilli()] = true
		select {
		case at := <-hooked:
			if !at.Equal(runAt) {
				t.Fatalf("the DueHook was told %s; want the earliest RunAt %s", at, runAt)
			}
		case <-deadline:
			t.Fatal("the DueHook was not told of a commit")
		}
		select {
		case heard = <-heardB:
			if heard.IsZero() {
				continue // a reconnect's "anything may be due": keep going
			}
			if !told[heard.UnixMilli()] || heard.Nanosecond()%int(time.Millisecond) != 0 {
				t.Fatalf("the other server heard %s; want one of the commits' earliest RunAt, rounded up", heard)
			}
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("the other server heard no commit")
		}
	}
	// B's notice comes to A after every notification of A's commits
	// before it (one channel, in commit order): A heard none of those.
	bRunAt := now.Add(1000 * time.Hour)
	if err := b.Update(ctx, func(tx *Tx) error {
		_, _, err := tx.Enqueue(NewJob{ID: ulid.Make().String(), Kind: "test", Key: "from b", MaxAttempts: 1, RunAt: bRunAt}, "c", now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for want := bRunAt.Truncate(time.Millisecond).Add(time.Millisecond); ; {
		select {
		case at := <-heardA:
			if at.Equal(want) {
				goto heardB
			}
			if !at.IsZero() { // zero: its Listen (re)connecting
				t.Fatalf("a store's own Listen heard its own commit (%s)", at)
			}
		case <-deadline:
			t.Fatal("A never heard B's commit")
		}
	}
heardB:
	if len(hooked) != 0 {
		t.Errorf("the DueHook was told %d times more than there were commits", len(hooked))
	}
}

// twoServers opens two stores on one new schema, as two servers would,
// closed at the test's end.
func twoServers(t *testing.T) (a, b *Store) {
	t.Helper()
	url := pgtest.URL(t) + " search_path=" + pgtest.Schema(t)
	for _, st := range []**Store{&a, &b} {
		var err error
		if *st, err = OpenURL(context.Background(), url, Options{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*st).Close() })
	}
	return a, b
}

// A job its kind completed in its own transaction (CompleteJob) is
// finished from what that commit wrote, kept by the process: no read of
// it. Another process, which kept nothing, reads it (2 round trips: the
// read with its begin, the end), and never writes.
func TestFinishKeptJob(t *testing.T) {
	url := pgtest.URL(t) + " search_path=" + pgtest.Schema(t)
	st, err := OpenURL(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	claimed := func() Job {
		t.Helper()
		nj := NewJob{ID: ulid.Make().String(), Kind: "k", Key: ulid.Make().String(), MaxAttempts: 3}
		if err := st.Update(ctx, func(tx *Tx) error { _, _, err := tx.Enqueue(nj, "corr", t0); return err }); err != nil {
			t.Fatal(err)
		}
		got, err := st.Claim(ctx, t0.Add(time.Minute), AnyJobs(1), time.Minute)
		if err != nil || len(got) != 1 {
			t.Fatalf("Claim = %d jobs, %v", len(got), err)
		}
		if err := st.Update(ctx, func(tx *Tx) error { return tx.CompleteJob(got[0].ID, got[0].ExecutionID, t0.Add(2*time.Minute)) }); err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	j := claimed()
	before := st.RoundTrips()
	fin, err := st.FinishJob(ctx, j.ID, j.ExecutionID, t0.Add(3*time.Minute), Result{Outcome: OutcomeCompleted})
	if err != nil || fin.State != JobCompleted || !completedBy(fin, j.ExecutionID) {
		t.Fatalf("FinishJob = %s %+v, %v; want the job completed by %s", fin.State, fin.Attempts, err, j.ExecutionID)
	}
	if n := st.RoundTrips() - before; n != 0 {
		t.Errorf("finishing a job its kind completed took %d round trips; want 0", n)
	}
	stored, err := st.Job(j.ID)
	if err != nil || stored.State != fin.State || len(stored.Attempts) != len(fin.Attempts) || !stored.UpdatedAt.Equal(fin.UpdatedAt) {
		t.Errorf("FinishJob answered %s %v, but the job stored is %s %v (%v)", fin.State, fin.UpdatedAt, stored.State, stored.UpdatedAt, err)
	}

	other, err := OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	j = claimed()
	before = other.RoundTrips()
	fin, err = other.FinishJob(ctx, j.ID, j.ExecutionID, t0.Add(3*time.Minute), Result{Outcome: OutcomeCompleted})
	if err != nil || fin.State != JobCompleted || !completedBy(fin, j.ExecutionID) {
		t.Fatalf("another process's FinishJob = %s, %v; want completed", fin.State, err)
	}
	if n := other.RoundTrips() - before; n != 2 {
		t.Errorf("another process finishing a job completed elsewhere took %d round trips; want 2 (a read)", n)
	}
}
