// Package pgserver starts a private PostgreSQL cluster: initdb in a new
// temporary folder (as the postgres user when the caller is root, since
// initdb refuses root), then postgres listening on a unix socket in that
// folder only, with fsync and synchronous_commit on. The server stops
// (fast shutdown) and its folder is removed when Stop is called, or when
// the calling process ends however it ends: a watchdog shell waits on a
// pipe that only the caller holds open.
//
// pgtest starts its test server with it; the bench (bench/) starts the
// server its PostgreSQL targets share.
package pgserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned by Start when no initdb and postgres are found.
var ErrNotInstalled = errors.New("no PostgreSQL server installed (initdb and postgres: apt-get install postgresql)")

// Options change how the cluster is started; the zero value is pgtest's.
type Options struct {
	// Dir is the parent of the cluster's temporary folder ("": $TMPDIR). It
	// must be reachable by the postgres user when the caller is root, and
	// short: the socket's path is limited to about 100 bytes.
	Dir string
	// Settings are more server settings, "name=value", passed as -c after
	// the defaults (which a setting here overrides).
	Settings []string
}

// Server is one running cluster.
type Server struct {
	// URL connects to its postgres database as the superuser handoff, in
	// libpq's key=value form; URLFor names another database.
	URL string
	// Dir is the cluster's folder: data/ and the socket.
	Dir    string
	stdin  io.WriteCloser
	said   *bufio.Scanner // the watchdog's standard output
	exited chan struct{}
	err    error // the watchdog's exit, read after exited is closed
}

// URLFor is the URL of database dbname on s.
func (s *Server) URLFor(dbname string) string {
	return fmt.Sprintf("host=%s user=handoff dbname=%s sslmode=disable", s.Dir, dbname)
}

// BinDir finds initdb and postgres: on PATH, else the newest of Debian's
// /usr/lib/postgresql/<version>/bin.
func BinDir() (string, error) {
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
	return "", ErrNotInstalled
}

// watchdog runs the server and reads its standard input until it closes,
// which happens at Stop or when the caller ends (exit, panic or SIGKILL):
// then it stops the server (fast shutdown) and removes the folder. A
// line "restart" stops the server (fast shutdown) and starts it again on
// the same data, then writes "restarted" to its standard output.
const watchdog = `bin=$1 dir=$2
shift 2
run() {
  "$bin/postgres" -D "$dir/data" -k "$dir" -c listen_addresses= -c max_connections=200 \
    -c shared_buffers=32MB -c log_min_messages=warning -c fsync=on -c synchronous_commit=on "$@" >>"$dir/log" 2>&1 &
  pid=$!
}
run "$@"
while read -r cmd; do
  if [ "$cmd" = restart ]; then
    kill -INT "$pid"
    wait "$pid"
    run "$@"
    echo restarted
  fi
done
kill -INT "$pid" 2>/dev/null
wait "$pid"
rm -rf "$dir"
`

// Start initialises a cluster in a new temporary folder and starts its
// server, returning once it answers (within a minute, or ctx).
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(o.Dir, "handoff-pg-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// initdb refuses root: the cluster is the postgres user's.
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// --no-sync: initdb's own files are scratch; the server itself runs
	// with fsync on, as in production.
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "handoff",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb in %s: %v: %s", dir, err, out)
	}
	args := []string{"-c", watchdog, "watchdog", bin, dir}
	for _, s := range o.Settings {
		args = append(args, "-c", s)
	}
	run := exec.Command("/bin/sh", args...)
	run.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	stdin, err := run.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stdout, err := run.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := run.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Dir: dir, stdin: stdin, exited: make(chan struct{}), said: bufio.NewScanner(stdout)}
	s.URL = s.URLFor("postgres")
	go func() {
		s.err = run.Wait()
		close(s.exited)
	}()
	if err := s.answer(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// answer waits until the server answers a connection, within a minute or
// ctx; when it stops or does not answer, it is stopped and its log is the
// error.
func (s *Server) answer(ctx context.Context) error {
	dir := s.Dir
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := pgx.Connect(cctx, s.URL)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return fmt.Errorf("the PostgreSQL server stopped at start (%v): %s", s.err, log)
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // the next try of a condition with a deadline
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			s.Stop()
			return fmt.Errorf("the PostgreSQL server in %s did not answer within 60 s: %v: %s", dir, err, log)
		}
	}
}

// Restart stops the server (a fast shutdown: every session is ended, as a
// database restart or a failover ends them) and starts it again on the
// same data, returning once it answers again. Not safe beside Stop or
// another Restart.
func (s *Server) Restart(ctx context.Context) error {
	if _, err := io.WriteString(s.stdin, "restart\n"); err != nil {
		return fmt.Errorf("restart the PostgreSQL server: %w", err)
	}
	if !s.said.Scan() || s.said.Text() != "restarted" {
		return fmt.Errorf("the PostgreSQL server in %s did not restart: %s", s.Dir, s.Log())
	}
	return s.answer(ctx)
}

// Stop shuts the server down (fast shutdown: open sessions are ended) and
// removes its folder, waiting up to a minute for both.
func (s *Server) Stop() error {
	s.stdin.Close()
	select {
	case <-s.exited:
		return s.err
	case <-time.After(time.Minute):
		return fmt.Errorf("the PostgreSQL server in %s did not stop within a minute", s.Dir)
	}
}

// Log is the server's log so far (its warnings and errors).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
	return string(b)
}
