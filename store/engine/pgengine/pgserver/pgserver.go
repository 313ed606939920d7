// Package pgserver starts a private PostgreSQL cluster: initdb in a new
// temporary folder (as the postgres user when the caller is root, since
// initdb refuses root), then postgres listening on a unix socket in that
// folder only, with fsync and synchronous_commit on. The server stops
// (fast shutdown) and its folder is removed when Stop is called, or when
// the calling process ends however it ends: a watchdog shell waits on a
// pipe that only the caller holds open.
//
// StartStandby makes a streaming-replication standby of a running server
// and Promote makes it a primary: stopping the primary alone (its Stop)
// and promoting its standby is a failover, which pgengine's tests run.
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
	err    error               // the watchdog's exit, read after exited is closed
	cred   *syscall.Credential // the server's programs run as (nil: the caller)
}

// URLFor is the URL of database dbname on s.
func (s *Server) URLFor(dbname string) string {
	return fmt.Sprintf("host=%s user=handoff dbname=%s sslmode=disable", s.Dir, dbname)
}

// BinDir finds initdb and postgres (and pg_basebackup beside them): the
// folder of the initdb on PATH, its links followed (a link in
// /usr/local/bin to Debian's folder, which has the other programs), else
// the newest of Debian's /usr/lib/postgresql/<version>/bin.
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
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
// the same data, then writes "restarted" to its standard output; a line
// "crash" stops it as a crash would (immediate shutdown: SIGQUIT, no
// checkpoint, WAL not yet written is lost, the next start recovers) and
// starts it again, then writes "crashed".
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
  elif [ "$cmd" = crash ]; then
    kill -QUIT "$pid"
    wait "$pid"
    run "$@"
    echo crashed
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
	dir, cred, err := newDir(o.Dir)
	if err != nil {
		return nil, err
	}
	// --no-sync: initdb's own files are scratch; the server itself runs
	// with fsync on, as in production. --auth=trust writes a pg_hba.conf
	// that also lets the superuser replicate over the socket (local
	// replication all trust): what StartStandby's pg_basebackup needs.
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "handoff",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb in %s: %v: %s", dir, err, out)
	}
	return launch(ctx, bin, dir, cred, o.Settings)
}

// StartStandby makes a streaming-replication standby of s in a new
// temporary folder (pg_basebackup -R from s's socket, as the same user),
// with a socket of its own in that folder, and starts it as Start starts a
// cluster, returning once it answers (read only, a hot standby). It
// follows s until Promote; stopping s leaves it running.
func (s *Server) StartStandby(ctx context.Context, o Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, cred, err := newDir(o.Dir)
	if err != nil {
		return nil, err
	}
	// -R writes standby.signal and primary_conninfo (s's socket); -X
	// stream copies the WAL written during the copy; a fast checkpoint
	// starts it at once.
	bb := exec.CommandContext(ctx, filepath.Join(bin, "pg_basebackup"), "-D", filepath.Join(dir, "data"),
		"-h", s.Dir, "-U", "handoff", "-R", "-X", "stream", "-c", "fast", "--no-sync")
	bb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := bb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_basebackup from %s into %s: %v: %s", s.Dir, dir, err, out)
	}
	return launch(ctx, bin, dir, cred, o.Settings)
}

// Promote makes a standby (StartStandby) a primary and returns once it
// takes writes (pg_promote waits for the end of recovery, up to a minute).
func (s *Server) Promote(ctx context.Context) error {
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return fmt.Errorf("promote the standby in %s: %w", s.Dir, err)
	}
	defer c.Close(context.Background())
	var done bool
	if err := c.QueryRow(ctx, "select pg_promote(true, 60)").Scan(&done); err != nil {
		return fmt.Errorf("promote the standby in %s: %w", s.Dir, err)
	}
	if !done {
		return fmt.Errorf("the standby in %s was not promoted within 60 s: %s", s.Dir, s.Log())
	}
	return nil
}

// newDir makes a cluster's temporary folder under parent, owned by the
// postgres user when the caller is root (initdb and postgres refuse
// root), and the credential to run the cluster's programs with (nil: the
// caller's own).
func newDir(parent string) (string, *syscall.Credential, error) {
	dir, err := os.MkdirTemp(parent, "handoff-pg-")
	if err != nil {
		return "", nil, err
	}
	if os.Geteuid() != 0 {
		return dir, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("running as root and there is no postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// launch starts the watchdog on the cluster in dir and waits until its
// server answers.
func launch(ctx context.Context, bin, dir string, cred *syscall.Credential, settings []string) (*Server, error) {
	args := []string{"-c", watchdog, "watchdog", bin, dir}
	for _, s := range settings {
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
	s := &Server{Dir: dir, stdin: stdin, exited: make(chan struct{}), said: bufio.NewScanner(stdout), cred: cred}
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
	err := answers(ctx, s.URL, s.exited, filepath.Join(s.Dir, "log"))
	if errors.Is(err, errExited) {
		return fmt.Errorf("the PostgreSQL server stopped at start (%v): %w", s.err, err)
	}
	if err != nil {
		s.Stop()
		return fmt.Errorf("the PostgreSQL server in %s: %w", s.Dir, err)
	}
	return nil
}

// errExited is answers' error for a program that stopped.
var errExited = errors.New("it stopped")

// answers waits until url answers a connection, within a minute or ctx,
// or until exited is closed; its error (errExited, or not answering)
// carries the program's log at logPath.
func answers(ctx context.Context, url string, exited <-chan struct{}, logPath string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := pgx.Connect(cctx, url)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("%w: %s", errExited, log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // the next try of a condition with a deadline
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("did not answer within 60 s: %v: %s", err, log)
		}
	}
}

// Restart stops the server (a fast shutdown: every session is ended, as a
// database restart or a failover ends them) and starts it again on the
// same data, returning once it answers again. Not safe beside Stop or
// another Restart.
func (s *Server) Restart(ctx context.Context) error { return s.again(ctx, "restart", "restarted") }

// again asks the watchdog to stop the server by cmd and start it again,
// and waits for its answer done and then for the server to answer.
func (s *Server) again(ctx context.Context, cmd, done string) error {
	if _, err := io.WriteString(s.stdin, cmd+"\n"); err != nil {
		return fmt.Errorf("%s the PostgreSQL server: %w", cmd, err)
	}
	if !s.said.Scan() || s.said.Text() != done {
		return fmt.Errorf("the PostgreSQL server in %s did not start again after a %s: %s", s.Dir, cmd, s.Log())
	}
	return s.answer(ctx)
}

// Crash stops the server as a crash of PostgreSQL would (an immediate
// shutdown: every process quits at once, what is not yet written to the
// WAL files is lost, the next start replays the WAL) and starts it again
// on the same data, returning once it answers again. Not safe beside
// Stop, Restart or another Crash.
func (s *Server) Crash(ctx context.Context) error { return s.again(ctx, "crash", "crashed") }

// Stop shuts the server down (fast shutdown: open sessions are ended) and
// removes its folder, waiting up to a minute for both. A primary's
// standbys keep running (without a primary to follow, until Promote).
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

// ErrNoBouncer is returned by StartBouncer when no pgbouncer is found.
var ErrNoBouncer = errors.New("no PgBouncer installed (apt-get install pgbouncer)")

// Bouncer is a PgBouncer in front of a Server.
type Bouncer struct {
	// URL connects through it to the server's postgres database as the
	// superuser handoff, in libpq's key=value form.
	URL   string
	stdin io.WriteCloser
	done  chan struct{}
}

// bouncerWatchdog runs pgbouncer until its standard input closes (Stop,
// or the caller ending however it ends), then stops it.
const bouncerWatchdog = `"$1" "$2" >>"$3" 2>&1 &
pid=$!
cat >/dev/null
kill -TERM "$pid" 2>/dev/null
wait "$pid"
`

// StartBouncer starts a PgBouncer in pool mode mode ("session" or
// "transaction") in front of s, on a unix socket in s's folder at port,
// any client let in (auth_type any: the socket folder is the server's
// own), and returns once a connection through it answers.
func (s *Server) StartBouncer(ctx context.Context, mode string, port int) (*Bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer"
		if _, err := os.Stat(bin); err != nil {
			return nil, ErrNoBouncer
		}
	}
	name := fmt.Sprintf("pgbouncer-%d", port)
	ini := filepath.Join(s.Dir, name+".ini")
	conf := fmt.Sprintf(`[databases]
postgres = host=%s port=5432 dbname=postgres user=handoff
[pgbouncer]
listen_addr =
listen_port = %d
unix_socket_dir = %s
auth_type = any
pool_mode = %s
max_client_conn = 400
default_pool_size = 40
pidfile = %s
`, s.Dir, port, s.Dir, mode, filepath.Join(s.Dir, name+".pid"))
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	run := exec.Command("/bin/sh", "-c", bouncerWatchdog, "watchdog", bin, ini, filepath.Join(s.Dir, name+".log"))
	run.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	stdin, err := run.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := run.Start(); err != nil {
		return nil, err
	}
	b := &Bouncer{URL: fmt.Sprintf("host=%s port=%d user=handoff dbname=postgres sslmode=disable", s.Dir, port), stdin: stdin, done: make(chan struct{})}
	go func() { run.Wait(); close(b.done) }()
	if err := answers(ctx, b.URL, b.done, filepath.Join(s.Dir, name+".log")); err != nil {
		b.Stop()
		return nil, fmt.Errorf("pgbouncer in %s: %w", s.Dir, err)
	}
	return b, nil
}

// Stop stops the bouncer and waits up to a minute for it.
func (b *Bouncer) Stop() error {
	b.stdin.Close()
	select {
	case <-b.done:
		return nil
	case <-time.After(time.Minute):
		return errors.New("pgbouncer did not stop within a minute")
	}
}
