package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/handoff/handoff/proc"
)

// The bodies mode: disk and memory under large webhooks.
//
//	go run ./bench bodies -n 300 -size 1048576 -gc builtin,GOGC=100,GOMEMLIMIT=256MiB
//
// For each GC setting it starts the real binary on a fresh data folder,
// posts n webhooks of size bytes (c at a time) to the demo channel, waits
// until every draft job has run, and reports the file's size per webhook
// and the process's peak RSS (VmHWM: the high-water mark over its whole
// life, ingest and drafting included).

// bodiesToken is the API token the child accepts, for its /metrics.
const bodiesToken = "bench-bodies-token-not-a-secret-0123456789"

type bodiesConfig struct {
	n, size, c int
	gcs        []string
	bin, repo  string
	dir        string
	keep       bool
	timeout    time.Duration
}

func parseBodiesFlags(args []string) (bodiesConfig, error) {
	var cfg bodiesConfig
	var gcs string
	fs := flag.NewFlagSet("bench bodies", flag.ContinueOnError)
	fs.IntVar(&cfg.n, "n", 300, "webhooks per setting")
	fs.IntVar(&cfg.size, "size", 1<<20, "body size in bytes (at most the demo channel's max_body, 1 MiB)")
	fs.IntVar(&cfg.c, "c", 8, "concurrent connections")
	fs.StringVar(&gcs, "gc", "builtin,GOGC=100,GOMEMLIMIT=256MiB", "comma-separated GC settings: builtin (handoff's own), or NAME=value environment variables joined by +")
	fs.StringVar(&cfg.bin, "bin", "", "prebuilt handoff binary (default: go build the repository)")
	fs.StringVar(&cfg.repo, "repo", "", "repository root to build from")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the temporary directories (default: $TMPDIR)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directories")
	fs.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "upper bound for the whole run")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.n < 1 || cfg.n > maxSeq || cfg.c < 1 || cfg.c > 256 {
		return cfg, errors.New("-n must be 1 or more and -c between 1 and 256")
	}
	if cfg.size < minBodySize || cfg.size > maxBodySize {
		return cfg, fmt.Errorf("-size must be between %d and %d bytes", minBodySize, maxBodySize)
	}
	cfg.gcs = strings.Split(gcs, ",")
	return cfg, nil
}

type bodiesResult struct {
	gc       string
	accepted int
	ingest   time.Duration
	dbBytes  int64
	hwm, rss int64
}

func bodies(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseBodiesFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	parent, done, err := scratch(cfg.dir, "handoff-bodies-", cfg.keep, out)
	if err != nil {
		return err
	}
	defer done()
	bin, err := handoffBinary(ctx, config{bin: cfg.bin, repo: cfg.repo}, parent, out)
	if err != nil {
		return err
	}
	tpl, err := newBodyTemplate(cfg.size)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "bodies: %d webhooks of %d bytes, %d connections, settings %s\n", cfg.n, cfg.size, cfg.c, strings.Join(cfg.gcs, ", "))
	var results []bodiesResult
	for i, gc := range cfg.gcs {
		dir := filepath.Join(parent, fmt.Sprintf("run-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		r, err := bodiesRun(ctx, cfg, tpl, bin, dir, gc)
		if err != nil {
			return fmt.Errorf("%s: %w", gc, err)
		}
		results = append(results, r)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "gc\taccepted\tingest s\tdb MiB\tdb per webhook MiB\tpeak RSS MiB\tRSS after MiB\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.3f\t%.0f\t%.0f\t\n", r.gc, r.accepted, r.ingest.Seconds(),
			mib(r.dbBytes), mib(r.dbBytes)/float64(r.accepted), mib(r.hwm), mib(r.rss))
	}
	return tw.Flush()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func bodiesRun(ctx context.Context, cfg bodiesConfig, tpl bodyTemplate, bin, dir, gc string) (bodiesResult, error) {
	r := bodiesResult{gc: gc}
	env := []string{"HANDOFF_API_TOKEN=" + bodiesToken}
	if gc != "builtin" {
		env = append(env, strings.Split(gc, "+")...)
	}
	log, err := os.Create(filepath.Join(dir, "handoff.log"))
	if err != nil {
		return r, err
	}
	defer log.Close()
	p, err := proc.Launch(ctx, proc.Cmd{Path: bin, Args: []string{"serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0"},
		Dir: dir, Log: log, Env: env, Within: startupTimeout})
	if p == nil {
		return r, err
	}
	defer p.Stop(stopGrace)
	if err != nil {
		return r, err
	}
	if err := p.Ready(ctx, startupTimeout); err != nil {
		return r, err
	}
	base := "http://" + p.Addr()
	client := newClient(cfg.c)
	defer client.CloseIdleConnections()
	res := runLoad(ctx, client, base+"/hooks/"+demoChannel, tpl, 'm', 1, cfg.n, cfg.c)
	r.accepted, r.ingest = res.accepted(), res.elapsed
	if r.accepted == 0 {
		return r, fmt.Errorf("no webhook was accepted, e.g. %s", strings.Join(res.samples, "; "))
	}
	// A few timeouts on a loaded machine do not spoil the figures: they
	// are per accepted webhook, and the failures are reported.
	// Drafting reads each event back: wait until no draft job is left.
	open := 0.0
	if err := poll(ctx, "every draft job to finish", cfg.timeout, every(200*time.Millisecond), func() (bool, error) {
		var err error
		open, err = openDraftJobs(ctx, client, base, bodiesToken)
		return open == 0, err
	}); err != nil {
		return r, fmt.Errorf("%v draft jobs still open: %w", open, err)
	}
	mem, err := readMemory(p.Pid())
	if err != nil {
		return r, err
	}
	r.hwm, r.rss = mem.hwm, mem.rss
	client.CloseIdleConnections()
	if err := p.Stop(stopGrace); err != nil {
		return r, err
	}
	fi, err := os.Stat(filepath.Join(dir, "data", "handoff.db"))
	if err != nil {
		return r, err
	}
	r.dbBytes = fi.Size()
	return r, nil
}
