package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/handoff/handoff/proc"
)

const (
	targetHandoff = "handoff"
	targetFloor   = "floor"
	// targetBase is handoff from -base-bin: the build compared with.
	targetBase = "base"
	targetBare = "bare"

	// demoChannel is the one channel of handoff's built-in demo config.
	demoChannel = "demo"
)

// measurement is one target's measured run in one round.
type measurement struct {
	stats    stats
	res      result
	shutdown error      // not nil when the target did not stop cleanly
	dbFiles  []fileSize // storing targets only: the data dir after the run
	events   int        // storing targets only: events the data dir holds
	dataErr  error      // storing targets only: the data dir could not be read
	logTail  string     // the child's last output, shown when the run failed
	// written is what the target wrote to storage during the measured run
	// (the write_bytes of /proc/PID/io: page-cache pages it dirtied), -1
	// when the system does not say.
	written int64
}

type fileSize struct {
	name string
	size int64
}

// repoRoot is repo, or else the repository the working folder is in; its
// error names the flag (prebuilt) that does without it.
func repoRoot(repo, prebuilt string) (string, error) {
	if repo != "" {
		return repo, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := proc.Root(wd)
	if err != nil {
		return "", fmt.Errorf("%w; pass -repo or %s", err, prebuilt)
	}
	return root, nil
}

// scratch makes a run's temporary folder in dir (empty: $TMPDIR); done,
// deferred, removes it, or with keep says where it was kept.
func scratch(dir, prefix string, keep bool, out io.Writer) (path string, done func(), err error) {
	path, err = os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return path, func() { fmt.Fprintf(out, "\nkept %s\n", path) }, nil
	}
	return path, func() { os.RemoveAll(path) }, nil
}

// bench runs every round and prints the tables. Children and temporary
// directories are cleaned up on every return path.
func bench(ctx context.Context, cfg config, out io.Writer) error {
	parent, done, err := scratch(cfg.dir, "handoff-bench-", cfg.keep, out)
	if err != nil {
		return err
	}
	defer done()
	printMachine(out, cfg, parent)

	bin, base := "", ""
	if slices.Contains(cfg.targets, targetHandoff) {
		if bin, err = handoffBinary(ctx, cfg, parent, out); err != nil {
			return err
		}
	}
	if cfg.baseBin != "" {
		if base, err = handoffBinary(ctx, config{bin: cfg.baseBin}, parent, out); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the bench binary for the bare and floor targets: %w", err)
	}
	tpl, err := newBodyTemplate(cfg.size)
	if err != nil {
		return err
	}

	all := map[string][]stats{}
	for round := 1; round <= cfg.rounds; round++ {
		// Rotating the order each round spreads drift (a warming disk, a
		// noisy neighbour, thermal throttling) over both targets.
		order := slices.Clone(cfg.targets)
		k := (round - 1) % len(order)
		order = append(order[k:], order[:k]...)

		runs := map[string]measurement{}
		for _, target := range order {
			dir := filepath.Join(parent, fmt.Sprintf("round-%d", round), target)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			var argv []string
			switch target {
			case targetHandoff:
				argv = []string{bin, "serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0"}
			case targetBase:
				argv = []string{base, "serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0"}
			case targetFloor:
				argv = []string{self, "-" + floorServeFlag, filepath.Join(dir, "addr"), "-" + floorDataFlag, filepath.Join(dir, "data")}
			case targetBare:
				argv = []string{self, "-" + bareServeFlag, filepath.Join(dir, "addr")}
			}
			m, err := measure(ctx, cfg, tpl, target, argv, dir, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, target, err)
			}
			runs[target] = m
		}

		fmt.Fprintf(out, "\nround %d/%d (order: %s)\n", round, cfg.rounds, strings.Join(order, ", "))
		var rows []stats
		for _, target := range cfg.targets {
			rows = append(rows, runs[target].stats)
			all[target] = append(all[target], runs[target].stats)
		}
		printTable(out, rows)
		invalid := false
		for _, target := range cfg.targets {
			m := runs[target]
			if stores(target) {
				printDataDir(out, target, m)
			}
			if m.shutdown != nil {
				fmt.Fprintf(out, "WARNING: %v\n", m.shutdown)
			}
			if m.stats.errors > 0 {
				invalid = true
				printFailure(out, target, m, cfg.n)
			}
		}
		if invalid {
			fmt.Fprintf(out, "\n!!! INVALID RUN: some requests failed; these numbers must not be used. !!!\n")
			return errInvalidRun
		}
	}
	printSummary(out, cfg, all)
	return nil
}

// measure starts one target, warms it up, checks it, loads it, and stops it.
func measure(ctx context.Context, cfg config, tpl bodyTemplate, target string, argv []string, dir string, round int) (measurement, error) {
	var m measurement
	ch, err := startChild(ctx, target, argv, dir)
	if err != nil {
		return m, err
	}
	defer ch.stop() // on every path; a no-op after the explicit stop below

	base := "http://" + ch.addr
	url := base + "/hooks/" + demoChannel
	client := newClient(cfg.c)
	defer client.CloseIdleConnections()

	if err := ch.Ready(ctx, startupTimeout); err != nil {
		return m, fmt.Errorf("%w%s", err, ch.logTail())
	}
	if cfg.warmup > 0 {
		// Warm-up opens the c connections and lets both runtimes size their
		// heaps, so the measured run compares steady states.
		w := runLoad(ctx, client, url, tpl, 'w', round, cfg.warmup, cfg.c)
		if bad := w.failures(cfg.warmup); bad > 0 {
			return m, fmt.Errorf("warm-up: %d of %d requests failed, e.g. %s%s", bad, cfg.warmup, strings.Join(w.samples, "; "), ch.logTail())
		}
	}
	if stores(target) {
		if err := checkDedup(ctx, client, url, demoChannel, tpl, round); err != nil {
			return m, fmt.Errorf("contract check: %w%s", err, ch.logTail())
		}
		m.events = cfg.warmup + 1 + cfg.n
	}

	before := ioWritten(ch.Pid())
	m.res = runLoad(ctx, client, url, tpl, 'm', round, cfg.n, cfg.c)
	m.written = -1
	if after := ioWritten(ch.Pid()); before >= 0 && after >= 0 {
		m.written = after - before
	}
	if err := ctx.Err(); err != nil {
		return m, fmt.Errorf("stopped after %d of %d requests: %w", m.res.sent, cfg.n, err)
	}
	m.stats = summarize(target, m.res, cfg.n)
	m.stats.pages = -1
	if m.written >= 0 && stores(target) {
		m.stats.pages = pagesPerEvent(m)
	}
	client.CloseIdleConnections()
	m.shutdown = ch.stop()
	if m.stats.errors > 0 {
		m.logTail = ch.logTail()
	}
	if stores(target) {
		// Read after the stop so the file is final.
		m.dbFiles, m.dataErr = dataFiles(filepath.Join(dir, "data"))
	}
	return m, nil
}

// stores says whether target keeps what it accepts: those must pass the
// dedup contract check, and their data dir is reported.
func stores(target string) bool { return target != targetBare }

// dataFiles lists the *.db files under dir, or every regular file when
// there is none, so the report still says where the bytes went if the
// store picks another name.
func dataFiles(dir string) ([]fileSize, error) {
	var dbs, all []fileSize
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		f := fileSize{name: rel, size: info.Size()}
		all = append(all, f)
		if strings.HasSuffix(rel, ".db") {
			dbs = append(dbs, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the data dir: %w", err)
	}
	if len(dbs) > 0 {
		return dbs, nil
	}
	return all, nil
}

// printDataDir reports the store's file size. bbolt grows its file ahead of
// use, in chunks (16 MiB by default), so size per event is an upper bound.
func printDataDir(out io.Writer, target string, m measurement) {
	switch {
	case m.dataErr != nil:
		fmt.Fprintf(out, "WARNING: %s data: %v\n", target, m.dataErr)
	case len(m.dbFiles) == 0:
		fmt.Fprintf(out, "WARNING: %s data: the data dir holds no files\n", target)
	}
	if m.written >= 0 && m.stats.rate > 0 {
		fmt.Fprintf(out, "%s wrote %s during the measured run: %.1f pages of 4 KiB per event\n",
			target, byteSize(m.written), pagesPerEvent(m))
	}
	for _, f := range m.dbFiles {
		fmt.Fprintf(out, "%s data: %s %s for %s events, warm-up included (<= %s/event; the file grows in steps)\n",
			target, f.name, byteSize(f.size), thousands(int64(m.events)), byteSize(f.size/int64(max(m.events, 1))))
	}
}

// pagesPerEvent is what m's target wrote to storage per accepted event,
// in 4 KiB pages (bbolt's page size here): every page a commit dirties,
// the freelist and meta pages included.
func pagesPerEvent(m measurement) float64 {
	return float64(m.written) / 4096 / float64(max(m.res.accepted(), 1))
}

// ioWritten is write_bytes of /proc/pid/io: the bytes process pid caused
// to be written to storage so far. -1 when it cannot be read.
func ioWritten(pid int) int64 { return ioField(pid, "write_bytes") }

func printFailure(out io.Writer, target string, m measurement, n int) {
	fmt.Fprintf(out, "\n!!! %s: %d of %d requests did not get 202 (%d transport errors; statuses %v)\n",
		target, m.stats.errors, n, m.res.transportErrs, m.res.statuses)
	for _, s := range m.res.samples {
		fmt.Fprintf(out, "    %s\n", s)
	}
	if m.logTail != "" {
		fmt.Fprintln(out, m.logTail)
	}
}

func printSummary(out io.Writer, cfg config, all map[string][]stats) {
	fmt.Fprintf(out, "\nmedian of %d rounds\n", cfg.rounds)
	var rows []stats
	for _, target := range cfg.targets {
		var rate, p50, p99, mx []float64
		s := stats{target: target}
		for _, r := range all[target] {
			rate = append(rate, r.rate)
			p50 = append(p50, float64(r.p50))
			p99 = append(p99, float64(r.p99))
			mx = append(mx, float64(r.max))
			s.errors += r.errors
		}
		s.rate = median(rate)
		s.p50, s.p99, s.max = durMedian(p50), durMedian(p99), durMedian(mx)
		rows = append(rows, s)
	}
	printTable(out, rows)
	for _, target := range cfg.targets {
		var pages []float64
		for _, r := range all[target] {
			if r.pages >= 0 {
				pages = append(pages, r.pages)
			}
		}
		if stores(target) && len(pages) > 0 {
			fmt.Fprintf(out, "%s: %.1f pages of 4 KiB written per event (median of %d rounds; /proc/PID/io write_bytes over the measured run)\n", target, median(pages), len(pages))
		}
	}

	printRatio(out, all, targetBase, targetFloor)
	printRatio(out, all, targetHandoff, targetBase)
	printRatio(out, all, targetHandoff, targetBare)
	printRatio(out, all, targetFloor, targetBare)
	printRatio(out, all, targetHandoff, targetFloor)
}

// printRatio prints a/b when both targets ran. Ratios are taken per round,
// between runs seconds apart, and then the median is taken, so one noisy
// round moves neither number much.
func printRatio(out io.Writer, all map[string][]stats, a, b string) {
	x, y := all[a], all[b]
	if len(x) == 0 || len(y) == 0 {
		return
	}
	var tput, lat50, lat99 []float64
	for i := range x {
		tput = append(tput, x[i].rate/y[i].rate)
		lat50 = append(lat50, float64(x[i].p50)/float64(y[i].p50))
		lat99 = append(lat99, float64(x[i].p99)/float64(y[i].p99))
	}
	fmt.Fprintf(out, "ratio %s/%s (median of %d rounds): throughput %.2f, p50 %.2fx, p99 %.2fx\n",
		a, b, len(x), median(tput), median(lat50), median(lat99))
}

func durMedian(xs []float64) time.Duration { return time.Duration(median(xs)) }

func printMachine(out io.Writer, cfg config, dir string) {
	fmt.Fprintf(out, "machine: %d CPUs, GOMAXPROCS %d, %s %s/%s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fstype := "unknown filesystem"
	if mounts, err := os.ReadFile("/proc/self/mounts"); err == nil {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			if t := fsType(string(mounts), real); t != "" {
				fstype = t
			}
		}
	}
	fmt.Fprintf(out, "temp dir: %s (%s)\n", dir, fstype)
	if fstype == "tmpfs" || fstype == "ramfs" {
		fmt.Fprintf(out, "WARNING: the data dir is in memory, where fsync costs nothing; use -dir on a real disk to measure durability.\n")
	}
	fmt.Fprintf(out, "load: %s unique events per run, %d connections, %d-byte bodies, %d warm-up requests, %d rounds, targets %s\n",
		thousands(int64(cfg.n)), cfg.c, cfg.size, cfg.warmup, cfg.rounds, strings.Join(cfg.targets, ", "))
}

// fsType returns the type of the filesystem holding path, given the text of
// /proc/self/mounts: the entry with the longest mount point that contains it.
func fsType(mounts, path string) string {
	best, bestLen := "", -1
	for line := range strings.Lines(mounts) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		// The kernel escapes spaces and such in mount points as octal.
		mp := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(f[1])
		inside := path == mp || mp == "/" || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")
		// A later entry for the same mount point shadows the earlier one.
		if inside && len(mp) >= bestLen {
			best, bestLen = f[2], len(mp)
		}
	}
	return best
}

// handoffBinary returns -bin, or builds the repository into dir.
func handoffBinary(ctx context.Context, cfg config, dir string, out io.Writer) (string, error) {
	if cfg.bin != "" {
		// Absolute, because the child runs in its own directory.
		bin, err := filepath.Abs(cfg.bin)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("-bin: %w", err)
		}
		return bin, nil
	}
	root, err := repoRoot(cfg.repo, "-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "handoff")
	fmt.Fprintf(out, "building handoff from %s\n", root)
	if err := proc.Build(ctx, root, bin); err != nil {
		return "", err
	}
	return bin, nil
}
