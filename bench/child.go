package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/handoff/handoff/proc"
)

const (
	startupTimeout = 30 * time.Second
	// stopGrace is how long a child gets to shut down after SIGTERM before
	// it is killed.
	stopGrace = 10 * time.Second
	// tailLines is how much of a child's output an error message quotes.
	tailLines = 10
)

// child is one target process, started through proc with its output in a
// log file in its own directory, and stopped with SIGTERM, then SIGKILL.
type child struct {
	*proc.Process
	name    string
	addr    string // 127.0.0.1:PORT, from its "listening" log line
	logPath string
	log     *os.File
}

// startChild starts argv in dir and returns once the child has logged the
// address it listens on; the caller then waits for Ready (which footprint
// times). Like the drill, the child gets none of the HANDOFF_ variables of
// the caller's shell (see proc.Environ): a HANDOFF_ADDR must not move the
// target off 127.0.0.1, nor a HANDOFF_FAULT change what is measured.
// env (NAME=value) is added, as HANDOFF_API_TOKEN for a mode that scrapes
// /metrics.
func startChild(ctx context.Context, name string, argv []string, dir string, env ...string) (*child, error) {
	logPath := filepath.Join(dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// The working directory is the child's own, so no stray config file in the
	// caller's directory is picked up.
	p, err := proc.Launch(ctx, proc.Cmd{Path: argv[0], Args: argv[1:], Dir: dir, Log: log, Env: env, Within: startupTimeout})
	if p == nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	ch := &child{Process: p, name: name, addr: p.Addr(), logPath: logPath, log: log}
	if err != nil {
		ch.stop()
		return nil, fmt.Errorf("%w%s", err, ch.logTail())
	}
	return ch, nil
}

// stop shuts the child down: SIGTERM, then SIGKILL after stopGrace. It is
// safe to call more than once; a nil error means a clean exit after SIGTERM.
func (ch *child) stop() error {
	err := ch.Stop(stopGrace)
	if ch.Exited() {
		ch.log.Close() // a second Close only says it was closed
	}
	if err != nil {
		return fmt.Errorf("%s: %w", ch.name, err)
	}
	return nil
}

// logTail returns the end of the child's output, for error messages.
func (ch *child) logTail() string {
	tail := ch.Tail(tailLines)
	if tail == "" {
		return ""
	}
	return fmt.Sprintf("\n--- end of %s ---\n%s", ch.logPath, tail)
}
