package pgengine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/handoff/handoff/store/engine/pgengine"
	"github.com/handoff/handoff/store/engine/pgengine/pgserver"
)

// Behind a real PgBouncer: in session mode a server's engine opens as
// serve opens it (Shared), writes, reads and hears its own commits'
// notifications; in transaction mode it is refused at Open with the
// sentence that names the pooler, before anything else is asked (the
// hold's and the lead's session locks would stay with a server connection
// of the pooler's after the process is gone, and its prepared statements
// fail at random).
func TestPgBouncer(t *testing.T) {
	ctx := context.Background()
	srv, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	session, err := srv.StartBouncer(ctx, "session", 6432)
	if errors.Is(err, pgserver.ErrNoBouncer) {
		t.Skip(err) // the test command installs it (.ci/test.sh)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Stop() })
	transaction, err := srv.StartBouncer(ctx, "transaction", 6433)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { transaction.Stop() })

	t.Run("session", func(t *testing.T) {
		db, err := pgengine.Open(ctx, session.URL, pgengine.Options{Shared: true})
		if err != nil {
			t.Fatalf("Open through PgBouncer in session mode: %v", err)
		}
		defer db.Close()
		lctx, cancel := context.WithCancel(ctx)
		var woke atomic.Int32
		listened := make(chan error, 1)
		go func() { listened <- db.Listen(lctx, func(string) { woke.Add(1) }) }()
		defer func() { cancel(); <-listened }()
		for i, k := range []string{"fish & chips", "zoë", "שלום"} {
			if err := putKept(db, k); err != nil {
				t.Fatalf("write %d through PgBouncer: %v", i, err)
			}
		}
		got := keptKeys(t, db)
		if len(got) != 3 {
			t.Errorf("read back %d keys through PgBouncer; want 3", len(got))
		}
		waitFor(t, "a commit's notification heard through PgBouncer", func() bool {
			select {
			case err := <-listened:
				t.Fatalf("Listen through PgBouncer in session mode: %v", err)
			default:
			}
			if woke.Load() > 0 {
				return true
			}
			// A write after Listen began: the ones above may have come first.
			putKept(db, "again")
			return false
		})
	})
	t.Run("transaction", func(t *testing.T) {
		db, err := pgengine.Open(ctx, transaction.URL, pgengine.Options{Shared: true})
		if err == nil {
			db.Close()
			t.Fatal("Open through PgBouncer in transaction mode succeeded; want ErrNoSession")
		}
		if !errors.Is(err, pgengine.ErrNoSession) {
			t.Fatalf("Open through PgBouncer in transaction mode = %v; want ErrNoSession", err)
		}
		t.Logf("refused: %v", err)
	})
}
