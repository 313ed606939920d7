// Package pgtest gives tests a real PostgreSQL server: the one
// HANDOFF_TEST_DATABASE_URL names, or else a private cluster that the
// first test of the process starts in a temporary folder (initdb and
// postgres from Debian's packages, as an unprivileged user when the tests
// run as root), listening on a unix socket only, and that stops and is
// removed when the test process ends, however it ends. Each test gets a
// schema of its own, dropped at its cleanup.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoff/handoff/store/engine/pgengine"
	"github.com/handoff/handoff/store/engine/pgengine/pgserver"
)

// URLEnv names a server to test on instead of a private cluster: a
// connection URL whose role may create schemas.
const URLEnv = "HANDOFF_TEST_DATABASE_URL"

var (
	once    sync.Once
	baseURL string
	admin   *pgxpool.Pool
	onceErr error
	seq     atomic.Int64
)

// URL is the connection URL of the test server, started on first use;
// a server that cannot be had fails tb.
func URL(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		baseURL = os.Getenv(URLEnv)
		if baseURL == "" {
			baseURL, onceErr = start()
			if onceErr != nil {
				return
			}
		}
		admin, onceErr = pgxpool.New(context.Background(), baseURL)
	})
	if onceErr != nil {
		tb.Fatalf("a PostgreSQL server for the tests: %v", onceErr)
	}
	return baseURL
}

// Schema makes a new, empty schema for tb and drops it, with everything
// in it, at tb's cleanup (registered first, so it runs after the
// cleanups tb registers later, the engine's Close among them).
func Schema(tb testing.TB) string {
	tb.Helper()
	URL(tb)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), seq.Add(1))
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "create schema "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("create schema %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if _, err := admin.Exec(ctx, "drop schema "+pgx.Identifier{name}.Sanitize()+" cascade"); err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// Open opens a pgengine on a new schema of the test server; its Close and
// the schema's drop are tb's cleanups. The store closes the engine itself:
// a second Close is harmless.
func Open(tb testing.TB) *pgengine.DB {
	tb.Helper()
	schema := Schema(tb)
	db, err := pgengine.Open(context.Background(), URL(tb), pgengine.Options{Schema: schema, MaxConns: 8, TempDir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("open pgengine on schema %s: %v", schema, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// start starts a private cluster (pgserver) for the life of the test
// process: its Stop is never called, so the watchdog stops the server and
// removes its folder when the process ends.
func start() (string, error) {
	srv, err := pgserver.Start(context.Background(), pgserver.Options{})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		return "", fmt.Errorf("%w, and %s is not set", err, URLEnv)
	}
	if err != nil {
		return "", err
	}
	keep = srv
	return srv.URL, nil
}

// keep holds the server, and so its watchdog's standard input, until the
// process ends.
var keep *pgserver.Server

// Exec runs sql on the test server as its administrator, past any engine:
// how a test changes a database behind an engine's back.
func Exec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	URL(tb)
	if _, err := admin.Exec(context.Background(), sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}
