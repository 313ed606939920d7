package pgengine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

var ready = []byte("ready")

// openShared opens one more engine on schema, as one more server process
// would.
func openShared(t *testing.T, schema string) *pgengine.DB {
	t.Helper()
	db, err := pgengine.Open(context.Background(), pgtest.URL(t), pgengine.Options{
		Schema: schema, Shared: true, MaxConns: 4, HoldCheck: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// put writes one key into bucket name (created when absent); into ready
// it also notifies, with the key, as the store does of a job made ready.
func put(db *pgengine.DB, name []byte, key string) error {
	_, err := db.Update(func(tx engine.Tx) error {
		b, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		if bytes.Equal(name, ready) {
			tx.(engine.Notifier).Notify(key)
		}
		return b.Put([]byte(key), []byte("v"))
	})
	return err
}

// Shared engines open side by side and write; an exclusive one (a move)
// opens beside none of them, and none beside it.
func TestSharedBesideShared(t *testing.T) {
	schema := pgtest.Schema(t)
	ctx := context.Background()
	a, b := openShared(t, schema), openShared(t, schema)
	if err := put(a, bk, "a"); err != nil {
		t.Fatal(err)
	}
	if err := put(b, bk, "b"); err != nil {
		t.Fatal(err)
	}
	ex := pgengine.Options{Schema: schema, Exclusive: true}
	if _, err := pgengine.Open(ctx, pgtest.URL(t), ex); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("an exclusive Open beside shared ones = %v; want ErrLocked", err)
	}
	a.Close()
	b.Close()
	// Their sessions end on the server a moment after the clients hang up.
	var x *pgengine.DB
	waitFor(t, "an exclusive Open once the shared ones closed", func() bool {
		var err error
		x, err = pgengine.Open(ctx, pgtest.URL(t), ex)
		if err != nil && !errors.Is(err, engine.ErrLocked) {
			t.Fatal(err)
		}
		return err == nil
	})
	defer x.Close()
	_, err := pgengine.Open(ctx, pgtest.URL(t), pgengine.Options{Schema: schema, Shared: true})
	if !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("a shared Open beside an exclusive one = %v; want ErrLocked", err)
	}
}

// A commit whose transaction called Notify notifies the schema's channel
// once, with its payload (the last one given); one that did not, or
// rolled back, does not.
func TestNotifyOnCommit(t *testing.T) {
	schema := pgtest.Schema(t)
	a := openShared(t, schema)
	ctx := context.Background()
	l, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if _, err := l.Exec(ctx, "listen "+pgx.Identifier{a.Channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := put(a, []byte("other"), "k"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := a.Update(func(tx engine.Tx) error {
		b, err := tx.CreateBucketIfNotExists(ready)
		if err != nil {
			return err
		}
		tx.(engine.Notifier).Notify("rolled back")
		if err := b.Put([]byte("rolled back"), nil); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	// A payload as the store's, twice in one transaction: the last counts.
	if _, err := a.Update(func(tx engine.Tx) error {
		tx.(engine.Notifier).Notify("first")
		tx.(engine.Notifier).Notify("1765000000000 fish & chips ✓ שלום")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := put(a, ready, "job 2"); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, "select pg_notify($1, 'end')", a.Channel())
	var got []string
	for {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := l.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		if n.Payload == "end" {
			break
		}
		got = append(got, n.Payload)
	}
	want := []string{"1765000000000 fish & chips ✓ שלום", "job 2"}
	if !slices.Equal(got, want) {
		t.Fatalf("notifications before the end = %q; want %q", got, want)
	}
}

// Listen on one engine hears the commits of another.
func TestListenHearsAnotherProcess(t *testing.T) {
	schema := pgtest.Schema(t)
	a, b := openShared(t, schema), openShared(t, schema)
	ctx, cancel := context.WithCancel(context.Background())
	woken := make(chan struct{}, 1)
	listened := make(chan error, 1)
	go func() {
		listened <- b.Listen(ctx, func(string) {
			select {
			case woken <- struct{}{}:
			default:
			}
		})
	}()
	// Listen starts listening on its own: commit until one is heard.
	deadline := time.After(30 * time.Second)
	for i := 0; ; i++ {
		if err := put(a, ready, fmt.Sprint("job", i)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-woken:
		case err := <-listened:
			t.Fatalf("Listen returned %v", err)
		case <-deadline:
			t.Fatal("no commit of a woke b's Listen within 30 s")
		case <-time.After(100 * time.Millisecond): // commit again: Listen may not have started yet
			continue
		}
		break
	}
	cancel()
	if err := <-listened; err != nil {
		t.Fatalf("Listen after its context ended = %v; want nil", err)
	}
}

// The lead is held by one engine at a time. When its holder's connection
// is lost, the holder stops leading before any engine leads again; when
// its process stops, another engine takes the lead.
func TestLeadMoves(t *testing.T) {
	schema := pgtest.Schema(t)
	const check = 300 * time.Millisecond
	var (
		mu      sync.Mutex
		log     []string // "a+", "a-": a began, a ended
		leading atomic.Int32
		overlap atomic.Bool
	)
	dbs := map[string]*pgengine.DB{"a": openShared(t, schema), "b": openShared(t, schema)}
	stops := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for name, db := range dbs {
		ctx, stop := context.WithCancel(context.Background())
		stops[name] = stop
		defer stop()
		wg.Go(func() {
			db.Lead(ctx, check, func(lctx context.Context) {
				if leading.Add(1) > 1 {
					overlap.Store(true)
				}
				mu.Lock()
				log = append(log, name+"+")
				mu.Unlock()
				<-lctx.Done()
				mu.Lock()
				log = append(log, name+"-")
				mu.Unlock()
				leading.Add(-1)
			})
		})
	}
	entries := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
	waitFor(t, "one leads", func() bool { return len(entries()) == 1 })
	first := entries()[0][:1]
	pid, err := dbs[first].LeadPID(context.Background())
	if err != nil || pid == 0 {
		t.Fatalf("the lead's holder: %d, %v", pid, err)
	}
	pgtest.Exec(t, "select pg_terminate_backend($1)", int32(pid))
	waitFor(t, "one leads again", func() bool { return len(entries()) == 3 })
	if got := entries(); got[1] != first+"-" || got[2][1:] != "+" {
		t.Fatalf("the lead after its holder's connection was lost: %v; want %s to stop before any engine leads again", got, first)
	}
	// The leader's process stops: the other takes the lead.
	leader := entries()[2][:1]
	other := map[string]string{"a": "b", "b": "a"}[leader]
	stops[leader]()
	waitFor(t, "the other leads", func() bool { return len(entries()) == 5 })
	if got := entries(); got[3] != leader+"-" || got[4] != other+"+" {
		t.Fatalf("the lead after its holder stopped: %v; want %s then %s", got, leader+"-", other+"+")
	}
	if overlap.Load() {
		t.Error("two engines led at once")
	}
}

// A shared engine whose hold is lost says so (OnLost), its owner lock is
// gone meanwhile (another process sees it not Alive), and both come back
// once it takes the hold again.
func TestHoldLostTold(t *testing.T) {
	schema := pgtest.Schema(t)
	ctx := context.Background()
	lost := make(chan error, 4)
	a, err := pgengine.Open(ctx, pgtest.URL(t), pgengine.Options{
		Schema: schema, Shared: true, HoldCheck: 200 * time.Millisecond, OnLost: func(err error) { lost <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := openShared(t, schema)
	alive := func() bool {
		m, err := b.Alive(ctx, []string{a.Owner()})
		if err != nil {
			t.Fatal(err)
		}
		return m[a.Owner()]
	}
	if !alive() {
		t.Fatal("a live engine's owner is not Alive")
	}
	pgtest.Exec(t, "select pg_terminate_backend($1)", int32(a.HolderPID()))
	select {
	case err := <-lost:
		if !errors.Is(err, engine.ErrLocked) {
			t.Errorf("OnLost told %v; want ErrLocked", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnLost not told within 30 s of the hold's connection ending")
	}
	waitFor(t, "a takes its hold again", func() bool { return a.HolderPID() != 0 && alive() })
}

// A bucket another process creates or deletes is seen by this one's next
// transaction, a bucket made again under the same name included: what a
// cache of the catalog would have to keep true.
func TestCatalogOfAnotherProcess(t *testing.T) {
	a := openShared(t, pgtest.Schema(t))
	b := openShared(t, a.Schema())
	names := func(db *pgengine.DB) []string {
		t.Helper()
		var out []string
		if err := db.View(func(tx engine.Tx) error {
			return tx.ForEachBucket(func(name []byte) error {
				out = append(out, string(name))
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := names(b); len(got) != 0 {
		t.Fatalf("buckets of a new schema = %q; want none", got)
	}
	for _, name := range []string{"one", "two", "three"} {
		if err := put(a, []byte(name), "k"); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fmt.Sprint(names(b)), "[one three two]"; got != want {
		t.Errorf("after three creates, the other process sees %s; want %s", got, want)
	}
	if err := b.View(func(tx engine.Tx) error {
		if v := tx.Bucket([]byte("two")).Get([]byte("k")); string(v) != "v" {
			t.Errorf("two/k read by the other process = %q; want v", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A delete and a create of the same name in one transaction: as many
	// buckets as before, the same names, another table.
	if _, err := a.Update(func(tx engine.Tx) error {
		if err := tx.DeleteBucket([]byte("two")); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists([]byte("two"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.View(func(tx engine.Tx) error {
		if v := tx.Bucket([]byte("two")).Get([]byte("k")); v != nil {
			t.Errorf("two/k after two was made again = %q; want absent", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(func(tx engine.Tx) error { return tx.DeleteBucket([]byte("one")) }); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(names(a)), "[three two]"; got != want {
		t.Errorf("after the other process deleted one, this one sees %s; want %s", got, want)
	}
}
