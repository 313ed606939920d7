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
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoff/handoff/store/engine/pgengine"
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

// binDir finds initdb and postgres: on PATH, else the newest of Debian's
// /usr/lib/postgresql/<version>/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server installed (initdb and postgres: apt-get install postgresql), and " + URLEnv + " is not set")
}

// watchdog runs the server and waits for its standard input to close,
// which happens when the test process ends (exit, panic or SIGKILL):
// then it stops the server (fast shutdown) and removes the folder.
const watchdog = `"$1/postgres" -D "$2/data" -k "$2" -c listen_addresses= -c max_connections=200 \
  -c shared_buffers=32MB -c log_min_messages=warning >"$2/log" 2>&1 &
pid=$!
cat >/dev/null
kill -INT "$pid" 2>/dev/null
wait "$pid"
rm -rf "$2"
`

// start initialises a cluster in a new temporary folder and starts its
// server, returning its URL once it answers.
func start() (string, error) {
	bin, err := binDir()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "handoff-pg-")
	if err != nil {
		return "", err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// initdb refuses root: the cluster is the postgres user's.
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("the tests run as root and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// --no-sync: initdb's own files are scratch; the server itself runs
	// with fsync on, as in production.
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "handoff",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	run := exec.Command("/bin/sh", "-c", watchdog, "watchdog", bin, dir)
	run.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	stdin, err := run.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := run.Start(); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	// The pipe's write end stays open, unused, for the life of the process:
	// its end is the watchdog's signal.
	keep = stdin
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	url := fmt.Sprintf("host=%s user=handoff dbname=postgres sslmode=disable", dir)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, url)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return url, nil
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return "", fmt.Errorf("the PostgreSQL server stopped at start (%v): %s", werr, log)
		case <-time.After(20 * time.Millisecond): // the next try of a condition with a deadline
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return "", fmt.Errorf("the PostgreSQL server in %s did not answer within 60 s: %v: %s", dir, err, log)
		}
	}
}

// keep holds the watchdog's standard input open until the process ends.
var keep any

// Exec runs sql on the test server as its administrator, past any engine:
// how a test changes a database behind an engine's back.
func Exec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	URL(tb)
	if _, err := admin.Exec(context.Background(), sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}
