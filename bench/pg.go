package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store/engine/pgengine/pgserver"
)

// The pg mode: ingest of the real binary on PostgreSQL beside River on
// PostgreSQL, on one private server, with the same webhook and load.
//
//	go run ./bench pg [-c 64] [-n 20000] [-rounds 3] [-procs 1,3]
//
// One cluster (pgserver, fsync and synchronous_commit on) serves every
// target of the run; each target of each round gets a database of its
// own, created empty. Each round runs, in rotated order: handoff serve on
// its database with HANDOFF_DATABASE_URL, as one process and (-procs 3) as
// three processes behind a round-robin reverse proxy the bench runs
// in-process; and River (bench/river, its own module, built once per
// run). After each run the bench counts, through pgx, that every
// acknowledged event is in the database exactly once. With several
// processes it then SIGKILLs the one that leads the scheduled work and
// times until another logs that it leads (-failover).

const (
	targetRiver = "river"
	// pgTargetP99 and pgTargetRatio are issue 33's targets at 64
	// connections.
	pgTargetP99   = 100 * time.Millisecond
	pgTargetRatio = 1.5
	pgTargetConns = 64
)

type pgConfig struct {
	n, c, size, rounds, warmup int
	procs                      []int
	bin, riverBin, repo, dir   string
	river                      bool
	drafting                   bool
	riverWorkers               int
	sharedBuffers              string
	flushDelay                 time.Duration
	keep                       bool
	failover                   bool
	proxyAll                   bool
	timeout                    time.Duration
}

func parsePGFlags(args []string) (pgConfig, error) {
	var cfg pgConfig
	var procs string
	fs := flag.NewFlagSet("bench pg", flag.ContinueOnError)
	fs.IntVar(&cfg.n, "n", 20000, "unique events per measured run")
	fs.IntVar(&cfg.c, "c", 64, "concurrent keep-alive connections")
	fs.IntVar(&cfg.size, "size", 512, "request body size in bytes")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds; each runs every target once (rotated order) and the summary takes medians")
	fs.IntVar(&cfg.warmup, "warmup", 500, "unmeasured requests (separate ids) sent to each target before measuring")
	fs.StringVar(&procs, "procs", "1,3", "comma-separated handoff process counts, each a target on one database (more than 1: behind the bench's round-robin proxy)")
	fs.BoolVar(&cfg.river, "river", true, "run the River target (builds bench/river, which needs River's modules)")
	fs.BoolVar(&cfg.drafting, "drafting", true, "let the targets draft during the run (handoff's demo, 10 s after each message; River's workers at once); false measures ingest alone: the demo channel's coalesce is 1h and River inserts only")
	fs.IntVar(&cfg.riverWorkers, "river-workers", 100, "River workers (MaxWorkers of its default queue)")
	fs.StringVar(&cfg.bin, "bin", "", "prebuilt handoff binary (default: go build the repository)")
	fs.StringVar(&cfg.riverBin, "river-bin", "", "prebuilt River target (default: go build in bench/river)")
	fs.StringVar(&cfg.repo, "repo", "", "repository root to build from (default: walk up from the working directory to go.mod)")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the temporary directories, the PostgreSQL cluster's included: a short path on the disk to measure, that the postgres user can reach when the bench runs as root (default: $TMPDIR)")
	fs.StringVar(&cfg.sharedBuffers, "shared-buffers", "128MB", "the cluster's shared_buffers")
	fs.DurationVar(&cfg.flushDelay, "flush-delay", 0, "stand in for a slower disk than this one: every WAL flush of the cluster waits this long first (commit_delay, commit_siblings=0), as a flush to a network volume takes 1-5 ms; 0 measures the disk as it is")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directories (child logs); the cluster is always removed")
	fs.BoolVar(&cfg.proxyAll, "proxy-all", false, "put the bench's round-robin proxy in front of one handoff process too, so that every handoff target pays its CPU on this machine's cores (default: one process is measured directly)")
	fs.BoolVar(&cfg.failover, "failover", true, "with more than one process, SIGKILL the leader after the measured run and time until another logs that it leads (about 6 s a round)")
	fs.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "upper bound for the whole run")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench pg [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.procs, err = intList("-procs", procs, 1, 16); err != nil {
		return cfg, err
	}
	slices.Sort(cfg.procs)
	cfg.procs = slices.Compact(cfg.procs)
	switch {
	case cfg.n < 1 || cfg.n > maxSeq:
		return cfg, fmt.Errorf("-n must be between 1 and %d", maxSeq)
	case cfg.warmup < 0 || cfg.warmup > maxSeq:
		return cfg, fmt.Errorf("-warmup must be between 0 and %d", maxSeq)
	case cfg.flushDelay < 0 || cfg.flushDelay > 100*time.Millisecond:
		// commit_delay's own bounds: 0 to 100,000 µs.
		return cfg, errors.New("-flush-delay must be between 0 and 100ms")
	case cfg.c < 1 || cfg.c > 150:
		// The cluster allows 200 connections; River's pool is -c plus 16.
		return cfg, errors.New("-c must be between 1 and 150")
	case cfg.rounds < 1 || cfg.rounds > maxRound:
		return cfg, fmt.Errorf("-rounds must be between 1 and %d", maxRound)
	case cfg.size < minBodySize || cfg.size > maxBodySize:
		return cfg, fmt.Errorf("-size must be between %d and %d bytes", minBodySize, maxBodySize)
	case cfg.riverWorkers < 1:
		return cfg, errors.New("-river-workers must be positive")
	case cfg.timeout <= 0:
		return cfg, errors.New("-timeout must be positive")
	}
	return cfg, nil
}

// handoffTarget names the target of k handoff processes.
func handoffTarget(k int) string {
	if k == 1 {
		return targetHandoff
	}
	return fmt.Sprintf("handoff-%dp", k)
}

// pgRun is one target's measured run in one round.
type pgRun struct {
	s     stats
	cpu   float64 // the target's processes' CPU seconds over the run, -1: unknown
	pgCPU float64 // the cluster's CPU seconds over the run, -1: unknown
	// benchCPU is the bench's own CPU seconds over the run: the load it
	// sends and, before several processes (or -proxy-all), its proxy;
	// -1: unknown.
	benchCPU float64
	events   int // accepted in the measured run
	elapsed  time.Duration
	drafted  int // drafts made (River: jobs completed) by the end of the run, -1: unknown
	// writes is how many write transactions the cluster began over the
	// measured run (transaction ids it gave out), -1: unknown.
	writes int64
	// failover is the time from the leader's SIGKILL to another process's
	// "this server leads" line, lease the lease that line names; 0: not
	// measured (one process, River, -failover=false).
	failover, lease time.Duration
}

// writesPerEvent is the run's write transactions per accepted event,
// "?" when unknown: below 1 when commits carry several events.
func (r pgRun) writesPerEvent() string {
	if r.writes < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", float64(r.writes)/float64(max(r.events, 1)))
}

// ceiling is the events/s that several processes (runs many) could reach
// on this machine's cores at best, were each event to cost them and
// PostgreSQL no more CPU than it costs one process (runs one), with the
// bench's own CPU as it was beside them (the load, and the proxy that
// one process measured directly does without): the cores over that sum,
// from the medians. 0 when a CPU is unknown.
func ceiling(one, many []pgRun) float64 {
	per := func(runs []pgRun, f func(pgRun) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
			if xs[i] < 0 {
				return -1
			}
		}
		return median(xs)
	}
	if len(one) == 0 || len(many) == 0 {
		return 0
	}
	cpu := per(one, func(r pgRun) float64 { return r.cpuPerEvent(r.cpu) })
	pg := per(one, func(r pgRun) float64 { return r.cpuPerEvent(r.pgCPU) })
	bench := per(many, func(r pgRun) float64 { return r.cpuPerEvent(r.benchCPU) })
	if cpu < 0 || pg < 0 || bench < 0 || cpu+pg+bench == 0 {
		return 0
	}
	return float64(runtime.NumCPU()) * 1e6 / (cpu + pg + bench)
}

func pickRates(runs []pgRun) []float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = r.s.rate
	}
	return xs
}

// busy is the share of the machine's cores the target, PostgreSQL and
// the bench used over the run, -1 when one is unknown: near 1, the run
// was bound by CPU, and events/s is the cores over the CPU an event costs.
func (r pgRun) busy() float64 {
	if r.cpu < 0 || r.pgCPU < 0 || r.benchCPU < 0 || r.elapsed <= 0 {
		return -1
	}
	return (r.cpu + r.pgCPU + r.benchCPU) / r.elapsed.Seconds() / float64(runtime.NumCPU())
}

func (r pgRun) cpuPerEvent(cpu float64) float64 {
	if cpu < 0 {
		return -1
	}
	return cpu * 1e6 / float64(max(r.events, 1))
}

func pgBench(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parsePGFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	parent, done, err := scratch(cfg.dir, "handoff-pg-bench-", cfg.keep, out)
	if err != nil {
		return err
	}
	defer done()
	printHost(out, parent)

	bin, err := handoffBinary(ctx, config{bin: cfg.bin, repo: cfg.repo}, parent, out)
	if err != nil {
		return err
	}
	riverBin := ""
	if cfg.river {
		if riverBin, err = riverBinary(ctx, cfg, parent, out); err != nil {
			return err
		}
	}
	tpl, err := newBodyTemplate(cfg.size)
	if err != nil {
		return err
	}

	settings := []string{"shared_buffers=" + cfg.sharedBuffers}
	if cfg.flushDelay > 0 {
		settings = append(settings, fmt.Sprintf("commit_delay=%d", cfg.flushDelay.Microseconds()), "commit_siblings=0")
	}
	srv, err := pgserver.Start(ctx, pgserver.Options{Dir: cfg.dir, Settings: settings})
	if err != nil {
		return fmt.Errorf("starting PostgreSQL: %w", err)
	}
	defer srv.Stop()
	admin, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	var version string
	if err := admin.QueryRow(ctx, "show server_version").Scan(&version); err != nil {
		return err
	}
	delay := ""
	if cfg.flushDelay > 0 {
		delay = fmt.Sprintf(", every WAL flush delayed %v (commit_delay: a slower disk)", cfg.flushDelay)
	}
	fmt.Fprintf(out, "PostgreSQL %s in %s: shared_buffers=%s, fsync=on, synchronous_commit=on%s\n", version, srv.Dir, cfg.sharedBuffers, delay)

	var targets []string
	procsOf := map[string]int{}
	for _, k := range cfg.procs {
		targets = append(targets, handoffTarget(k))
		procsOf[handoffTarget(k)] = k
	}
	if cfg.river {
		targets = append(targets, targetRiver)
	}
	drafting := "on (handoff's demo 10 s after each message, River's workers at once)"
	handoffCfg := ""
	if !cfg.drafting {
		drafting = "off (the demo channel's coalesce 1h, River insert-only): ingest alone"
		handoffCfg = filepath.Join(parent, "handoff.yaml")
		if err := os.WriteFile(handoffCfg, []byte(pgConfigFile()), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "load: %s unique events per run, %d connections, %d-byte bodies, %d warm-up requests, %d rounds, targets %s; drafting %s\n",
		thousands(int64(cfg.n)), cfg.c, cfg.size, cfg.warmup, cfg.rounds, strings.Join(targets, ", "), drafting)
	if cfg.proxyAll {
		fmt.Fprintln(out, "proxy: every handoff target, one process too, behind the bench's round-robin proxy (-proxy-all)")
	}

	all := map[string][]pgRun{}
	failed := map[string]string{} // a target that could not start → why
	for round := 1; round <= cfg.rounds; round++ {
		order := slices.Clone(targets)
		k := (round - 1) % len(order)
		order = append(order[k:], order[:k]...)
		fmt.Fprintf(out, "\nround %d/%d (order: %s; load average %s)\n", round, cfg.rounds, strings.Join(order, ", "), loadAverage())
		for _, target := range order {
			if failed[target] != "" {
				continue
			}
			dbname := fmt.Sprintf("r%d_%s", round, strings.ReplaceAll(target, "-", "_"))
			if _, err := admin.Exec(ctx, "create database "+pgx.Identifier{dbname}.Sanitize()); err != nil {
				return fmt.Errorf("round %d, %s: %w", round, target, err)
			}
			dir := filepath.Join(parent, fmt.Sprintf("round-%d", round), target)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			url := srv.URLFor(dbname)
			var argvs [][]string
			var env []string
			if target == targetRiver {
				workers := cfg.riverWorkers
				if !cfg.drafting {
					workers = 0
				}
				argvs = [][]string{{riverBin, "-database-url", url, "-conns", strconv.Itoa(cfg.c + 16), "-workers", strconv.Itoa(workers)}}
			} else {
				env = []string{"HANDOFF_DATABASE_URL=" + url}
				for i := range procsOf[target] {
					data := filepath.Join(dir, fmt.Sprintf("p%d", i+1), "data")
					argv := []string{bin, "serve", "--data", data, "--addr", "127.0.0.1:0"}
					if handoffCfg != "" {
						argv = append(argv, "--config", handoffCfg)
					}
					argvs = append(argvs, argv)
				}
			}
			r, err := pgMeasure(ctx, cfg, tpl, target, argvs, env, dir, srv.Dir, url, round)
			var ns *notStarted
			if errors.As(err, &ns) && len(argvs) > 1 {
				// A process beside the first refused the database: say why
				// once, and leave the target out of the later rounds.
				failed[target] = err.Error()
				fmt.Fprintf(out, "!!! %s could not start, left out of this run: %v\n", target, err)
				if _, err := admin.Exec(ctx, "drop database "+pgx.Identifier{dbname}.Sanitize()+" with (force)"); err != nil {
					return fmt.Errorf("round %d, %s: %w", round, target, err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, target, err)
			}
			if err := countStored(ctx, url, target, tpl, cfg, round, r.events); err != nil {
				return fmt.Errorf("round %d, %s: %w", round, target, err)
			}
			// Dropped once counted, so that no autovacuum of an earlier
			// run's tables runs beside a later one.
			if _, err := admin.Exec(ctx, "drop database "+pgx.Identifier{dbname}.Sanitize()+" with (force)"); err != nil {
				return fmt.Errorf("round %d, %s: %w", round, target, err)
			}
			all[target] = append(all[target], r)
			moved := ""
			if r.failover > 0 {
				moved = fmt.Sprintf("; leader SIGKILLed after it, another led %.2fs later (lease %v)", r.failover.Seconds(), r.lease)
			}
			fmt.Fprintf(out, "  %-11s %7s/s (%.1fs)  p50 %-7s p99 %-7s max %-7s  CPU %s µs/event, PostgreSQL %s µs/event, bench %s µs/event, cores %s busy, %s write transactions/event, %s drafted meanwhile  (%s events stored once each%s)\n",
				target, thousands(int64(r.s.rate)), r.elapsed.Seconds(), ms(r.s.p50), ms(r.s.p99), ms(r.s.max),
				cpuText(r.cpuPerEvent(r.cpu)), cpuText(r.cpuPerEvent(r.pgCPU)), cpuText(r.cpuPerEvent(r.benchCPU)), busyText(r.busy()), r.writesPerEvent(), thousands(int64(r.drafted)), thousands(int64(cfg.warmup+1+r.events)), moved)
		}
	}
	for _, t := range targets {
		if failed[t] != "" {
			delete(all, t)
		}
	}
	printPGSummary(out, cfg, targets, all, failed)
	return nil
}

// loadAverage is the 1-minute load average, "?" when /proc does not say:
// on a shared machine it tells a round with neighbours from one without.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// pgConfigFile is handoff's config for -drafting=false: the built-in demo
// channel as config.Default declares it, with a quiet period of an hour
// (the longest), so no draft is due during the run.
func pgConfigFile() string {
	return "channels:\n  - name: demo\n    fields: {message_id: /id, conversation_id: /conversation_id}\n    provider: sandbox\n    coalesce: 1h\n"
}

func busyText(b float64) string {
	if b < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*b)
}

func cpuText(us float64) string {
	if us < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f", us)
}

// riverBinary returns -river-bin, or builds bench/river into dir.
func riverBinary(ctx context.Context, cfg pgConfig, dir string, out io.Writer) (string, error) {
	if cfg.riverBin != "" {
		return filepath.Abs(cfg.riverBin)
	}
	root, err := repoRoot(cfg.repo, "-river-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "river")
	fmt.Fprintf(out, "building the River target from %s\n", filepath.Join(root, "bench", "river"))
	if err := proc.Build(ctx, filepath.Join(root, "bench", "river"), bin); err != nil {
		return "", fmt.Errorf("the River target: %w", err)
	}
	return bin, nil
}

// notStarted is a process of a target that did not start: its log says
// why (a second handoff on one database refused it before several
// servers could share one).
type notStarted struct {
	which string
	err   error
}

func (e *notStarted) Error() string { return e.which + ": " + e.err.Error() }
func (e *notStarted) Unwrap() error { return e.err }

// pgMeasure starts the target's processes (one after the other, so the
// first runs the migrations), puts the bench's round-robin proxy in front
// of several, warms up, checks dedup, loads it and stops it.
func pgMeasure(ctx context.Context, cfg pgConfig, tpl bodyTemplate, target string, argvs [][]string, env []string, dir, clusterDir, dbURL string, round int) (pgRun, error) {
	var r pgRun
	var children []*child
	defer func() {
		for _, ch := range children {
			ch.stop()
		}
	}()
	for i, argv := range argvs {
		name := target
		if len(argvs) > 1 {
			name = fmt.Sprintf("%s.%d", target, i+1)
		}
		pdir := filepath.Join(dir, fmt.Sprintf("p%d", i+1))
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return r, err
		}
		ch, err := startChild(ctx, name, argv, pdir, env...)
		if err == nil {
			children = append(children, ch)
			err = ch.Ready(ctx, startupTimeout)
			if err != nil {
				err = fmt.Errorf("%w%s", err, ch.logTail())
			}
		}
		if err != nil {
			return r, &notStarted{which: fmt.Sprintf("process %d of %d", i+1, len(argvs)), err: err}
		}
	}
	addr := children[0].addr
	if len(children) > 1 || cfg.proxyAll && target != targetRiver {
		p, err := startProxy(children, cfg.c)
		if err != nil {
			return r, err
		}
		defer p.Close()
		addr = p.Addr().String()
	}
	url := "http://" + addr + "/hooks/" + demoChannel
	client := newClient(cfg.c)
	defer client.CloseIdleConnections()
	if cfg.warmup > 0 {
		w := runLoad(ctx, client, url, tpl, 'w', round, cfg.warmup, cfg.c)
		if bad := w.failures(cfg.warmup); bad > 0 {
			return r, fmt.Errorf("warm-up: %d of %d requests failed, e.g. %s%s", bad, cfg.warmup, strings.Join(w.samples, "; "), tails(children))
		}
	}
	if err := checkDedup(ctx, client, url, demoChannel, tpl, round); err != nil {
		return r, fmt.Errorf("contract check: %w%s", err, tails(children))
	}
	x0 := writeXID(ctx, dbURL)
	cpu0, pg0, b0 := childrenCPU(children), clusterCPU(clusterDir), cpuSeconds(os.Getpid())
	res := runLoad(ctx, client, url, tpl, 'm', round, cfg.n, cfg.c)
	cpu1, pg1, b1 := childrenCPU(children), clusterCPU(clusterDir), cpuSeconds(os.Getpid())
	r.writes = -1
	if x1 := writeXID(ctx, dbURL); x0 >= 0 && x1 > x0 {
		r.writes = x1 - x0 - 1 // less writeXID's own
	}
	r.drafted = draftedSoFar(ctx, dbURL, target)
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("stopped after %d of %d requests: %w", res.sent, cfg.n, err)
	}
	r.s = summarize(target, res, cfg.n)
	r.events, r.elapsed = res.accepted(), res.elapsed
	r.cpu, r.pgCPU, r.benchCPU = -1, -1, -1
	if b0 >= 0 && b1 >= 0 {
		r.benchCPU = b1 - b0
	}
	if cpu0 >= 0 && cpu1 >= 0 {
		r.cpu = cpu1 - cpu0
	}
	if pg0 >= 0 && pg1 >= 0 {
		r.pgCPU = pg1 - pg0
	}
	if r.s.errors > 0 {
		return r, fmt.Errorf("%d of %d requests did not get 202 (%d transport errors, statuses %v), e.g. %s%s",
			r.s.errors, cfg.n, res.transportErrs, res.statuses, strings.Join(res.samples, "; "), tails(children))
	}
	client.CloseIdleConnections()
	var killed *child
	if cfg.failover && len(children) > 1 {
		f, err := measureFailover(ctx, children)
		if err != nil {
			return r, fmt.Errorf("leader failover: %w%s", err, tails(children))
		}
		r.failover, r.lease, killed = f.took, f.lease, f.killed
	}
	for _, ch := range children {
		if ch == killed {
			continue
		}
		if err := ch.stop(); err != nil {
			return r, fmt.Errorf("%w%s", err, ch.logTail())
		}
	}
	return r, nil
}

func tails(children []*child) string {
	var b strings.Builder
	for _, ch := range children {
		b.WriteString(ch.logTail())
	}
	return b.String()
}

func childrenCPU(children []*child) float64 {
	sum := 0.0
	for _, ch := range children {
		c := cpuSeconds(ch.Pid())
		if c < 0 {
			return -1
		}
		sum += c
	}
	return sum
}

// clusterCPU is the CPU seconds the cluster in dir has used: its
// postmaster's, the children it has reaped (cutime and cstime) and the
// live ones' (every backend, the WAL writer, the checkpointer). -1 when
// /proc does not say.
func clusterCPU(dir string) float64 {
	raw, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return -1
	}
	f := procStat(pm)
	if f == nil {
		return -1
	}
	total := 0.0
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		v, _ := strconv.ParseInt(f[i], 10, 64)
		total += float64(v)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c := procStat(pid)
		if c == nil || c[1] != strconv.Itoa(pm) { // field 4, the parent
			continue
		}
		ut, _ := strconv.ParseInt(c[11], 10, 64)
		st, _ := strconv.ParseInt(c[12], 10, 64)
		total += float64(ut + st)
	}
	return total / clockTicks
}

// procStat is /proc/pid/stat's fields from the third (state) on, nil when
// it cannot be read.
func procStat(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 15 {
		return nil
	}
	return f
}

// proxy is the round-robin reverse proxy in front of several processes.
type proxy struct {
	ln  net.Listener
	srv *http.Server
}

func (p *proxy) Addr() net.Addr { return p.ln.Addr() }
func (p *proxy) Close() error   { return p.srv.Close() }

// startProxy serves 127.0.0.1:0, sending each request to the next child
// in turn over up to c kept-alive connections to each.
func startProxy(children []*child, c int) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var next atomic.Uint64
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        c * len(children),
		MaxIdleConnsPerHost: c,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			ch := children[(next.Add(1)-1)%uint64(len(children))]
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = ch.addr
			pr.Out.Host = ch.addr
		},
		Transport: tr,
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &proxy{ln: ln, srv: srv}, nil
}

// writeXID is the cluster's next transaction id, taken by a transaction
// of its own: the difference of two is how many write transactions began
// in between (the cluster's, but one target runs at a time), -1 when it
// cannot be read.
func writeXID(ctx context.Context, url string) int64 {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return -1
	}
	defer conn.Close(context.Background())
	var x int64
	if err := conn.QueryRow(ctx, "select txid_current()").Scan(&x); err != nil {
		return -1
	}
	return x
}

// draftedSoFar counts, while the target runs, the drafts it has made:
// handoff's records in its drafts bucket, River's completed jobs. The
// demo channel waits 10 s after a lead's last message before drafting
// (its coalesce) while River works a job at once, so a run longer than
// that has handoff drafting beside its ingest. -1 when it cannot be read.
func draftedSoFar(ctx context.Context, url, target string) int {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return -1
	}
	defer conn.Close(context.Background())
	n := -1
	if target == targetRiver {
		err = conn.QueryRow(ctx, "select count(*) from river_job where state = 'completed'").Scan(&n)
	} else {
		var tbl string
		if err = conn.QueryRow(ctx, "select tbl from handoff_buckets where name = $1", []byte("drafts")).Scan(&tbl); err == nil {
			err = conn.QueryRow(ctx, "select count(*) from "+pgx.Identifier{tbl}.Sanitize()).Scan(&n)
		}
	}
	if err != nil {
		return -1
	}
	return n
}

// countStored proves, after the target stopped, that its database holds
// every acknowledged event exactly once, and nothing else: the warm-up's,
// the contract check's and the measured run's (accepted) ids.
func countStored(ctx context.Context, url, target string, tpl bodyTemplate, cfg pgConfig, round, accepted int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var ids []string
	for i := range cfg.warmup {
		ids = append(ids, eventID('w', round, i))
	}
	ids = append(ids, eventID('d', round, 0))
	for i := range accepted {
		ids = append(ids, eventID('m', round, i))
	}
	want := len(ids)
	var total, found, distinct int
	if target == targetRiver {
		err = conn.QueryRow(ctx, `select (select count(*) from river_job),
			count(*), count(distinct args->>'message_id') from river_job
			where kind = 'draft' and args->>'channel' = $1 and args->>'message_id' = any($2)`,
			demoChannel, ids).Scan(&total, &found, &distinct)
	} else {
		// handoff's tables (pgengine): a bucket's table is named in its
		// catalog; an event's key (channel:id) is its key in the index
		// idx_events_by_key, whose value is the event's record key.
		var events, byKey string
		q := "select tbl from handoff_buckets where name = $1"
		if err := conn.QueryRow(ctx, q, []byte("events")).Scan(&events); err != nil {
			return fmt.Errorf("the events table: %w", err)
		}
		if err := conn.QueryRow(ctx, q, []byte("idx_events_by_key")).Scan(&byKey); err != nil {
			return fmt.Errorf("the event key index: %w", err)
		}
		keys := make([][]byte, len(ids))
		for i, id := range ids {
			keys[i] = []byte(demoChannel + ":" + id)
		}
		e, k := pgx.Identifier{events}.Sanitize(), pgx.Identifier{byKey}.Sanitize()
		err = conn.QueryRow(ctx, `select (select count(*) from `+e+`), count(*), count(distinct e.key)
			from `+k+` i join `+e+` e on e.key = i.value where i.key = any($1)`, keys).Scan(&total, &found, &distinct)
	}
	if err != nil {
		return fmt.Errorf("counting the stored events: %w", err)
	}
	if total != want || found != want || distinct != want {
		return fmt.Errorf("the database holds %d events, %d of the %d acknowledged ones found (%d distinct): every acknowledged event must be there exactly once", total, found, want, distinct)
	}
	return nil
}

// printPGSummary prints each target's medians [spread], the ratios taken
// per round then their median, and the targets met or missed.
func printPGSummary(out io.Writer, cfg pgConfig, targets []string, all map[string][]pgRun, failed map[string]string) {
	fmt.Fprintf(out, "\nmedian [spread] of %d rounds, %d connections\n", cfg.rounds, cfg.c)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\taccepted/s\tp50 ms\tp99 ms\tCPU µs/event\tPostgreSQL CPU µs/event\tbench CPU µs/event\tcores busy %\twrite transactions/event")
	for _, t := range targets {
		runs := all[t]
		if len(runs) == 0 {
			fmt.Fprintf(tw, "%s\tnot measured: could not start\t\t\t\t\t\t\t\n", t)
			continue
		}
		pick := func(f func(pgRun) float64) []float64 {
			xs := make([]float64, len(runs))
			for i, r := range runs {
				xs[i] = f(r)
			}
			return xs
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t,
			spread(pick(func(r pgRun) float64 { return r.s.rate }), "%.0f"),
			spread(pick(func(r pgRun) float64 { return float64(r.s.p50) / 1e6 }), "%.1f"),
			spread(pick(func(r pgRun) float64 { return float64(r.s.p99) / 1e6 }), "%.1f"),
			spread(pick(func(r pgRun) float64 { return r.cpuPerEvent(r.cpu) }), "%.0f"),
			spread(pick(func(r pgRun) float64 { return r.cpuPerEvent(r.pgCPU) }), "%.0f"),
			spread(pick(func(r pgRun) float64 { return r.cpuPerEvent(r.benchCPU) }), "%.0f"),
			spread(pick(func(r pgRun) float64 { return 100 * r.busy() }), "%.0f"),
			spread(pick(func(r pgRun) float64 { return float64(r.writes) / float64(max(r.events, 1)) }), "%.2f"))
	}
	tw.Flush()

	statsOf := map[string][]stats{}
	for t, runs := range all {
		for _, r := range runs {
			statsOf[t] = append(statsOf[t], r.s)
		}
	}
	for _, t := range targets {
		if t != targetRiver {
			printRatio(out, statsOf, t, targetRiver)
		}
	}
	for _, k := range cfg.procs {
		if k > 1 {
			printRatio(out, statsOf, handoffTarget(k), targetHandoff)
		}
	}

	fmt.Fprintln(out, "\nissue 33's targets:")
	at := ""
	if cfg.c != pgTargetConns {
		at = fmt.Sprintf(" (measured at %d connections; the target is at %d)", cfg.c, pgTargetConns)
	}
	if h := statsOf[targetHandoff]; len(h) > 0 {
		if rv := statsOf[targetRiver]; len(rv) > 0 {
			x := ratioMedian(h, rv)
			fmt.Fprintf(out, "  handoff >= %.1f x River events/s: %.2f x, %s%s\n", pgTargetRatio, x, metText(x >= pgTargetRatio), at)
		} else {
			fmt.Fprintf(out, "  handoff >= %.1f x River events/s: not measured (no River run)\n", pgTargetRatio)
		}
		p99 := durMedian(pick99(h))
		fmt.Fprintf(out, "  handoff p99 < %s: %s, %s%s\n", ms(pgTargetP99), ms(p99), metText(p99 < pgTargetP99), at)
	} else {
		fmt.Fprintln(out, "  handoff on one process: not measured (-procs has no 1)")
	}
	for _, k := range cfg.procs {
		if k == 1 {
			continue
		}
		t := handoffTarget(k)
		switch {
		case failed[t] != "":
			fmt.Fprintf(out, "  %d processes >= 1 process: not measured: %s could not start (above)\n", k, t)
		case len(statsOf[targetHandoff]) == 0:
			fmt.Fprintf(out, "  %d processes >= 1 process: not measured (-procs has no 1)\n", k)
		default:
			x := ratioMedian(statsOf[t], statsOf[targetHandoff])
			fmt.Fprintf(out, "  %d processes >= 1 process: %.2f x, %s\n", k, x, metText(x >= 1))
			if b := ceiling(all[targetHandoff], all[t]); b > 0 {
				one := median(pickRates(all[targetHandoff]))
				fmt.Fprintf(out, "    at most %.0f/s (%.2f x) on these %d cores, were the %d processes to cost no more an event than 1:\n"+
					"    the cores over 1 process's CPU and PostgreSQL's an event, and the bench's with its proxy in front of %d\n",
					b, b/one, runtime.NumCPU(), k, k)
			}
		}
	}
	for _, k := range cfg.procs {
		if k == 1 {
			continue
		}
		t := handoffTarget(k)
		var took []float64
		lease := time.Duration(0)
		for _, r := range all[t] {
			if r.failover > 0 {
				took = append(took, float64(r.failover))
				lease = r.lease
			}
		}
		switch {
		case !cfg.failover:
			fmt.Fprintf(out, "  leader failover within 2 x lease, %d processes: not measured (-failover=false)\n", k)
		case len(took) == 0:
			fmt.Fprintf(out, "  leader failover within 2 x lease, %d processes: not measured\n", k)
		default:
			secs := make([]float64, len(took))
			for i, x := range took {
				secs[i] = x / 1e9
			}
			d := durMedian(took)
			fmt.Fprintf(out, "  leader failover within 2 x lease (%v), %d processes: %s s, %s\n",
				2*lease, k, spread(secs, "%.2f"), metText(lease > 0 && d <= 2*lease))
		}
	}
	fmt.Fprintln(out, "\nCPU: the target's processes' utime+stime over the measured run (the bench's proxy not included); PostgreSQL:")
	fmt.Fprintln(out, "the cluster's (postmaster, backends, WAL writer, checkpointer) over the same run; bench: this process's own (the")
	fmt.Fprintln(out, "load it sends, and its proxy where one stands in front). All per accepted event. Cores busy: the three together")
	fmt.Fprintln(out, "over the run's wall time and the machine's cores; near 100 %, events/s is the cores over their sum per event.")
}

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// ratioMedian is the median over rounds of a's rate over b's.
func ratioMedian(a, b []stats) float64 {
	var xs []float64
	for i := range min(len(a), len(b)) {
		xs = append(xs, a[i].rate/b[i].rate)
	}
	return median(xs)
}

func pick99(xs []stats) []float64 {
	out := make([]float64, len(xs))
	for i, s := range xs {
		out[i] = float64(s.p99)
	}
	return out
}

// leadMsg is the line a handoff server on a shared database logs when it
// becomes the one that runs the scheduled work (app.shareWork), with the
// lease (nanoseconds) within twice which the lead moves once it is gone.
const leadMsg = "this server leads: it runs the scheduled work"

// leadLine is one leadMsg line of a child's log.
type leadLine struct {
	at    time.Time
	lease time.Duration
}

// leadLines reads the leadMsg lines the child has logged so far, oldest
// first: its log file, where every line lands as the child writes it.
func leadLines(ch *child) ([]leadLine, error) {
	f, err := os.Open(ch.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []leadLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		b := sc.Bytes()
		i := bytes.IndexByte(b, '{')
		if i < 0 || !bytes.Contains(b, []byte(leadMsg)) {
			continue
		}
		var rec struct {
			Time  time.Time `json:"time"`
			Msg   string    `json:"msg"`
			Lease int64     `json:"lease"`
		}
		if json.Unmarshal(b[i:], &rec) != nil || rec.Msg != leadMsg {
			continue
		}
		out = append(out, leadLine{at: rec.Time, lease: time.Duration(rec.Lease)})
	}
	return out, sc.Err()
}

// failover is one measured move of the lead.
type failover struct {
	took   time.Duration // from the leader's SIGKILL to another's leadMsg line
	lease  time.Duration // the lease the killed leader's line named
	killed *child
}

// leaderWait bounds the wait for the first leader: the first process
// leads a lease after it took the lock, long before a measured run ends.
const leaderWait = 30 * time.Second

// measureFailover finds the leader of children (the one whose leadMsg
// line is the latest), SIGKILLs it and waits for another to log leadMsg:
// the time from the signal to that line's own time stamp (the children
// and the bench share the clock), so the pause between two reads of the
// logs does not count. The wait is bounded by 5 leases, at least
// leaderWait.
func measureFailover(ctx context.Context, children []*child) (failover, error) {
	var f failover
	counts := make([]int, len(children))
	leader := -1
	err := proc.Eventually(ctx, leaderWait, func() (bool, error) {
		leader = -1
		var last time.Time
		for i, ch := range children {
			ls, err := leadLines(ch)
			if err != nil {
				return false, err
			}
			counts[i] = len(ls)
			if n := len(ls); n > 0 && ls[n-1].at.After(last) {
				leader, last, f.lease = i, ls[n-1].at, ls[n-1].lease
			}
		}
		return leader >= 0, nil
	})
	if err != nil {
		return f, fmt.Errorf("no process logged %q: %w", leadMsg, err)
	}
	f.killed = children[leader]
	t0 := time.Now()
	if err := f.killed.Kill(); err != nil {
		return f, fmt.Errorf("%s: %w", f.killed.name, err)
	}
	var by *child
	err = proc.Eventually(ctx, max(leaderWait, 5*f.lease), func() (bool, error) {
		for i, ch := range children {
			if i == leader {
				continue
			}
			ls, err := leadLines(ch)
			if err != nil {
				return false, err
			}
			if len(ls) > counts[i] {
				f.took, by = ls[len(ls)-1].at.Sub(t0), ch
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return f, fmt.Errorf("no other process logged %q after %s was killed: %w", leadMsg, f.killed.name, err)
	}
	if f.took <= 0 {
		return f, fmt.Errorf("%s logged %q %v before %s was killed: the lead had moved already", by.name, leadMsg, -f.took, f.killed.name)
	}
	return f, nil
}
