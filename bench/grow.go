package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store"
)

// The grow mode: does ingest stay as fast, and as cheap, as the file grows?
//
//	go run ./bench grow -sizes 0,50000,200000 -data /var/tmp/grow
//
// Each run sends the same burst to the real binary on a fresh file and on
// copies of files already holding 50k, 200k (1M) events, in rotated order
// every round, at 64 connections and at one, and prints the medians side
// by side: the rate and its ratio to the fresh file's in the same round,
// what the child wrote and spent in CPU per event, and the pages each
// commit dirtied.
//
// A pre-filled file is made once per size and kept under -data: the
// events go through the store's own ingest transaction (intake.RecordBatch,
// the webhook's write for a request of several messages) in large batches,
// with the bench's own bodies, then the real binary drafts every one of
// them, so a round's file is what a busy inbox's looks like (every event a
// lead with a draft waiting), not a queue of 200k jobs due at once.

const (
	// growFillFlag re-executes the bench binary as the fill: a contract
	// between the bench and its own child, kept out of -help like the
	// baselines' flags.
	growFillFlag       = "grow-fill"
	growFillEventsFlag = "grow-fill-events"
	growFillSizeFlag   = "grow-fill-size"

	// growFillBatch is how many events one fill transaction records.
	growFillBatch = 2000
	growFillDone  = "grow-fill.json"
	growToken     = "bench-grow-token-not-a-secret-0123456789ab"
	bboltPage     = 4096
	// growMaxAttempts is the demo channel's retry.max_attempts default.
	growMaxAttempts = 8
)

type growConfig struct {
	sizes           []int
	n, n1, c, size  int
	rounds, warmup  int
	data, bin, repo string
	dir             string
	conns           []int
	keep            bool
	duringCheck     bool // send the burst while the background page walk runs
	timeout         time.Duration
}

func parseGrowFlags(args []string) (growConfig, error) {
	var cfg growConfig
	var sizes, conns string
	fs := flag.NewFlagSet("bench grow", flag.ContinueOnError)
	fs.StringVar(&sizes, "sizes", "0,50000,200000", "comma-separated events already in the file (0: a fresh file, always run); 1000000 is allowed and slow to fill once")
	fs.StringVar(&conns, "c", "64,1", "comma-separated connection counts, each measured on every size")
	fs.IntVar(&cfg.n, "n", 20000, "events per measured burst at more than one connection")
	fs.IntVar(&cfg.n1, "n1", 2000, "events per measured burst at one connection (a commit each: 20,000 take minutes)")
	fs.IntVar(&cfg.size, "size", 512, "request body size in bytes (the fill's too)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds; the target order rotates and the summary takes medians")
	fs.IntVar(&cfg.warmup, "warmup", 500, "unmeasured requests sent before each burst")
	fs.StringVar(&cfg.data, "data", "", "folder that keeps the pre-filled files between runs (default: a temporary one, removed)")
	fs.StringVar(&cfg.bin, "bin", "", "prebuilt handoff binary (default: go build the repository)")
	fs.StringVar(&cfg.repo, "repo", "", "repository root to build from (default: walk up from the working directory to go.mod)")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the temporary directories, where each round copies its file (default: $TMPDIR; use a disk, not tmpfs)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory")
	fs.BoolVar(&cfg.duringCheck, "during-check", false, "send each burst at once, while a big file's background page walk still runs (as a client that starts sending at start-up does), instead of after it")
	fs.DurationVar(&cfg.timeout, "timeout", 3*time.Hour, "upper bound for the whole run, fills included")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench grow [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.sizes, err = intList("-sizes", sizes, 0, maxSeq); err != nil {
		return cfg, err
	}
	if !slices.Contains(cfg.sizes, 0) {
		cfg.sizes = append([]int{0}, cfg.sizes...) // the ratios need the fresh file
	}
	slices.Sort(cfg.sizes)
	cfg.sizes = slices.Compact(cfg.sizes)
	if cfg.conns, err = intList("-c", conns, 1, 4096); err != nil {
		return cfg, err
	}
	switch {
	case cfg.n < 1 || cfg.n1 < 1 || cfg.n > maxSeq || cfg.n1 > maxSeq:
		return cfg, fmt.Errorf("-n and -n1 must be between 1 and %d", maxSeq)
	case cfg.size < minBodySize || cfg.size > maxBodySize:
		return cfg, fmt.Errorf("-size must be between %d and %d bytes", minBodySize, maxBodySize)
	case cfg.rounds < 1 || cfg.rounds > maxRound:
		return cfg, fmt.Errorf("-rounds must be between 1 and %d", maxRound)
	case cfg.warmup < 0:
		return cfg, errors.New("-warmup must not be negative")
	case cfg.timeout <= 0:
		return cfg, errors.New("-timeout must be positive")
	}
	return cfg, nil
}

// intList parses "a,b,c", each between lo and hi.
func intList(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(strings.ReplaceAll(f, "_", "")))
		if err != nil || v < lo || v > hi {
			return nil, fmt.Errorf("%s: %q is not a whole number between %d and %d", name, f, lo, hi)
		}
		out = append(out, v)
	}
	return out, nil
}

// growRun is one measured burst.
type growRun struct {
	s       stats
	written int64 // write_bytes over the burst, -1: unknown
	// syscall is wchar over the burst: the bytes handed to write and
	// pwrite (bbolt's pages, and the HTTP answers' ~330 bytes each), -1:
	// unknown. write_bytes counts page-cache folios dirtied, and a 4 KiB
	// pwrite into a large folio (a page read back by a sequential reader:
	// the page check, a backup) counts the folio.
	syscall int64
	check   time.Duration // the background page check before the burst, 0: none
	cpu     float64       // the child's utime+stime over the burst, seconds; -1: unknown
	commits int64         // bbolt transactions committed over the burst (ingest and workers'), -1: unknown
	events  int           // accepted
}

func (r growRun) kibPerEvent() float64 {
	return float64(r.written) / 1024 / float64(max(r.events, 1))
}
func (r growRun) syscallKiBPerEvent() float64 {
	return float64(r.syscall) / 1024 / float64(max(r.events, 1))
}
func (r growRun) cpuPerEvent() float64 { return r.cpu * 1e6 / float64(max(r.events, 1)) }

// pagesPerCommit is what the commits handed to pwrite, in 4 KiB pages, per
// commit (wchar: the HTTP answers add about 0.08 page per event).
func (r growRun) pagesPerCommit() float64 {
	return float64(r.syscall) / bboltPage / float64(max(r.commits, 1))
}

func grow(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseGrowFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	parent, done, err := scratch(cfg.dir, "handoff-grow-", cfg.keep, out)
	if err != nil {
		return err
	}
	defer done()
	cache := cfg.data
	if cache == "" {
		cache = filepath.Join(parent, "fills")
	}
	if cache, err = filepath.Abs(cache); err != nil {
		return err
	}
	printHost(out, parent)
	bin, err := handoffBinary(ctx, config{bin: cfg.bin, repo: cfg.repo}, parent, out)
	if err != nil {
		return err
	}
	fills := map[int]string{} // size → the pre-filled handoff.db
	for _, n := range cfg.sizes {
		if n == 0 {
			continue
		}
		if fills[n], err = growFill(ctx, cfg, bin, cache, n, out); err != nil {
			return fmt.Errorf("fill of %s events: %w", thousands(int64(n)), err)
		}
	}
	tpl, err := newBodyTemplate(cfg.size)
	if err != nil {
		return err
	}

	all := map[int]map[int][]growRun{} // c → size → one run per round
	for _, c := range cfg.conns {
		all[c] = map[int][]growRun{}
		n := cfg.n
		if c == 1 {
			n = cfg.n1
		}
		fmt.Fprintf(out, "\n== %s, %s events a burst of %d bytes, %d rounds\n", nouns(c, "connection"), thousands(int64(n)), cfg.size, cfg.rounds)
		for round := 1; round <= cfg.rounds; round++ {
			order := slices.Clone(cfg.sizes)
			k := (round - 1) % len(order)
			order = append(order[k:], order[:k]...)
			for _, size := range order {
				dir := filepath.Join(parent, fmt.Sprintf("c%d-round-%d-%d", c, round, size))
				r, err := growMeasure(ctx, cfg, tpl, bin, fills[size], dir, round, n, c)
				if err != nil {
					return fmt.Errorf("c=%d, round %d, %s: %w", c, round, sizeName(size), err)
				}
				all[c][size] = append(all[c][size], r)
				check := ""
				if r.check > 0 {
					check = fmt.Sprintf(" (after the background page check, %.1fs)", r.check.Seconds())
				}
				fmt.Fprintf(out, "  round %d %-6s %s/s  p50 %s  p99 %s  %.2f KiB/event (%.2f by syscall)  %.0f µs CPU/event  %.1f pages/commit (%s commits)%s\n",
					round, sizeName(size), thousands(int64(math.Round(r.s.rate))), ms(r.s.p50), ms(r.s.p99),
					r.kibPerEvent(), r.syscallKiBPerEvent(), r.cpuPerEvent(), r.pagesPerCommit(), thousands(r.commits), check)
				if !cfg.keep {
					os.RemoveAll(dir)
				}
			}
		}
	}
	printGrowSummary(out, cfg, all)
	return nil
}

func sizeName(n int) string {
	switch {
	case n == 0:
		return "fresh"
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// growMeasure copies the pre-filled file src (none: a fresh file) into dir,
// starts the binary on it, warms it up, checks dedup, sends the burst,
// and stops it.
func growMeasure(ctx context.Context, cfg growConfig, tpl bodyTemplate, bin, src, dir string, round, n, c int) (growRun, error) {
	var r growRun
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return r, err
	}
	db := filepath.Join(data, store.FileName)
	if src != "" {
		if err := copyFile(src, db); err != nil {
			return r, err
		}
	}
	ch, err := startChild(ctx, targetHandoff, []string{bin, "serve", "--data", data, "--addr", "127.0.0.1:0"}, dir)
	if err != nil {
		return r, err
	}
	defer ch.stop()
	url := "http://" + ch.addr + "/hooks/" + demoChannel
	client := newClient(c)
	defer client.CloseIdleConnections()
	if err := ch.Ready(ctx, startupTimeout); err != nil {
		return r, fmt.Errorf("%w%s", err, ch.logTail())
	}
	if fi, err := os.Stat(db); err == nil && fi.Size() > 64<<20 && !cfg.duringCheck {
		// A file above the store's full-check limit (64 MiB) has its
		// pages walked in the background once the server is ready (app:
		// checkPagesInBackground): a start's cost, measured by footprint,
		// and not the ingest's, so the burst starts once it is done.
		if r.check, err = waitBackgroundCheck(ctx, ch.logPath); err != nil {
			return r, fmt.Errorf("%w%s", err, ch.logTail())
		}
	}
	if cfg.warmup > 0 {
		w := runLoad(ctx, client, url, tpl, 'w', round, cfg.warmup, c)
		if bad := w.failures(cfg.warmup); bad > 0 {
			return r, fmt.Errorf("warm-up: %d of %d requests failed, e.g. %s%s", bad, cfg.warmup, strings.Join(w.samples, "; "), ch.logTail())
		}
	}
	if err := checkDedup(ctx, client, url, demoChannel, tpl, round); err != nil {
		return r, fmt.Errorf("contract check: %w%s", err, ch.logTail())
	}
	w0, wc0, cpu0, tx0 := ioWritten(ch.Pid()), ioField(ch.Pid(), "wchar"), cpuSeconds(ch.Pid()), fileTxID(db)
	res := runLoad(ctx, client, url, tpl, 'm', round, n, c)
	w1, wc1, cpu1, tx1 := ioWritten(ch.Pid()), ioField(ch.Pid(), "wchar"), cpuSeconds(ch.Pid()), fileTxID(db)
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("stopped after %d of %d requests: %w", res.sent, n, err)
	}
	r.s = summarize(sizeName(0), res, n)
	r.events = res.accepted()
	r.written, r.syscall, r.cpu, r.commits = -1, -1, -1, -1
	if w0 >= 0 && w1 >= 0 {
		r.written = w1 - w0
	}
	if wc0 >= 0 && wc1 >= 0 {
		r.syscall = wc1 - wc0
	}
	if cpu0 >= 0 && cpu1 >= 0 {
		r.cpu = cpu1 - cpu0
	}
	if tx0 >= 0 && tx1 >= 0 {
		r.commits = tx1 - tx0
	}
	if r.s.errors > 0 {
		return r, fmt.Errorf("%d of %d requests did not get 202 (statuses %v), e.g. %s%s", r.s.errors, n, res.statuses, strings.Join(res.samples, "; "), ch.logTail())
	}
	client.CloseIdleConnections()
	if err := ch.stop(); err != nil {
		return r, err
	}
	return r, nil
}

// cpuSeconds is the user and system CPU time process pid has used
// (utime+stime of /proc/pid/stat), -1 when it cannot be read.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(raw[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return -1
	}
	return float64(ut+st) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/pid/stat's times: 100 on every
// Linux the bench runs on (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// fileTxID is the id of the last transaction committed to the bbolt file
// at path, read from its two meta pages (the newer one wins; bbolt
// writes each commit's meta with pwrite, so another process reads it
// from the page cache at once): commits = the difference of two reads.
// -1 when the file cannot be read.
func fileTxID(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	best := int64(-1)
	for _, page := range []int64{0, 1} {
		// The page header (16 bytes), then magic, version, page size and
		// flags (4 each), the root bucket (16), the freelist and the high
		// water page ids (8 each), then the txid.
		var b [8]byte
		if _, err := f.ReadAt(b[:], page*bboltPage+16+16+16+16); err != nil {
			return -1
		}
		best = max(best, int64(binary.LittleEndian.Uint64(b[:])))
	}
	return best
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil { // so the copy's own writeback is not the burst's
		out.Close()
		return err
	}
	// Drop the copy's pages from the page cache: the copy fills it with
	// large folios, and a later 4 KiB pwrite into one dirties (and is
	// counted in write_bytes as, and written back as) the whole folio.
	// Measured on a 5k-event copy: 1.3 MB written per event instead of
	// the 120 KiB bbolt's pwrites add up to. A file the server wrote
	// itself, or read back through its mmap, holds 4 KiB pages.
	if err := unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// growFillRecord is written beside a finished fill.
type growFillRecord struct {
	Events   int     `json:"events"`
	Size     int     `json:"size"`
	RecordS  float64 `json:"record_seconds"`
	DraftS   float64 `json:"draft_seconds"`
	Bytes    int64   `json:"bytes"`
	Finished string  `json:"finished"`
}

// growFill returns the pre-filled file of n events under cache, making it
// first when no finished one is there.
func growFill(ctx context.Context, cfg growConfig, bin, cache string, n int, out io.Writer) (string, error) {
	work := filepath.Join(cache, fmt.Sprintf("fill-%d-%db", n, cfg.size))
	data := filepath.Join(work, "data")
	db := filepath.Join(data, store.FileName)
	var rec growFillRecord
	if b, err := os.ReadFile(filepath.Join(work, growFillDone)); err == nil {
		if err := json.Unmarshal(b, &rec); err != nil {
			return "", fmt.Errorf("%s: %w", growFillDone, err)
		}
		fmt.Fprintf(out, "reusing %s: %s events (filled %s: recorded in %.0fs, drafted in %.0fs), %s\n",
			db, thousands(int64(rec.Events)), rec.Finished, rec.RecordS, rec.DraftS, byteSize(rec.Bytes))
		return db, nil
	}
	if err := os.RemoveAll(work); err != nil { // a fill that did not finish
		return "", err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(out, "filling %s with %s events (%d a transaction, through intake.RecordBatch)\n", db, thousands(int64(n)), growFillBatch)
	start := time.Now()
	logPath := filepath.Join(work, "grow-fill.log")
	log, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, self, "-"+growFillFlag, data, "-"+growFillEventsFlag, strconv.Itoa(n), "-"+growFillSizeFlag, strconv.Itoa(cfg.size))
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, proc.Environ(), log, log
	err = cmd.Run()
	log.Close()
	if err != nil {
		tail, _ := os.ReadFile(logPath)
		return "", fmt.Errorf("the fill child: %w\n%s", err, tail)
	}
	rec = growFillRecord{Events: n, Size: cfg.size, RecordS: time.Since(start).Seconds()}
	fmt.Fprintf(out, "  recorded in %.1fs; drafting every event with the real binary\n", rec.RecordS)

	cfgPath := filepath.Join(work, "fill.yaml")
	if err := os.WriteFile(cfgPath, []byte(footprintConfigFile(64)), 0o644); err != nil {
		return "", err
	}
	start = time.Now()
	srv, err := startChild(ctx, "grow-draft", []string{bin, "serve", "--config", cfgPath, "--data", data, "--addr", "127.0.0.1:0"}, work, "HANDOFF_API_TOKEN="+growToken)
	if err != nil {
		return "", err
	}
	defer srv.stop()
	if err := srv.Ready(ctx, 10*time.Minute); err != nil {
		return "", fmt.Errorf("%w%s", err, srv.logTail())
	}
	client := newClient(2)
	defer client.CloseIdleConnections()
	lastSay := time.Now()
	slow := func(took time.Duration) time.Duration { return max(5*time.Second, 10*took) }
	err = poll(ctx, "every draft of the fill", cfg.timeout, slow, func() (bool, error) {
		m, _, err := scrape(ctx, client, "http://"+srv.addr+"/metrics", growToken)
		if err != nil {
			return false, err
		}
		open := m.openJobs("draft")
		if open == 0 {
			return true, nil
		}
		if time.Since(lastSay) >= 30*time.Second {
			fmt.Fprintf(out, "  %s draft jobs open (%.0fs)\n", thousands(int64(open)), time.Since(start).Seconds())
			lastSay = time.Now()
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("%w%s", err, srv.logTail())
	}
	client.CloseIdleConnections()
	if err := srv.stop(); err != nil {
		return "", err
	}
	rec.DraftS = time.Since(start).Seconds()
	if fi, err := os.Stat(db); err == nil {
		rec.Bytes = fi.Size()
	}
	rec.Finished = time.Now().UTC().Format(time.RFC3339)
	fmt.Fprintf(out, "  drafted in %.1fs; %s\n", rec.DraftS, byteSize(rec.Bytes))
	b, _ := json.Marshal(rec)
	return db, os.WriteFile(filepath.Join(work, growFillDone), b, 0o644)
}

// serveGrowFill is the fill child: n events of the bench's own bodies
// (ids f001-…, each its own lead, as the measured bursts' m…), recorded as
// the demo channel records them, growFillBatch to a transaction.
func serveGrowFill(ctx context.Context, data string, n, size int, logw io.Writer) error {
	tpl, err := newBodyTemplate(size)
	if err != nil {
		return err
	}
	st, err := store.Open(data, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	// The demo channel's fields (config.Default): /id, /from, /name, /text;
	// no /conversation_id, so the contact names the lead.
	var text struct {
		From, Name, Text string
	}
	batch := make([]intake.Message, 0, growFillBatch)
	last := time.Now()
	for i := range n {
		id := eventID('f', 1, i)
		body := tpl.body(id)
		if err := json.Unmarshal(body, &text); err != nil {
			return err
		}
		batch = append(batch, intake.Message{
			Channel: demoChannel, MessageID: id, ConversationID: text.From,
			Contact: text.From, Name: text.Name, Text: text.Text,
			ContentType: "application/json", Body: body, JSON: true,
			ReceivedAt: time.Now().UTC(),
		})
		if len(batch) == growFillBatch || i == n-1 {
			if _, err := intake.RecordBatch(ctx, st, batch, nil, growMaxAttempts); err != nil {
				return err
			}
			batch = batch[:0]
			if time.Since(last) > 10*time.Second {
				fmt.Fprintf(logw, "recorded %d of %d\n", i+1, n)
				last = time.Now()
			}
		}
	}
	return nil
}

// growFillChild parses the fill child's flags and runs it.
func growFillChild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("grow-fill", flag.ContinueOnError)
	data := fs.String(growFillFlag, "", "the data folder to fill")
	n := fs.Int(growFillEventsFlag, 0, "events")
	size := fs.Int(growFillSizeFlag, 512, "body size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || *n < 1 {
		return fmt.Errorf("-%s needs a folder and -%s a positive count", growFillFlag, growFillEventsFlag)
	}
	return serveGrowFill(ctx, *data, *n, *size, os.Stderr)
}

// printGrowSummary prints, per connection count, one row per file size:
// medians over rounds with their spread [lowest–highest]; the ratio is
// taken in each round against that round's fresh file, then the median.
func printGrowSummary(out io.Writer, cfg growConfig, all map[int]map[int][]growRun) {
	for _, c := range cfg.conns {
		fmt.Fprintf(out, "\nmedian [spread] of %d rounds, %s\n", cfg.rounds, nouns(c, "connection"))
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "file\taccepted/s\tx fresh\tp50\tp99\tKiB written/event\tKiB by syscall\tCPU µs/event\tpages/commit\tcommits")
		fresh := all[c][0]
		for _, size := range cfg.sizes {
			runs := all[c][size]
			pick := func(f func(growRun) float64) []float64 {
				xs := make([]float64, len(runs))
				for i, r := range runs {
					xs[i] = f(r)
				}
				return xs
			}
			ratio := make([]float64, len(runs))
			for i, r := range runs {
				if i < len(fresh) && fresh[i].s.rate > 0 {
					ratio[i] = r.s.rate / fresh[i].s.rate
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sizeName(size),
				spread(pick(func(r growRun) float64 { return r.s.rate }), "%.0f"),
				spread(ratio, "%.2f"),
				ms(time.Duration(median(pick(func(r growRun) float64 { return float64(r.s.p50) })))),
				ms(time.Duration(median(pick(func(r growRun) float64 { return float64(r.s.p99) })))),
				spread(pick(growRun.kibPerEvent), "%.2f"),
				spread(pick(growRun.syscallKiBPerEvent), "%.2f"),
				spread(pick(growRun.cpuPerEvent), "%.0f"),
				spread(pick(growRun.pagesPerCommit), "%.1f"),
				fmt.Sprintf("%.0f", median(pick(func(r growRun) float64 { return float64(r.commits) }))))
		}
		tw.Flush()
	}
	fmt.Fprintln(out, "\nKiB written: the child's write_bytes (/proc/PID/io) over the burst, page-cache folios dirtied; by syscall: its wchar,")
	fmt.Fprintln(out, "the bytes bbolt handed to pwrite (and the HTTP answers, ~0.3 KiB/event); CPU: its utime+stime; pages/commit: wchar in")
	fmt.Fprintln(out, "4 KiB pages over the bbolt transactions committed meanwhile (the file's meta txid before and after), the workers' included.")
}

// spread formats the median of xs and its range.
func spread(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	if len(xs) == 1 {
		return fmt.Sprintf(format, xs[0])
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", median(xs), slices.Min(xs), slices.Max(xs))
}

// waitBackgroundCheck waits for the server's log (logPath) to say its
// background page check finished (footprint's waitPageCheck, expecting
// one), and returns how long the check took.
func waitBackgroundCheck(ctx context.Context, logPath string) (time.Duration, error) {
	c, err := waitPageCheck(ctx, logPath, pageCheckWait, true)
	switch {
	case err != nil:
		return 0, err
	case c.problem != "":
		return 0, fmt.Errorf("the page check found damage: %s", c.problem)
	case c.timedOut:
		return 0, fmt.Errorf("the background page check was not logged as finished within %s", pageCheckWait)
	}
	return c.took, nil
}

// ioField is the field name of /proc/pid/io, -1 when it cannot be read.
func ioField(pid int, name string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
