package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	startupTimeout = 30 * time.Second
	// stopGrace is how long a child gets to shut down after SIGTERM before
	// it is killed.
	stopGrace = 10 * time.Second
)

// child is one target process. It is started with its stdout and stderr in
// a log file in its own directory, and is stopped with SIGTERM, then SIGKILL.
type child struct {
	name    string
	cmd     *exec.Cmd
	addr    string // 127.0.0.1:PORT, from its "listening" log line
	logPath string
	done    chan struct{} // closed when Wait has returned
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// startChild starts argv in dir and returns once the child has logged the
// address it listens on.
func startChild(ctx context.Context, name string, argv []string, dir string) (*child, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	watch := &listenWatcher{out: logf, found: make(chan listenResult, 1)}
	cmd := exec.Command(argv[0], argv[1:]...)
	// The working directory is the child's own, so no stray config file in the
	// caller's directory is picked up.
	cmd.Dir = dir
	cmd.Env = childEnv(os.Environ())
	// One writer for both streams: exec then copies through a single
	// goroutine, so the watcher needs no lock.
	cmd.Stdout = watch
	cmd.Stderr = watch
	// Bounds Wait if something else inherited the pipe and keeps it open.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	ch := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		ch.waitErr = cmd.Wait()
		logf.Close()
		close(ch.done)
	}()

	timer := time.NewTimer(startupTimeout)
	defer timer.Stop()
	select {
	case got := <-watch.found:
		if got.err == nil {
			ch.addr = got.addr
			return ch, nil
		}
		err = got.err
	case <-ch.done:
		return nil, fmt.Errorf("exited before listening: %v%s", ch.waitErr, ch.logTail())
	case <-timer.C:
		err = fmt.Errorf("no listening line within %s", startupTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	stopErr := ch.stop()
	return nil, fmt.Errorf("%w%s", errors.Join(err, stopErr), ch.logTail())
}

// stop shuts the child down: SIGTERM, then SIGKILL after stopGrace. It is
// safe to call more than once; a nil error means a clean exit after SIGTERM.
func (ch *child) stop() error {
	ch.stopOnce.Do(func() { ch.stopErr = ch.terminate() })
	return ch.stopErr
}

func (ch *child) terminate() error {
	select {
	case <-ch.done:
		return fmt.Errorf("%s had already exited: %v", ch.name, ch.waitErr)
	default:
	}
	if err := ch.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		ch.cmd.Process.Kill()
		<-ch.done
		return fmt.Errorf("%s: SIGTERM: %w; killed", ch.name, err)
	}
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-ch.done:
		if ch.waitErr != nil {
			return fmt.Errorf("%s exited uncleanly after SIGTERM: %w", ch.name, ch.waitErr)
		}
		return nil
	case <-timer.C:
		ch.cmd.Process.Kill()
		<-ch.done
		return fmt.Errorf("%s still running %s after SIGTERM; killed", ch.name, stopGrace)
	}
}

// logTail returns the end of the child's log, for error messages.
func (ch *child) logTail() string {
	b, err := os.ReadFile(ch.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return fmt.Sprintf("\n--- end of %s ---\n%s", ch.logPath, bytes.TrimRight(b, "\n"))
}

// childEnv drops every HANDOFF_ variable of the caller's shell, as the drill
// does: a HANDOFF_ADDR must not move the target off 127.0.0.1, nor
// HANDOFF_DATA onto a real data folder, nor a HANDOFF_FAULT or
// HANDOFF_CONFIG change what is measured.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HANDOFF_") {
			out = append(out, kv)
		}
	}
	return out
}

type listenResult struct {
	addr string
	err  error
}

// listenWatcher copies the child's output to its log file and reports the
// first "listening" line.
type listenWatcher struct {
	out     io.Writer
	found   chan listenResult // buffered; receives exactly one value
	done    bool
	pending []byte
}

func (w *listenWatcher) Write(p []byte) (int, error) {
	// A failed log write must not stall the child, whose next write would
	// then block or die on a broken pipe; the log is only for diagnosis.
	w.out.Write(p)
	if w.done {
		return len(p), nil
	}
	w.pending = append(w.pending, p...)
	for {
		i := bytes.IndexByte(w.pending, '\n')
		if i < 0 {
			break
		}
		line := w.pending[:i]
		w.pending = w.pending[i+1:]
		addr, err := parseListening(line)
		if err != nil || addr != "" {
			w.found <- listenResult{addr: addr, err: err}
			w.done, w.pending = true, nil
			break
		}
	}
	if len(w.pending) > 1<<20 {
		w.pending = nil // not a log line we could parse; don't grow forever
	}
	return len(p), nil
}

// parseListening reads one log line. It returns the address of a JSON
// `"msg":"listening"` line, "" for any other line, and an error when the
// listening address is not a concrete 127.0.0.1 port: the bench must never
// send load anywhere else.
func parseListening(line []byte) (string, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return "", nil
	}
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg != "listening" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(rec.Addr)
	if err != nil {
		return "", fmt.Errorf("listening line has a bad addr %q: %w", rec.Addr, err)
	}
	if host != "127.0.0.1" {
		return "", fmt.Errorf("listening on %q, want 127.0.0.1", rec.Addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("listening line has a bad port in %q", rec.Addr)
	}
	return rec.Addr, nil
}
