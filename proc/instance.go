package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Instance is one handoff installation: a folder holding the data folder and
// the config file, which outlive any single run, so that a caller can kill a
// run and start another on the same files. Set the fields before the first
// Start; the methods must not run concurrently.
type Instance struct {
	Binary string        // the handoff binary
	Dir    string        // the installation's folder, created if missing; every run works in it
	Config string        // YAML written to Dir/handoff.yaml and passed with --config; "" runs the demo
	Env    []string      // NAME=value for every run, added to Environ's clean environment
	Log    io.Writer     // every run's output, after a "---- run N" line; nil keeps only each run's tail
	Within time.Duration // bound for each start; 0 for DefaultWithin

	runs []*Process
}

// Data is the data folder, Dir/data.
func (i *Instance) Data() string { return filepath.Join(i.Dir, "data") }

// ConfigPath is the config file, Dir/handoff.yaml, or "" without a Config.
func (i *Instance) ConfigPath() string {
	if i.Config == "" {
		return ""
	}
	return filepath.Join(i.Dir, "handoff.yaml")
}

// Start runs `handoff serve` on the instance's files, with env added for
// this run only, and returns once it listens on 127.0.0.1 and GET /readyz
// answers 200; starting again after a run has exited is a restart. ctx
// bounds only the start. On an error after the binary started, the run is
// returned too, already killed, for its Tail.
func (i *Instance) Start(ctx context.Context, env ...string) (*Process, error) {
	if p := i.Current(); p != nil && !p.Exited() {
		return nil, fmt.Errorf("run %d is still running", p.number)
	}
	if err := os.MkdirAll(i.Dir, 0o700); err != nil {
		return nil, err
	}
	args := []string{"serve", "--data", i.Data(), "--addr", "127.0.0.1:0"}
	if cfg := i.ConfigPath(); cfg != "" {
		if err := os.WriteFile(cfg, []byte(i.Config), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--config", cfg)
	}
	n := len(i.runs) + 1
	if i.Log != nil {
		fmt.Fprintf(i.Log, "---- run %d: %s %s %s\n", n, i.Binary, strings.Join(args, " "), strings.Join(env, " "))
	}
	c := Cmd{Path: i.Binary, Args: args, Env: append(slices.Clone(i.Env), env...), Dir: i.Dir, Log: i.Log, Within: i.Within}
	p, err := start(ctx, c, n)
	if p != nil {
		i.runs = append(i.runs, p)
	}
	if err != nil {
		return p, fmt.Errorf("run %d: %w", n, err)
	}
	return p, nil
}

// Current is the most recently started run; nil before the first.
func (i *Instance) Current() *Process {
	if len(i.runs) == 0 {
		return nil
	}
	return i.runs[len(i.runs)-1]
}

// Runs is every run so far, oldest first.
func (i *Instance) Runs() []*Process { return slices.Clone(i.runs) }
