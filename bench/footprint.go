package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/proc"
)

// The footprint mode: how big handoff is, and how fast it starts and
// answers, with a big file.
//
//	go run ./bench footprint -events 1000000 -pending 100000 -data /var/tmp/fp
//
// It fills a database through the real binary's HTTP path (so the file is
// what a real one looks like: events, leads, drafts, jobs, outbox rows), then
// starts the binary on it again and measures it.

const (
	// The fill's two channels: bulk approves and delivers its own drafts to
	// the sandbox, as a busy inbox's history would be; demo's drafts wait
	// for approval, and they are the queue the pages show.
	bulkChannel = "bulk"

	benchUser     = "bench"
	benchPassword = "bench-password-not-secret"

	fillFile = "fill.json"

	// footprintToken is the fill's HANDOFF_API_TOKEN (an admin token, the
	// way serve takes one from its environment), so the settle loop can
	// read /metrics on the main listener; only 127.0.0.1 ever sees it.
	footprintToken = "bench-footprint-token-not-a-secret-0123456"
)

// footprintConfig is the footprint mode's command line.
type footprintConfig struct {
	events, pending   int
	data              string
	c, size, workers  int
	requests, starts  int
	bin, repo, dir    string
	keep              bool
	timeout           time.Duration
	settleProgressGap time.Duration
}

func parseFootprintFlags(args []string) (footprintConfig, error) {
	var cfg footprintConfig
	fs := flag.NewFlagSet("bench footprint", flag.ContinueOnError)
	fs.IntVar(&cfg.events, "events", 1_000_000, "events in the file")
	fs.IntVar(&cfg.pending, "pending", 100_000, "of those, how many have a draft waiting for approval; the others are approved and delivered")
	fs.StringVar(&cfg.data, "data", "", "a folder to fill, or to reuse when a fill already finished there (default: a temporary folder)")
	fs.IntVar(&cfg.c, "c", 64, "connections that send the fill")
	fs.IntVar(&cfg.size, "size", 512, "request body size in bytes")
	fs.IntVar(&cfg.workers, "fill-workers", 64, "handoff's job workers during the fill (the measured starts use its default)")
	fs.IntVar(&cfg.requests, "requests", 50, "timed requests for each page")
	fs.IntVar(&cfg.starts, "starts", 3, "timed start-ups; the medians are printed")
	fs.StringVar(&cfg.bin, "bin", "", "prebuilt handoff binary (default: go build the repository)")
	fs.StringVar(&cfg.repo, "repo", "", "repository root to build from (default: walk up from the working directory to go.mod)")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the temporary directories (default: $TMPDIR)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory (without -data)")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Hour, "upper bound for the whole run")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench footprint [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.settleProgressGap = 30 * time.Second
	switch {
	case cfg.events < 1 || cfg.events > maxSeq:
		return cfg, fmt.Errorf("-events must be between 1 and %d", maxSeq)
	case cfg.pending < 0 || cfg.pending > cfg.events:
		return cfg, errors.New("-pending must be between 0 and -events")
	case cfg.c < 1 || cfg.c > 4096:
		return cfg, errors.New("-c must be between 1 and 4096")
	case cfg.size < minBodySize || cfg.size > maxBodySize:
		return cfg, fmt.Errorf("-size must be between %d and %d bytes", minBodySize, maxBodySize)
	case cfg.workers < 1 || cfg.workers > 256:
		return cfg, errors.New("-fill-workers must be between 1 and 256")
	case cfg.requests < 1 || cfg.starts < 1:
		return cfg, errors.New("-requests and -starts must be at least 1")
	case cfg.timeout <= 0:
		return cfg, errors.New("-timeout must be positive")
	}
	return cfg, nil
}

// fillRecord is written next to a finished fill, so a later run can reuse
// the folder and still say what is in it.
type fillRecord struct {
	Events   int     `json:"events"`
	Pending  int     `json:"pending"`
	Size     int     `json:"size"`
	IngestS  float64 `json:"ingest_seconds"`
	SettleS  float64 `json:"settle_seconds"`
	Finished string  `json:"finished"`
}

// footprintConfigFile is handoff's config for the fill (workers set) and for
// the measured starts (workers 0: every default).
func footprintConfigFile(workers int) string {
	var b strings.Builder
	if workers > 0 {
		fmt.Fprintf(&b, "workers: %d\n", workers)
		// The fill queues every event at once, which a real inbox does not
		// do. With the default thresholds, leads waiting more than 10
		// minutes are flagged stuck, and each chunk of that sweep re-reads
		// every lead already flagged in a write transaction: measured on a
		// 1,000,000-event fill, drafting fell from about 870/s to 2/s.
		b.WriteString("stuck: {received: 720h, matched: 720h, owned: 720h}\n")
	}
	b.WriteString("channels:\n")
	fmt.Fprintf(&b, "  - name: %s\n    fields: {message_id: /id, conversation_id: /conversation_id}\n    provider: sandbox\n    auto_approve: true\n", bulkChannel)
	fmt.Fprintf(&b, "  - name: %s\n    fields: {message_id: /id, conversation_id: /conversation_id}\n    provider: sandbox\n", demoChannel)
	return b.String()
}

func footprint(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFootprintFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	parent, done, err := scratch(cfg.dir, "handoff-footprint-", cfg.keep && cfg.data == "", out)
	if err != nil {
		return err
	}
	defer done()
	work := cfg.data
	if work == "" {
		work = filepath.Join(parent, "fill")
	}
	if work, err = filepath.Abs(work); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	printHost(out, work)
	bin, err := handoffBinary(ctx, config{bin: cfg.bin, repo: cfg.repo}, parent, out)
	if err != nil {
		return err
	}

	rec, err := readFill(work)
	switch {
	case err == nil && rec.Events == cfg.events && rec.Pending == cfg.pending:
		fmt.Fprintf(out, "reusing the fill in %s (finished %s)\n", work, rec.Finished)
	case err == nil:
		return fmt.Errorf("%s holds a fill of %d events (%d pending), not %d (%d): pick another -data or match its flags", work, rec.Events, rec.Pending, cfg.events, cfg.pending)
	case !errors.Is(err, os.ErrNotExist):
		return err
	default:
		if entries, _ := os.ReadDir(work); len(entries) > 0 {
			return fmt.Errorf("%s is not empty and holds no finished fill; give -data an empty or new folder", work)
		}
		if rec, err = fill(ctx, cfg, bin, work, out); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
	}
	dataDir := filepath.Join(work, "data")
	db := filepath.Join(dataDir, "handoff.db")
	info, err := os.Stat(db)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "file: %s, %s for %s events, %s of them with a draft waiting for approval (%s/event)\n",
		db, byteSize(info.Size()), thousands(int64(rec.Events)), thousands(int64(rec.Pending)), byteSize(info.Size()/int64(rec.Events)))
	return measureFootprint(ctx, cfg, bin, work, db, out)
}

func readFill(work string) (fillRecord, error) {
	var rec fillRecord
	b, err := os.ReadFile(filepath.Join(work, fillFile))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", fillFile, err)
	}
	return rec, nil
}

// fill creates the user the pages log in as, then sends the events through
// the binary and waits until every job has run.
func fill(ctx context.Context, cfg footprintConfig, bin, work string, out io.Writer) (fillRecord, error) {
	rec := fillRecord{Events: cfg.events, Pending: cfg.pending, Size: cfg.size}
	dataDir := filepath.Join(work, "data")
	add := exec.CommandContext(ctx, bin, "user", "add", "--data", dataDir, benchUser, "--role", "admin")
	add.Dir, add.Env = work, proc.Environ()
	add.Stdin = strings.NewReader(benchPassword + "\n")
	if b, err := add.CombinedOutput(); err != nil {
		return rec, fmt.Errorf("handoff user add: %w\n%s", err, b)
	}
	cfgPath := filepath.Join(work, "fill.yaml")
	if err := os.WriteFile(cfgPath, []byte(footprintConfigFile(cfg.workers)), 0o644); err != nil {
		return rec, err
	}
	ch, err := startChild(ctx, "fill", []string{bin, "serve", "--config", cfgPath, "--data", dataDir, "--addr", "127.0.0.1:0"}, work,
		"HANDOFF_API_TOKEN="+footprintToken)
	if err != nil {
		return rec, err
	}
	defer ch.stop()
	base := "http://" + ch.addr
	client := newClient(cfg.c)
	defer client.CloseIdleConnections()
	if err := ch.Ready(ctx, startupTimeout); err != nil {
		return rec, fmt.Errorf("%w%s", err, ch.logTail())
	}
	tpl, err := newBodyTemplate(cfg.size)
	if err != nil {
		return rec, err
	}
	fmt.Fprintf(out, "filling %s: %s events to %s (auto-approved, delivered to the sandbox), then %s to %s (left waiting), %d connections, %d workers\n",
		work, thousands(int64(cfg.events-cfg.pending)), bulkChannel, thousands(int64(cfg.pending)), demoChannel, cfg.c, cfg.workers)
	start := time.Now()
	for _, part := range []struct {
		channel string
		kind    byte
		n       int
	}{{bulkChannel, 'f', cfg.events - cfg.pending}, {demoChannel, 'p', cfg.pending}} {
		if part.n == 0 {
			continue
		}
		r := runLoad(ctx, client, base+"/hooks/"+part.channel, tpl, part.kind, 1, part.n, cfg.c)
		if err := ctx.Err(); err != nil {
			return rec, err
		}
		if bad := r.failures(part.n); bad > 0 {
			return rec, fmt.Errorf("%d of %d webhooks to %s failed, e.g. %s%s", bad, part.n, part.channel, strings.Join(r.samples, "; "), ch.logTail())
		}
		fmt.Fprintf(out, "  %s: %s accepted in %.1fs (%s/s)\n", part.channel, thousands(int64(part.n)), r.elapsed.Seconds(), thousands(int64(math.Round(float64(part.n)/r.elapsed.Seconds()))))
	}
	rec.IngestS = time.Since(start).Seconds()

	// Settle: every draft and delivery job done, every pending draft stored.
	settle := time.Now()
	lastSay := time.Now()
	// Not more often than every 5s, and at most a tenth of the time: a
	// scrape reads every queued job (JobCounts), and right after the
	// ingest the whole fill is queued, so a scrape can take seconds.
	slow := func(took time.Duration) time.Duration { return max(5*time.Second, 10*took) }
	err = poll(ctx, "every job of the fill to finish", cfg.timeout, slow, func() (bool, error) {
		m, _, err := scrape(ctx, client, base+"/metrics", footprintToken)
		if err != nil {
			return false, err
		}
		open := m.openJobs("draft", "deliver")
		waiting, _ := m.sum("handoff_drafts_waiting", nil)
		if open == 0 && int(waiting) >= cfg.pending {
			return true, nil
		}
		if time.Since(lastSay) >= cfg.settleProgressGap {
			drafted, _ := m.sum("handoff_job_attempts_total", map[string]string{"kind": "draft", "state": "completed"})
			fmt.Fprintf(out, "  settling: %s jobs open, %s drafts done, %s waiting (%.0fs)\n",
				thousands(int64(open)), thousands(int64(drafted)), thousands(int64(waiting)), time.Since(settle).Seconds())
			lastSay = time.Now()
		}
		return false, nil
	})
	if err != nil {
		return rec, err
	}
	rec.SettleS = time.Since(settle).Seconds()
	fmt.Fprintf(out, "  every job done %.1fs after the last webhook\n", rec.SettleS)
	client.CloseIdleConnections()
	if err := ch.stop(); err != nil {
		return rec, err
	}
	rec.Finished = time.Now().UTC().Format(time.RFC3339)
	b, _ := json.Marshal(rec)
	return rec, os.WriteFile(filepath.Join(work, fillFile), b, 0o644)
}

// startup is one timed start of the binary on the filled file.
type startup struct {
	listening, ready time.Duration // since the process was started
	mem              memory        // once /readyz answered
}

func measureFootprint(ctx context.Context, cfg footprintConfig, bin, work, db string, out io.Writer) error {
	cfgPath := filepath.Join(work, "measure.yaml")
	if err := os.WriteFile(cfgPath, []byte(footprintConfigFile(0)), 0o644); err != nil {
		return err
	}
	argv := []string{bin, "serve", "--config", cfgPath, "--data", filepath.Join(work, "data"), "--addr", "127.0.0.1:0"}

	// The parts of a start that can be timed alone, while no server holds the file.
	initT, err := timeCommand(ctx, cfg.starts, work, nil, bin, "version")
	if err != nil {
		return fmt.Errorf("handoff version: %w", err)
	}

	var starts []startup
	var pages []pageTiming
	var after, checked memory
	var check pageCheck
	for i := range cfg.starts {
		t0 := time.Now()
		ch, err := startChild(ctx, fmt.Sprintf("start-%d", i+1), argv, work)
		if err != nil {
			return err
		}
		s := startup{listening: time.Since(t0)}
		client := newClient(4)
		if err := waitReadyFast(ctx, client, "http://"+ch.addr+"/readyz"); err != nil {
			ch.stop()
			return fmt.Errorf("%w%s", err, ch.logTail())
		}
		s.ready = time.Since(t0)
		if s.mem, err = readMemory(ch.Pid()); err != nil {
			ch.stop()
			return err
		}
		starts = append(starts, s)
		if i == cfg.starts-1 {
			// Pages on the last start only: they are the same file each time.
			pages, err = timePages(ctx, client, "http://"+ch.addr, cfg.requests)
			if err == nil {
				after, err = readMemory(ch.Pid())
			}
			if err == nil {
				if check, err = waitPageCheck(ctx, ch.logPath, pageCheckWait, false); err == nil && check.took > 0 {
					checked, err = readMemory(ch.Pid())
				}
			}
			if err != nil {
				ch.stop()
				return fmt.Errorf("%w%s", err, ch.logTail())
			}
		}
		client.CloseIdleConnections()
		if err := ch.stop(); err != nil {
			fmt.Fprintf(out, "WARNING: %v\n", err)
		}
	}

	fmt.Fprintf(out, "\nstart-up (%d starts; process start to /readyz answering 200)\n", cfg.starts)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "start\tlistening\tready\tVmRSS\tRssAnon\tRssFile\tVmHWM\t")
	var ready, rss, anon, file, hwm []float64
	for i, s := range starts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", i+1, ms(s.listening), ms(s.ready), byteSize(s.mem.rss), byteSize(s.mem.anon), byteSize(s.mem.file), byteSize(s.mem.hwm))
		ready, rss, hwm = append(ready, float64(s.ready)), append(rss, float64(s.mem.rss)), append(hwm, float64(s.mem.hwm))
		anon, file = append(anon, float64(s.mem.anon)), append(file, float64(s.mem.file))
	}
	tw.Flush()
	fmt.Fprintf(out, "median: ready %s (target < 1s), VmRSS %s (target < 150 MiB) = RssAnon %s (heap, stacks) + RssFile %s (the mapped database), VmHWM %s\n",
		ms(durMedian(ready)), byteSize(int64(median(rss))), byteSize(int64(median(anon))), byteSize(int64(median(file))), byteSize(int64(median(hwm))))
	fmt.Fprintf(out, "of which, timed alone (median of %d): process init before main (handoff version) %s\n", cfg.starts, ms(initT))
	fmt.Fprintf(out, "after the pages below: VmRSS %s (RssAnon %s, RssFile %s), VmHWM %s\n", byteSize(after.rss), byteSize(after.anon), byteSize(after.file), byteSize(after.hwm))
	switch {
	case check.problem != "":
		fmt.Fprintf(out, "WARNING: the background page check found damage: %s\n", check.problem)
	case check.timedOut:
		fmt.Fprintf(out, "WARNING: the background page check started but was not logged as finished within %s (last start)\n", pageCheckWait)
	case check.took > 0:
		fmt.Fprintf(out, "background page check (after ready, plain reads, last start): %s; then VmRSS %s (RssAnon %s, RssFile %s), VmHWM %s\n",
			ms(check.took), byteSize(checked.rss), byteSize(checked.anon), byteSize(checked.file), byteSize(checked.hwm))
	default:
		fmt.Fprintf(out, "background page check: none logged (a file of at most 64 MiB is checked in full before the open)\n")
	}

	fmt.Fprintf(out, "\npages (%d sequential requests each after 5 unmeasured, logged in as an admin without a routing owner)\n", cfg.requests)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "page\tp50\tp99\tmax\tbytes\t")
	for _, p := range pages {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", p.name, ms(percentile(p.latencies, 50)), ms(percentile(p.latencies, 99)), ms(p.latencies[len(p.latencies)-1]), byteSize(int64(p.bytes)))
	}
	tw.Flush()
	fmt.Fprintf(out, "target: each page < 50ms\n")

	buckets, err := bucketSizes(db)
	if err != nil {
		fmt.Fprintf(out, "WARNING: reading the file's buckets: %v\n", err)
		return nil
	}
	printBuckets(out, buckets)
	return nil
}

// bucketSize is one bucket's share of the file.
type bucketSize struct {
	name  string
	keys  int
	bytes int64 // branch and leaf pages allocated, overflow included
}

// bucketSizes says where the bytes of the file are. The store has no such
// report, so the bench reads the stopped file itself, read-only, as the
// floor target uses bbolt directly (floor.go).
func bucketSizes(path string) ([]bucketSize, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []bucketSize
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			st := b.Stats()
			out = append(out, bucketSize{name: string(name), keys: st.KeyN, bytes: int64(st.BranchAlloc + st.LeafAlloc)})
			return nil
		})
	})
	slices.SortFunc(out, func(a, b bucketSize) int { return int(b.bytes - a.bytes) })
	return out, err
}

func printBuckets(out io.Writer, buckets []bucketSize) {
	var total int64
	for _, b := range buckets {
		total += b.bytes
	}
	fmt.Fprintf(out, "\nwhere the file's pages are (%s in buckets; the rest of the file is free pages and bbolt's growth step)\n", byteSize(total))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "bucket\tkeys\tbytes\tshare\tbytes/key\t")
	for i, b := range buckets {
		if i == 10 {
			break
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f%%\t%s\t\n", b.name, thousands(int64(b.keys)), byteSize(b.bytes), 100*float64(b.bytes)/float64(max(total, 1)), byteSize(b.bytes/int64(max(b.keys, 1))))
	}
	tw.Flush()
}

// timeCommand runs argv n times and returns the median wall time.
func timeCommand(ctx context.Context, n int, dir string, env []string, argv ...string) (time.Duration, error) {
	var ts []float64
	for range n {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = append(proc.Environ(), env...)
		t0 := time.Now()
		b, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%w: %s", err, b)
		}
		ts = append(ts, float64(time.Since(t0)))
	}
	return durMedian(ts), nil
}

// pageCheck is what the server logged of its background page check.
type pageCheck struct {
	took    time.Duration // 0: no check logged
	problem string
	// timedOut: the check was started but not logged as finished within
	// pageCheckWait.
	timedOut bool
}

// pageCheckWait bounds the wait for the background page check's log line:
// at about 1 s per GB here, a 10 GB file takes 10–20 s on a busy machine.
const pageCheckWait = 3 * time.Minute

// checkStartMsg is app's log line when it starts the background page check.
const checkStartMsg = "checking the database's pages in the background"

// waitPageCheck reads the server's log until its background page check
// (app: "the database's pages are sound" with took, or "the database is
// damaged") is logged. A server that started none (a small file, checked
// in full before the open) logs none; one that started a check that is
// not logged as finished within says so (timedOut). With expect, the
// caller knows a check runs (a file above the full-check limit), so a log
// without its start line yet is waited on, not read as no check.
func waitPageCheck(ctx context.Context, logPath string, within time.Duration, expect bool) (pageCheck, error) {
	var got pageCheck
	err := poll(ctx, "the background page check", within, every(100*time.Millisecond), func() (bool, error) {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			var rec struct {
				Msg  string `json:"msg"`
				Took int64  `json:"took"`
				Err  string `json:"err"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec.Msg {
			case "the database's pages are sound":
				got = pageCheck{took: time.Duration(rec.Took)}
				return true, nil
			case "the database is damaged; restore a backup":
				got = pageCheck{problem: rec.Err}
				return true, nil
			}
		}
		// The check is started, and logged, right after the server is
		// ready, which was seconds ago: no start line means no check.
		return !expect && !strings.Contains(string(b), checkStartMsg), nil
	})
	if errors.Is(err, errTimedOut) {
		return pageCheck{timedOut: true}, nil
	}
	return got, err
}

// waitReadyFast polls /readyz every 2ms: start-up is measured against 1s,
// and waitReady's 20ms would be a tenth of a figure near 200ms.
func waitReadyFast(ctx context.Context, client *http.Client, url string) error {
	return poll(ctx, url+" to answer 200", startupTimeout, every(2*time.Millisecond), func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// pageTiming is one page's measured requests.
type pageTiming struct {
	name      string
	latencies []time.Duration // sorted
	bytes     int             // of the last answer
}

// timePages logs in through the login form and times each page.
func timePages(ctx context.Context, client *http.Client, base string, n int) ([]pageTiming, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	c := *client
	c.Jar = jar
	form := url.Values{"name": {benchUser}, "password": {benchPassword}, "next": {"/"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("login: %s, want 303", resp.Status)
	}
	pages := []struct {
		name, path string
		check      func([]byte) error
	}{
		{"GET /drafts (dashboard queue)", "/drafts", nil},
		{"GET /api/v1/drafts?status=pending_approval&limit=20", "/api/v1/drafts?status=pending_approval&limit=20", checkDraftPage(20)},
		{"GET / (overview)", "/", nil},
	}
	var out []pageTiming
	for _, p := range pages {
		pt := pageTiming{name: p.name}
		for i := range n + 5 {
			t0 := time.Now()
			body, err := getPage(ctx, &c, base+p.path)
			d := time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			if p.check != nil && i == 0 {
				if err := p.check(body); err != nil {
					return nil, fmt.Errorf("%s: %w", p.name, err)
				}
			}
			if i >= 5 {
				pt.latencies = append(pt.latencies, d)
			}
			pt.bytes = len(body)
		}
		slices.Sort(pt.latencies)
		out = append(out, pt)
	}
	return out, nil
}

func getPage(ctx context.Context, c *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %.200s", resp.Status, body)
	}
	return body, nil
}

// checkDraftPage makes sure the API answered a full page of pending drafts,
// so a fast empty answer cannot pass for a fast page.
func checkDraftPage(want int) func([]byte) error {
	return func(body []byte) error {
		var page struct {
			Drafts []struct {
				Status string `json:"status"`
			} `json:"drafts"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return err
		}
		if len(page.Drafts) != want {
			return fmt.Errorf("got %d drafts, want %d", len(page.Drafts), want)
		}
		return nil
	}
}
