// Package proc starts the real handoff binary and watches it: it builds the
// binary once per process, starts a run, learns the run's address from its
// log, waits until GET /readyz answers 200, kills it or stops it and says how
// it ended, and keeps the end of its output for failure messages. The
// end-to-end and browser tests, `handoff drill` and the bench all start the
// binary through it, and Eventually is their one way to wait for something.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// DefaultWithin bounds a start when none is given: opening bbolt and
	// releasing leases takes milliseconds, so it matters only when something
	// is badly wrong.
	DefaultWithin = 30 * time.Second
	// reapWithin bounds the wait for a process that was sent SIGKILL.
	reapWithin = 10 * time.Second
)

// Cmd says what to start: a binary that logs the JSON line
// {"msg":"listening","addr":"127.0.0.1:PORT"} and then answers GET /readyz.
type Cmd struct {
	Path   string        // the binary
	Args   []string      // its arguments, without the program name
	Env    []string      // NAME=value added to Environ's clean environment
	Dir    string        // the working directory; "" for the caller's
	Log    io.Writer     // every output line as it comes, stdout's prefixed "stdout: "; nil keeps only the tail
	Within time.Duration // bound for logging the address and answering /readyz; 0 for DefaultWithin
}

// Process is one run of a binary started by Start or Instance.Start.
type Process struct {
	number int
	cmd    *exec.Cmd
	addr   string
	out    *output
	done   chan struct{} // closed once the process has exited and its output is drained
	state  *os.ProcessState

	stopOnce sync.Once
	stopErr  error
}

// Start starts c and returns once the process has logged that it listens on
// 127.0.0.1 and GET /readyz has answered 200, all within c.Within. ctx
// bounds only the start, not the life of the process. On an error after the
// binary started, the process is returned too, already killed, so that its
// Tail and Exit can explain what went wrong.
func Start(ctx context.Context, c Cmd) (*Process, error) {
	return start(ctx, c, 0)
}

// Launch is the first half of Start: it returns once the process has logged
// that it listens, for a caller that times the rest of the start itself and
// then calls Ready.
func Launch(ctx context.Context, c Cmd) (*Process, error) {
	return launch(ctx, c, 0, c.within())
}

func (c Cmd) within() time.Duration {
	if c.Within <= 0 {
		return DefaultWithin
	}
	return c.Within
}

func start(ctx context.Context, c Cmd, number int) (*Process, error) {
	deadline := time.Now().Add(c.within())
	p, err := launch(ctx, c, number, c.within())
	if err != nil {
		return p, err
	}
	if err := p.Ready(ctx, time.Until(deadline).Round(time.Millisecond)); err != nil {
		_ = p.Kill()
		return p, err
	}
	return p, nil
}

func launch(ctx context.Context, c Cmd, number int, within time.Duration) (*Process, error) {
	out := newOutput(c.Log)
	stdout, stderr := out.stream("stdout: "), out.stream("")
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = Environ(c.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Should the binary ever leave a child holding its pipes, Wait still returns.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	p := &Process{number: number, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		stdout.flush()
		stderr.flush()
		p.state = cmd.ProcessState
		close(p.done)
	}()

	timer := time.NewTimer(within)
	defer timer.Stop()
	var err error
	select {
	case got := <-out.found:
		p.addr, err = got.addr, got.err
	case <-p.done:
		return p, fmt.Errorf("exited (%s) before logging {\"msg\":\"listening\",\"addr\":...}", p.Exit())
	case <-timer.C:
		err = fmt.Errorf("logged no {\"msg\":\"listening\",\"addr\":...} line within %v", within)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		_ = p.Kill()
		return p, err
	}
	return p, nil
}

// Ready asks for GET /readyz until it answers 200, and fails when the
// process exits, ctx ends or within passes first.
func (p *Process) Ready(ctx context.Context, within time.Duration) error {
	reqCtx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	// No keep-alive: an idle connection left behind would make the server's
	// graceful shutdown wait for it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	last := "no answer"
	err := Eventually(ctx, within, func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("exited (%s) while waiting for GET /readyz", p.Exit())
		}
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, p.URL()+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && !p.Exited() {
		return fmt.Errorf("GET /readyz not 200: %w (last: %s)", err, last)
	}
	return err
}

// Pid is the process id, for reading /proc.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Number is which run of its Instance this is, from 1; 0 for a process of Start.
func (p *Process) Number() int { return p.number }

// Addr is the address the process said it listens on: 127.0.0.1:PORT.
func (p *Process) Addr() string { return p.addr }

// URL is http://Addr.
func (p *Process) URL() string { return "http://" + p.addr }

// Kill sends SIGKILL and waits until the process is reaped: the crash that
// nothing in-process can imitate. It is nil for a process already gone.
func (p *Process) Kill() error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	if !p.Wait(reapWithin) {
		return fmt.Errorf("still not reaped %v after SIGKILL", reapWithin)
	}
	return nil
}

// Stop ends the process with SIGTERM, and with SIGKILL when it has not
// exited within that long. It is nil only when the process exited with
// status 0 after the SIGTERM; a process that had already exited is an
// error too. Later calls return what the first one did.
func (p *Process) Stop(within time.Duration) error {
	p.stopOnce.Do(func() { p.stopErr = p.terminate(within) })
	return p.stopErr
}

func (p *Process) terminate(within time.Duration) error {
	if p.Exited() {
		return fmt.Errorf("had exited before the stop (%s)", p.Exit())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = p.Kill()
		return fmt.Errorf("SIGTERM: %w; killed", err)
	}
	if !p.Wait(within) {
		_ = p.Kill()
		return fmt.Errorf("still running %v after SIGTERM; killed", within)
	}
	if !p.state.Success() {
		return fmt.Errorf("%s after SIGTERM", p.state)
	}
	return nil
}

// Wait waits up to within for the process to exit and reports whether it has.
func (p *Process) Wait(within time.Duration) bool {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Exited reports whether the process has exited and its output is drained.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Exit says how the process ended, for messages: "exit status 1",
// "signal: killed", or "still running".
func (p *Process) Exit() string {
	if !p.Exited() {
		return "still running"
	}
	return p.state.String()
}

// ExitCode is the exit status, or -1 while the process runs or when a
// signal ended it.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.state.ExitCode()
}

// ExitSignal is the signal that ended the process, or 0 while it runs or
// when it exited by itself.
func (p *Process) ExitSignal() syscall.Signal {
	if !p.Exited() {
		return 0
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// Tail is the last n lines (at most TailLines) of the process's output,
// stdout's prefixed "stdout: ".
func (p *Process) Tail(n int) string { return p.out.tail(n) }

// Environ is this process's environment without any HANDOFF_* variable,
// plus extra. Those variables override flags: a HANDOFF_ADDR must not move
// a child off 127.0.0.1, nor HANDOFF_DATA onto someone's real data folder,
// nor a HANDOFF_FAULT or HANDOFF_CONFIG change what runs.
func Environ(extra ...string) []string {
	return environ(os.Environ(), extra...)
}

func environ(base []string, extra ...string) []string {
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		if !strings.HasPrefix(kv, "HANDOFF_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
