package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	hconfig "github.com/handoff/handoff/config"
)

// The sustained mode: webhooks arrive at a fixed rate for a fixed time, and
// the bench watches whether drafting keeps up with ingest.
//
//	go run ./bench sustained -rate 500,1000,2000 -duration 60s
//	go run ./bench sustained -bin /tmp/old,/tmp/new -rounds 3   # two builds side by side

// sustainedConfig is the sustained mode's command line.
type sustainedConfig struct {
	rates        []int
	workerCounts []int // handoff's workers for each run; 0 leaves its default
	draftWorkers int   // handoff's draft_workers; 0 leaves its default
	// quiet is the demo channel's quiet period: a draft job is due this
	// long after its message, so drafting is compared with arrivals from then.
	quiet         time.Duration
	duration      time.Duration
	c, size       int
	autoApprove   bool // the demo channel approves its own drafts
	sample, drain time.Duration
	bins          []string // prebuilt binaries, compared side by side; empty: build the repository
	rounds        int      // times the whole plan runs, builds interleaved; the summary takes medians
	repo, dir     string
	keep          bool
	timeout       time.Duration
}

func parseSustainedFlags(args []string) (sustainedConfig, error) {
	var cfg sustainedConfig
	var rates, workers, bins string
	fs := flag.NewFlagSet("bench sustained", flag.ContinueOnError)
	fs.StringVar(&rates, "rate", "2000", "arrival rates in events/s, comma-separated; each runs on a fresh instance, in this order")
	fs.DurationVar(&cfg.duration, "duration", 60*time.Second, "how long events arrive at each rate")
	fs.IntVar(&cfg.c, "c", 256, "most requests in flight (keep-alive connections); a request due while all are busy waits, and its latency counts the wait")
	fs.IntVar(&cfg.size, "size", 512, "request body size in bytes")
	fs.StringVar(&workers, "workers", "0", "handoff's job workers per kind (the config's workers:), comma-separated; 0 keeps its default; every rate runs with each")
	fs.IntVar(&cfg.draftWorkers, "draft-workers", 0, "handoff's draft pool (the config's draft_workers:); 0 keeps its default (128 with the template drafter)")
	fs.BoolVar(&cfg.autoApprove, "auto-approve", false, "the demo channel approves its drafts and delivers them to the sandbox (default: drafts wait for approval)")
	fs.DurationVar(&cfg.quiet, "quiet", hconfig.Default().Channels[0].Coalesce, "the demo channel's quiet period (its default channels[].coalesce): drafts are due this long after their message, so drafted/s is counted from then on")
	fs.DurationVar(&cfg.sample, "sample", time.Second, "how often /metrics is read")
	fs.DurationVar(&cfg.drain, "drain", 0, "after the arrivals stop, keep reading /metrics this long or until the draft queue is empty, to see how long the backlog takes")
	fs.StringVar(&bins, "bin", "", "prebuilt handoff binaries, comma-separated (default: go build the repository); with several, each run of the plan runs once per binary, one after the other, so two builds are compared under the same load")
	fs.IntVar(&cfg.rounds, "rounds", 1, "times the whole plan runs (every binary, worker count and rate); with more than one, the summary also prints each binary's medians")
	fs.StringVar(&cfg.repo, "repo", "", "repository root to build from (default: walk up from the working directory to go.mod)")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the temporary directories (default: $TMPDIR)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directories (data, child logs)")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "upper bound for the whole run")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench sustained [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, r := range strings.Split(rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n < 1 || n > maxRate {
			return cfg, fmt.Errorf("-rate: %q is not a rate between 1 and %d", r, maxRate)
		}
		cfg.rates = append(cfg.rates, n)
	}
	if bins != "" {
		for _, b := range strings.Split(bins, ",") {
			if b = strings.TrimSpace(b); b == "" {
				return cfg, fmt.Errorf("-bin: %q names an empty binary", bins)
			}
			cfg.bins = append(cfg.bins, b)
		}
	}
	for _, w := range strings.Split(workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 0 || n > 256 {
			return cfg, fmt.Errorf("-workers: %q is not 0 (the default) or a count up to 256", w)
		}
		cfg.workerCounts = append(cfg.workerCounts, n)
	}
	switch {
	case cfg.rounds < 1:
		return cfg, errors.New("-rounds must be at least 1")
	case len(cfg.rates)*len(cfg.workerCounts)*max(len(cfg.bins), 1)*cfg.rounds > maxRound:
		return cfg, fmt.Errorf("-rate, -workers, -bin and -rounds: at most %d runs", maxRound)
	case cfg.duration < time.Second || cfg.duration > maxDuration:
		return cfg, fmt.Errorf("-duration must be between 1s and %s", maxDuration)
	case cfg.draftWorkers < 0 || cfg.draftWorkers > 256:
		return cfg, errors.New("-draft-workers must be 0 (the default) or a count up to 256")
	case cfg.c < 1 || cfg.c > 4096:
		return cfg, errors.New("-c must be between 1 and 4096")
	case cfg.size < minBodySize || cfg.size > maxBodySize:
		return cfg, fmt.Errorf("-size must be between %d and %d bytes", minBodySize, maxBodySize)
	case cfg.sample < 100*time.Millisecond:
		return cfg, errors.New("-sample must be at least 100ms")
	case cfg.quiet < 0 || cfg.quiet >= cfg.duration:
		return cfg, errors.New("-quiet must not be negative and must be shorter than -duration")
	case cfg.drain < 0 || cfg.timeout <= 0:
		return cfg, errors.New("-drain must not be negative and -timeout must be positive")
	}
	for _, r := range cfg.rates {
		if int64(r)*int64(cfg.duration)/int64(time.Second) > maxSeq {
			return cfg, fmt.Errorf("-rate %d for %s is more than %d events", r, cfg.duration, maxSeq)
		}
	}
	return cfg, nil
}

// point is one read of /metrics during a sustained run.
type point struct {
	at      time.Duration // since the first arrival was due
	drafted float64       // draft jobs completed
	queued  float64       // draft jobs waiting to run (available or retryable)
	running float64       // draft jobs claimed by a worker
	waiting float64       // drafts waiting for approval
	took    time.Duration // how long the scrape took
	// attemptSecs and attempts are the draft jobs' duration histogram: the
	// runner times each attempt from its start to its recorded end.
	attemptSecs, attempts float64
}

// completion is one answered request.
type completion struct {
	at, latency time.Duration // at: when the answer was read, since the start
	status      int
}

// sustainedRun is what one rate observed.
type sustainedRun struct {
	build         string // the binary's name, when several are compared
	rate, workers int
	quiet         time.Duration // drafted/s is counted from the first point after it
	n             int           // requests scheduled
	elapsed       time.Duration
	done          []completion // in no particular order
	transportErrs int
	samples       []string
	maxLate       time.Duration // the longest a due request waited for a connection to be sent
	points        []point       // [0] before the first arrival, then every -sample
	loadEnd       int           // index of the point read when the last answer was in
	drained       time.Duration // when the draft queue was empty after the load, 0 if never seen
	shutdown      error
	logTail       string
	metricsOK     bool // the draft counter appeared at least once
}

func (r *sustainedRun) accepted() int {
	n := 0
	for _, c := range r.done {
		if c.status == http.StatusAccepted {
			n++
		}
	}
	return n
}

func (r *sustainedRun) failures() int { return r.n - r.accepted() }

// sustained runs every rate on a fresh handoff and prints what it saw.
func sustained(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseSustainedFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	parent, done, err := scratch(cfg.dir, "handoff-sustained-", cfg.keep, out)
	if err != nil {
		return err
	}
	defer done()
	printHost(out, parent)
	approval := "off: drafts wait for approval"
	if cfg.autoApprove {
		approval = "on: each draft is approved and delivered to the sandbox"
	}
	fmt.Fprintf(out, "sustained: rates %s events/s, %s each, open loop (at most %d in flight), %d-byte bodies; template drafter, auto_approve %s; workers %s, draft_workers %s\n",
		joinInts(cfg.rates), cfg.duration, cfg.c, cfg.size, approval, workersLabel(cfg.workerCounts), workersLabel([]int{cfg.draftWorkers}))

	var builds []string // the binaries, absolute
	if len(cfg.bins) == 0 {
		bin, err := handoffBinary(ctx, config{repo: cfg.repo}, parent, out)
		if err != nil {
			return err
		}
		builds = []string{bin}
	}
	for _, b := range cfg.bins {
		bin, err := handoffBinary(ctx, config{bin: b}, parent, out)
		if err != nil {
			return err
		}
		builds = append(builds, bin)
	}
	tpl, err := newBodyTemplate(cfg.size)
	if err != nil {
		return err
	}
	var runs []*sustainedRun
	invalid := false
	type job struct {
		bin           string
		rate, workers int
	}
	var plan []job
	for range cfg.rounds {
		for _, w := range cfg.workerCounts {
			for _, rate := range cfg.rates {
				for _, b := range builds {
					plan = append(plan, job{b, rate, w})
				}
			}
		}
	}
	for i, j := range plan {
		dir := filepath.Join(parent, fmt.Sprintf("run-%d-rate-%d-workers-%d", i+1, j.rate, j.workers))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		r, err := runSustained(ctx, cfg, j.bin, tpl, j.rate, j.workers, i+1, dir)
		if err != nil {
			return fmt.Errorf("%s, rate %d, workers %d: %w", j.bin, j.rate, j.workers, err)
		}
		if len(builds) > 1 {
			r.build = filepath.Base(j.bin)
		}
		label := ""
		if r.build != "" {
			label = ", build " + r.build
		}
		fmt.Fprintf(out, "\nrun %d/%d: rate %s events/s for %s, workers %s%s\n", i+1, len(plan), thousands(int64(j.rate)), cfg.duration, workersLabel([]int{j.workers}), label)
		printPoints(out, r)
		printSustainedTotals(out, r)
		if r.shutdown != nil {
			fmt.Fprintf(out, "WARNING: %v\n", r.shutdown)
		}
		if first, last := r.points[0], r.points[len(r.points)-1]; !cfg.autoApprove && last.queued+last.running == 0 && math.Abs((last.waiting-first.waiting)-(last.drafted-first.drafted)) > first.running {
			// Without auto-approval every completed draft job leaves one
			// draft waiting: a second source for drafted/s. Compared only
			// once the queue is empty (-drain): while drafting goes on, the
			// counter and the gauge are read moments apart in one scrape.
			fmt.Fprintf(out, "WARNING: %s draft jobs completed but %s more drafts wait for approval; drafted/s may not count drafts\n",
				thousands(int64(last.drafted-first.drafted)), thousands(int64(last.waiting-first.waiting)))
		}
		if !r.metricsOK {
			fmt.Fprintf(out, "WARNING: /metrics never showed handoff_job_attempts_total{kind=\"draft\",state=\"completed\"}; drafted/s reads 0\n")
		}
		if bad := r.failures(); bad > 0 {
			invalid = true
			fmt.Fprintf(out, "\n!!! %d of %d requests did not get 202 (%d transport errors)\n", bad, r.n, r.transportErrs)
			for _, s := range r.samples {
				fmt.Fprintf(out, "    %s\n", s)
			}
			fmt.Fprintln(out, r.logTail)
		}
		runs = append(runs, r)
	}
	if len(runs) > 1 {
		fmt.Fprintf(out, "\nsummary (each run on a fresh instance, in this order)\n")
		printSustainedSummary(out, runs)
	}
	if cfg.rounds > 1 {
		fmt.Fprintf(out, "\nmedians of %d rounds\n", cfg.rounds)
		printSustainedMedians(out, runs)
	}
	if invalid {
		fmt.Fprintf(out, "\n!!! INVALID RUN: some requests failed; these numbers must not be used. !!!\n")
		return errInvalidRun
	}
	return nil
}

// sustainedConfigFile is handoff's config for a sustained run: the
// built-in demo with what was asked for changed, and a metrics listener on
// metricsAddr, which serves /metrics without a token (the main address
// asks for one).
func sustainedConfigFile(workers, draftWorkers int, autoApprove bool, metricsAddr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "metrics_addr: %q\n", metricsAddr)
	if workers > 0 {
		fmt.Fprintf(&b, "workers: %d\n", workers)
	}
	if draftWorkers > 0 {
		fmt.Fprintf(&b, "draft_workers: %d\n", draftWorkers)
	}
	if autoApprove {
		// The demo channel as config.Default declares it, plus auto_approve.
		b.WriteString("channels:\n  - name: demo\n    fields: {message_id: /id, conversation_id: /conversation_id}\n    provider: sandbox\n    auto_approve: true\n")
	}
	return b.String()
}

func runSustained(ctx context.Context, cfg sustainedConfig, bin string, tpl bodyTemplate, rate, workers, round int, dir string) (*sustainedRun, error) {
	argv := []string{bin, "serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0"}
	metricsAddr, err := freeLocalAddr()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "handoff.yaml")
	if err := os.WriteFile(path, []byte(sustainedConfigFile(workers, cfg.draftWorkers, cfg.autoApprove, metricsAddr)), 0o644); err != nil {
		return nil, err
	}
	argv = append(argv, "--config", path)
	ch, err := startChild(ctx, targetHandoff, argv, dir)
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	base := "http://" + ch.addr
	url := base + "/hooks/" + demoChannel
	client := newClient(cfg.c)
	defer client.CloseIdleConnections()
	// Its own connection, so a scrape never waits behind the load.
	probe := newClient(1)
	defer probe.CloseIdleConnections()
	if err := ch.Ready(ctx, startupTimeout); err != nil {
		return nil, fmt.Errorf("%w%s", err, ch.logTail())
	}
	if err := checkDedup(ctx, client, url, demoChannel, tpl, round); err != nil {
		return nil, fmt.Errorf("contract check: %w%s", err, ch.logTail())
	}

	r := &sustainedRun{rate: rate, workers: workers, quiet: cfg.quiet, n: int(int64(rate) * int64(cfg.duration) / int64(time.Second))}
	read := func(at time.Duration) (point, error) {
		m, took, err := scrape(ctx, probe, "http://"+metricsAddr+"/metrics", "")
		if err != nil {
			return point{}, fmt.Errorf("reading /metrics: %w%s", err, ch.logTail())
		}
		if !m.has("handoff_webhooks_total") || !m.has("handoff_drafts_waiting") {
			return point{}, errors.New("/metrics has no handoff_webhooks_total or handoff_drafts_waiting: has it changed?")
		}
		p := point{at: at, took: took}
		var ok bool
		p.drafted, ok = m.sum("handoff_job_attempts_total", map[string]string{"kind": "draft", "state": "completed"})
		r.metricsOK = r.metricsOK || ok
		avail, _ := m.sum("handoff_jobs", map[string]string{"kind": "draft", "state": "available"})
		retry, _ := m.sum("handoff_jobs", map[string]string{"kind": "draft", "state": "retryable"})
		p.queued = avail + retry
		p.running, _ = m.sum("handoff_jobs", map[string]string{"kind": "draft", "state": "running"})
		p.waiting, _ = m.sum("handoff_drafts_waiting", nil)
		p.attemptSecs, _ = m.sum("handoff_job_duration_seconds_sum", map[string]string{"kind": "draft"})
		p.attempts, _ = m.sum("handoff_job_duration_seconds_count", map[string]string{"kind": "draft"})
		return p, nil
	}
	p0, err := read(0)
	if err != nil {
		return nil, err
	}
	r.points = append(r.points, p0)

	a := arrivals{rate: rate, n: r.n}
	start := time.Now()
	// Full only with a million requests behind schedule: until then the
	// schedule alone decides when a request is sent.
	due := make(chan int, min(r.n, 1<<20))
	go func() {
		defer close(due)
		next := 0
		for next < a.n {
			for k := a.dueBy(time.Since(start)); next < k; next++ {
				due <- next
			}
			if next == a.n {
				return
			}
			t := time.NewTimer(time.Until(start.Add(a.due(next))))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()

	type part struct {
		done          []completion
		transportErrs int
		samples       []string
		maxLate       time.Duration
	}
	parts := make([]part, cfg.c)
	var wg sync.WaitGroup
	for w := range cfg.c {
		wg.Go(func() {
			p := &parts[w]
			for i := range due {
				dueAt := start.Add(a.due(i))
				p.maxLate = max(p.maxLate, time.Since(dueAt))
				status, err := postOnce(ctx, client, url, tpl.body(eventID('s', round, i)))
				if err != nil {
					p.transportErrs++
					if len(p.samples) < maxSamples {
						p.samples = append(p.samples, err.Error())
					}
					continue
				}
				now := time.Now()
				p.done = append(p.done, completion{at: now.Sub(start), latency: now.Sub(dueAt), status: status})
				if status != http.StatusAccepted && len(p.samples) < maxSamples {
					p.samples = append(p.samples, fmt.Sprintf("status %d", status))
				}
			}
		})
	}

	// The sampler reads /metrics every -sample while the load runs.
	loadDone := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		tick := time.NewTicker(cfg.sample)
		defer tick.Stop()
		for {
			select {
			case <-loadDone:
				sampled <- nil
				return
			case <-ctx.Done():
				sampled <- ctx.Err()
				return
			case <-tick.C:
				p, err := read(time.Since(start))
				if err != nil {
					sampled <- err
					return
				}
				r.points = append(r.points, p)
			}
		}
	}()
	wg.Wait()
	r.elapsed = time.Since(start)
	close(loadDone)
	if err := <-sampled; err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stopped before the run ended: %w", err)
	}
	pEnd, err := read(time.Since(start))
	if err != nil {
		return nil, err
	}
	r.points = append(r.points, pEnd)
	r.loadEnd = len(r.points) - 1
	for _, p := range parts {
		r.done = append(r.done, p.done...)
		r.transportErrs += p.transportErrs
		r.maxLate = max(r.maxLate, p.maxLate)
		for _, s := range p.samples {
			if len(r.samples) < maxSamples {
				r.samples = append(r.samples, s)
			}
		}
	}

	// Drain: how long the backlog takes once the arrivals stop.
	for deadline := time.Now().Add(cfg.drain); pEnd.queued+pEnd.running > 0 && time.Now().Before(deadline); {
		t := time.NewTimer(cfg.sample)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		if pEnd, err = read(time.Since(start)); err != nil {
			return nil, err
		}
		r.points = append(r.points, pEnd)
	}
	if pEnd.queued+pEnd.running == 0 {
		r.drained = pEnd.at
	}
	client.CloseIdleConnections()
	probe.CloseIdleConnections()
	r.shutdown = ch.stop()
	if r.failures() > 0 {
		r.logTail = ch.logTail()
	}
	return r, nil
}

// postOnce sends one webhook and returns its status once the answer is read.
func postOnce(ctx context.Context, client *http.Client, url string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// window is the answers read between two points, and what the server
// counted meanwhile.
type window struct {
	from, to  point
	latencies []time.Duration // of the 202s, sorted
	accepted  int             // 202s read in the window
}

// windows buckets the answers into the intervals between points.
func windows(points []point, done []completion) []window {
	if len(points) < 2 {
		return nil
	}
	out := make([]window, len(points)-1)
	for i := range out {
		out[i].from, out[i].to = points[i], points[i+1]
	}
	for _, c := range done {
		if c.status != http.StatusAccepted {
			continue
		}
		// The first window whose end is after the answer; answers after the
		// last point land in the last window.
		i, _ := slices.BinarySearchFunc(out, c.at, func(w window, at time.Duration) int {
			if w.to.at <= at {
				return -1
			}
			return 1
		})
		i = min(i, len(out)-1)
		out[i].accepted++
		out[i].latencies = append(out[i].latencies, c.latency)
	}
	for i := range out {
		slices.Sort(out[i].latencies)
	}
	return out
}

func perSec(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

func printPoints(out io.Writer, r *sustainedRun) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "t\taccepted/s\tdrafted/s\tqueue\trunning\tp50\tp99\tscrape\t")
	for i, w := range windows(r.points, r.done) {
		phase := ""
		if i >= r.loadEnd {
			phase = " (drain)"
		}
		dt := w.to.at - w.from.at
		fmt.Fprintf(tw, "%.1fs\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", w.to.at.Seconds(),
			thousands(int64(math.Round(perSec(float64(w.accepted), dt)))),
			thousands(int64(math.Round(perSec(w.to.drafted-w.from.drafted, dt)))),
			thousands(int64(w.to.queued)), thousands(int64(w.to.running)),
			msOrDash(w.latencies, 50), msOrDash(w.latencies, 99), ms(w.to.took), phase)
	}
	tw.Flush()
}

func msOrDash(sorted []time.Duration, p float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	return ms(percentile(sorted, p))
}

// sustainedTotals is one rate's outcome.
type sustainedTotals struct {
	accepted, drafted float64 // per second over the load; drafted from draftFrom on
	draftFrom         time.Duration
	ratio             float64
	p50, p99, max     time.Duration
	queueEnd, maxQ    float64
	growth            float64 // jobs/s over the load's second half
	growthOK          bool
	bounded           bool
	attempt           time.Duration // mean draft attempt while the events arrived
}

func totals(r *sustainedRun) sustainedTotals {
	var t sustainedTotals
	var lat []time.Duration
	for _, c := range r.done {
		if c.status == http.StatusAccepted {
			lat = append(lat, c.latency)
		}
	}
	slices.Sort(lat)
	t.p50, t.p99 = percentile(lat, 50), percentile(lat, 99)
	if len(lat) > 0 {
		t.max = lat[len(lat)-1]
	}
	t.accepted = perSec(float64(len(lat)), r.elapsed)
	end := r.points[r.loadEnd]
	// Drafts are due a quiet period after their message: compare the
	// drafting rate once the first ones are due with the arrival rate.
	from := r.points[0]
	for _, p := range r.points[:r.loadEnd] {
		if p.at >= r.quiet {
			from = p
			break
		}
	}
	t.draftFrom = from.at
	t.drafted = perSec(end.drafted-from.drafted, end.at-from.at)
	if t.accepted > 0 {
		t.ratio = t.drafted / t.accepted
	}
	var at, depth []float64
	for _, p := range r.points[:r.loadEnd+1] {
		at, depth = append(at, p.at.Seconds()), append(depth, p.queued)
		t.maxQ = max(t.maxQ, p.queued)
	}
	t.queueEnd = end.queued
	if n := end.attempts - r.points[0].attempts; n > 0 {
		t.attempt = time.Duration((end.attemptSecs - r.points[0].attemptSecs) / n * float64(time.Second))
	}
	t.growth, t.growthOK = growth(at, depth)
	t.bounded = queueBounded(t.growth, t.growthOK, t.queueEnd, float64(r.rate))
	return t
}

// queueBounded says whether a queue stayed bounded under rate arrivals a
// second: it grew by at most 5% of the arrivals over the second half of the
// run (the margin of the drafted ≥ 0.95 × accepted), or it ended
// below one second of arrivals, which a worker pool drains at once.
func queueBounded(growth float64, ok bool, end, rate float64) bool {
	if end < rate {
		return true
	}
	return ok && growth <= 0.05*rate
}

func printSustainedTotals(out io.Writer, r *sustainedRun) {
	t := totals(r)
	fmt.Fprintf(out, "total: %s events due over %s; %s accepted in %.1fs = %s accepted/s; drafted %s/s while they arrived (from %.1fs on, the quiet period); drafted/accepted %.2f (target >= 0.95)\n",
		thousands(int64(r.n)), time.Duration(r.n)*time.Second/time.Duration(r.rate), thousands(int64(r.accepted())), r.elapsed.Seconds(),
		thousands(int64(math.Round(t.accepted))), thousands(int64(math.Round(t.drafted))), t.draftFrom.Seconds(), t.ratio)
	fmt.Fprintf(out, "202 latency from the due time: p50 %s, p99 %s, max %s; the longest a due request waited for a free connection: %s\n",
		ms(t.p50), ms(t.p99), ms(t.max), ms(r.maxLate))
	verdict := "bounded"
	if !t.bounded {
		verdict = "NOT bounded"
	}
	g := "n/a (too few samples)"
	if t.growthOK {
		g = fmt.Sprintf("%s jobs/s", thousands(int64(math.Round(t.growth))))
	}
	fmt.Fprintf(out, "draft queue: %s at the end of the arrivals, at most %s; growth over the second half %s: %s\n",
		thousands(int64(t.queueEnd)), thousands(int64(t.maxQ)), g, verdict)
	if t.attempt > 0 {
		fmt.Fprintf(out, "a draft attempt (drafting, saving the draft, recording the job's end; the claim before it is not timed) took %s on average: one worker drafts at most %s/s\n",
			ms(t.attempt), thousands(int64(math.Round(1/t.attempt.Seconds()))))
	}
	last := r.points[len(r.points)-1]
	switch {
	case r.drained > 0:
		fmt.Fprintf(out, "backlog drained %.1fs after the arrivals stopped; %s drafts in all\n", (r.drained - r.elapsed).Seconds(), thousands(int64(last.drafted)))
	case len(r.points)-1 > r.loadEnd:
		fmt.Fprintf(out, "backlog not drained: %s draft jobs still queued %.1fs after the arrivals stopped (-drain)\n", thousands(int64(last.queued)), (last.at - r.elapsed).Seconds())
	}
}

func printSustainedSummary(out io.Writer, runs []*sustainedRun) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "build\trate\tworkers\taccepted/s\tdrafted/s\tdrafted/accepted\tqueue at end\tqueue growth/s\tbounded\tattempt\tp50\tp99\t")
	for _, r := range runs {
		t := totals(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%v\t%s\t%s\t%s\t\n", buildLabel(r.build), thousands(int64(r.rate)), workersLabel([]int{r.workers}),
			thousands(int64(math.Round(t.accepted))), thousands(int64(math.Round(t.drafted))), t.ratio,
			thousands(int64(t.queueEnd)), thousands(int64(math.Round(t.growth))), t.bounded, ms(t.attempt), ms(t.p50), ms(t.p99))
	}
	tw.Flush()
}

// printSustainedMedians prints, for each build, rate and worker count, the
// medians over the rounds: the figures to compare when the machine's load
// moves between runs.
func printSustainedMedians(out io.Writer, runs []*sustainedRun) {
	type group struct {
		build         string
		rate, workers int
	}
	var order []group
	by := map[group][]sustainedTotals{}
	for _, r := range runs {
		g := group{r.build, r.rate, r.workers}
		if _, ok := by[g]; !ok {
			order = append(order, g)
		}
		by[g] = append(by[g], totals(r))
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "build\trate\tworkers\trounds\taccepted/s\tdrafted/s\tdrafted/accepted\tqueue at end\tbounded\tattempt\tp99\t")
	for _, g := range order {
		ts := by[g]
		med := func(f func(sustainedTotals) float64) float64 {
			xs := make([]float64, len(ts))
			for i, t := range ts {
				xs[i] = f(t)
			}
			return median(xs)
		}
		bounded := 0
		for _, t := range ts {
			if t.bounded {
				bounded++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%.2f\t%s\t%d of %d\t%s\t%s\t\n", buildLabel(g.build), thousands(int64(g.rate)), workersLabel([]int{g.workers}), len(ts),
			thousands(int64(math.Round(med(func(t sustainedTotals) float64 { return t.accepted })))),
			thousands(int64(math.Round(med(func(t sustainedTotals) float64 { return t.drafted })))),
			med(func(t sustainedTotals) float64 { return t.ratio }),
			thousands(int64(med(func(t sustainedTotals) float64 { return t.queueEnd }))),
			bounded, len(ts),
			ms(time.Duration(med(func(t sustainedTotals) float64 { return float64(t.attempt) }))),
			ms(time.Duration(med(func(t sustainedTotals) float64 { return float64(t.p99) }))))
	}
	tw.Flush()
}

// buildLabel names a run's build in a table: "-" when one build ran.
func buildLabel(b string) string {
	if b == "" {
		return "-"
	}
	return b
}

// workersLabel names worker counts, 0 being handoff's default.
func workersLabel(ws []int) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = strconv.Itoa(w)
		if w == 0 {
			s[i] = "default"
		}
	}
	return strings.Join(s, ", ")
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = thousands(int64(x))
	}
	return strings.Join(s, ", ")
}

// printHost prints the machine and the filesystem of dir, as the default
// mode's header does.
func printHost(out io.Writer, dir string) {
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
}

// freeLocalAddr returns a 127.0.0.1 port free a moment ago, for the
// metrics listener of the child (it must be named in its config file).
func freeLocalAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
