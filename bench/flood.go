package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/handoff/handoff/proc"
)

// The flood mode: memory under many large webhooks at the same moment.
//
//	go run ./bench flood -n 200 -base-bin /path/to/older/handoff -env default,GOMEMLIMIT=512MiB
//
// For each binary (this build, and -base-bin when given) and each setting
// it starts the real binary on a fresh data folder with the demo config,
// opens n connections, and sends n webhooks of -size bytes at once, all
// released by one barrier. A webhook answered 503 is sent again after its
// Retry-After, as a provider does, until it is accepted. It then proves
// that every webhook is stored (GET /api/v1/events/{key} for each), waits
// until every draft job has run, and reports the process's memory: the
// peak RSS (VmHWM) at the end of the flood and over the whole run,
// drafting included, and the peaks of its anonymous part (heap, stacks)
// and of its file part (the pages of bbolt's mmap the process touched),
// sampled every 10 ms.

// floodToken is the API token the child accepts, for /metrics and the events.
const floodToken = "bench-flood-token-not-a-secret-0123456789"

type floodConfig struct {
	n, size, rounds int
	envs            []string
	configFile      string
	bin, baseBin    string
	repo, dir       string
	keep            bool
	timeout         time.Duration
}

func parseFloodFlags(args []string) (floodConfig, error) {
	var cfg floodConfig
	var envs string
	fs := flag.NewFlagSet("bench flood", flag.ContinueOnError)
	fs.IntVar(&cfg.n, "n", 200, "webhooks sent at once, each on its own connection")
	fs.IntVar(&cfg.size, "size", 1<<20, "body size in bytes (at most the demo channel's max_body, 1 MiB)")
	fs.IntVar(&cfg.rounds, "rounds", 1, "rounds; each runs every binary and setting once, interleaved")
	fs.StringVar(&envs, "env", "default", "comma-separated settings: default (the environment as it is), or NAME=value variables joined by +")
	fs.StringVar(&cfg.configFile, "config", "", "a config file for every run (its channel named demo, without a signature); default: the demo config")
	fs.StringVar(&cfg.bin, "bin", "", "prebuilt handoff binary (default: go build the repository)")
	fs.StringVar(&cfg.baseBin, "base-bin", "", "a second handoff binary (an older build) run beside it in every round")
	fs.StringVar(&cfg.repo, "repo", "", "repository root to build from")
	fs.StringVar(&cfg.dir, "dir", "", "parent of the temporary directories (default: $TMPDIR)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directories")
	fs.DurationVar(&cfg.timeout, "timeout", 20*time.Minute, "upper bound for the whole run")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.n < 1 || cfg.n > 2000:
		return cfg, errors.New("-n must be between 1 and 2000")
	case cfg.rounds < 1 || cfg.rounds > maxRound:
		return cfg, fmt.Errorf("-rounds must be between 1 and %d", maxRound)
	case cfg.size < minBodySize || cfg.size > maxBodySize:
		return cfg, fmt.Errorf("-size must be between %d and %d bytes", minBodySize, maxBodySize)
	}
	cfg.envs = strings.Split(envs, ",")
	if cfg.configFile != "" {
		abs, err := filepath.Abs(cfg.configFile)
		if err != nil {
			return cfg, err
		}
		cfg.configFile = abs
	}
	return cfg, nil
}

// floodTarget is one binary under one setting.
type floodTarget struct {
	name, bin, env string
}

// floodResult is what one run of one target observed.
type floodResult struct {
	firstTry    map[int]int // statuses of the first sends
	retries     int         // sends after a 503
	accepted    int         // webhooks finally answered 202
	stored      int         // webhooks found by GET /api/v1/events/{key}
	flood       time.Duration
	floodHWM    int64 // VmHWM once every webhook was answered
	floodAnon   int64 // the peak of RssAnon until then
	hwm         int64 // VmHWM once every draft job had run
	anon, file  int64 // the peaks of RssAnon and RssFile over the run
	after       int64 // VmRSS at the end
	failures    []string
	waitingPeak float64
}

func flood(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFloodFlags(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	parent, done, err := scratch(cfg.dir, "handoff-flood-", cfg.keep, out)
	if err != nil {
		return err
	}
	defer done()
	bin, err := handoffBinary(ctx, config{bin: cfg.bin, repo: cfg.repo}, parent, out)
	if err != nil {
		return err
	}
	bins := []floodTarget{{name: "handoff", bin: bin}}
	if cfg.baseBin != "" {
		base, err := handoffBinary(ctx, config{bin: cfg.baseBin}, parent, out)
		if err != nil {
			return err
		}
		bins = append([]floodTarget{{name: "base", bin: base}}, bins...)
	}
	var targets []floodTarget
	for _, b := range bins {
		for _, env := range cfg.envs {
			targets = append(targets, floodTarget{name: b.name, bin: b.bin, env: env})
		}
	}
	tpl, err := newBodyTemplate(cfg.size)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "flood: %d webhooks of %d bytes at once, %s; GOMEMLIMIT in this shell: %q\n", cfg.n, cfg.size, nouns(cfg.rounds, "round"), os.Getenv("GOMEMLIMIT"))
	results := make([][]floodResult, len(targets))
	for round := range cfg.rounds {
		for i, t := range targets {
			dir := filepath.Join(parent, fmt.Sprintf("r%d-t%d", round, i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			r, err := floodRun(ctx, cfg, tpl, t, dir, round)
			if err != nil {
				return fmt.Errorf("%s %s: %w", t.name, t.env, err)
			}
			results[i] = append(results[i], r)
			if !cfg.keep {
				os.RemoveAll(dir)
			}
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "binary\tsetting\tfirst try 202\tfirst try 503\tretries\tstored\tflood s\tpeak RSS flood MiB\tpeak anon flood MiB\tpeak RSS MiB\tpeak anon MiB\tpeak file MiB\tRSS after MiB\tmax waiting\t")
	invalid := false
	for i, t := range targets {
		for _, r := range results[i] {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d/%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", t.name, t.env,
				r.firstTry[http.StatusAccepted], r.firstTry[http.StatusServiceUnavailable], r.retries, r.stored, cfg.n, r.flood.Seconds(),
				mib(r.floodHWM), mib(r.floodAnon), mib(r.hwm), mib(r.anon), mib(r.file), mib(r.after), r.waitingPeak)
			if r.stored != cfg.n || len(r.failures) > 0 {
				invalid = true
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cfg.rounds > 1 {
		fmt.Fprintln(out, "\nmedians of the rounds [min–max]:")
		for i, t := range targets {
			fmt.Fprintf(out, "  %s %s: peak RSS %s MiB, during the flood %s MiB\n", t.name, t.env,
				spreadMiB(results[i], func(r floodResult) int64 { return r.hwm }),
				spreadMiB(results[i], func(r floodResult) int64 { return r.floodHWM }))
		}
	}
	for i, t := range targets {
		for _, r := range results[i] {
			for _, f := range r.failures {
				fmt.Fprintf(out, "FAILURE %s %s: %s\n", t.name, t.env, f)
			}
		}
	}
	if invalid {
		fmt.Fprintln(out, "INVALID RUN: a webhook was not stored, or failed for another reason than 503")
		return errInvalidRun
	}
	return nil
}

// spreadMiB is the median of f over rs, with its range, in MiB.
func spreadMiB(rs []floodResult, f func(floodResult) int64) string {
	v := make([]int64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return fmt.Sprintf("%.0f [%.0f–%.0f]", mib(v[len(v)/2]), mib(v[0]), mib(v[len(v)-1]))
}

func floodRun(ctx context.Context, cfg floodConfig, tpl bodyTemplate, t floodTarget, dir string, round int) (floodResult, error) {
	r := floodResult{firstTry: map[int]int{}}
	env := []string{"HANDOFF_API_TOKEN=" + floodToken}
	if t.env != "default" {
		env = append(env, strings.Split(t.env, "+")...)
	}
	log, err := os.Create(filepath.Join(dir, "handoff.log"))
	if err != nil {
		return r, err
	}
	defer log.Close()
	argv := []string{"serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0"}
	if cfg.configFile != "" {
		argv = append(argv, "--config", cfg.configFile)
	}
	p, err := proc.Launch(ctx, proc.Cmd{Path: t.bin, Args: argv, Dir: dir, Log: log, Env: env, Within: startupTimeout})
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

	// Sample the memory's two parts every 10 ms for the whole run;
	// VmHWM keeps the peak of the sum by itself.
	var peakAnon, peakFile atomic.Int64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if m, err := readMemory(p.Pid()); err == nil {
				peakAnon.Store(max(peakAnon.Load(), m.anon))
				peakFile.Store(max(peakFile.Load(), m.file))
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { stopSampling(); <-sampled }()

	// One connection per webhook, so that all n are in flight together.
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        cfg.n,
		MaxIdleConnsPerHost: cfg.n,
		MaxConnsPerHost:     cfg.n,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	defer tr.CloseIdleConnections()
	bodies := make([][]byte, cfg.n)
	ids := make([]string, cfg.n)
	for i := range bodies {
		ids[i] = eventID('f', round, i)
		bodies[i] = tpl.body(ids[i])
	}

	// The server's own gauge of webhooks waiting for room, when it has
	// one, scraped on a connection of its own.
	scraper := newClient(1)
	defer scraper.CloseIdleConnections()
	var waitingPeak atomic.Int64
	waitCtx, stopWatching := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = poll(waitCtx, "the flood's end", cfg.timeout, every(50*time.Millisecond), func() (bool, error) {
			if w, ok := scrapeGauge(waitCtx, scraper, base, "handoff_webhooks_waiting"); ok {
				waitingPeak.Store(max(waitingPeak.Load(), int64(w)))
			}
			return false, nil
		})
	}()

	var mu sync.Mutex
	var wg sync.WaitGroup
	barrier := make(chan struct{})
	for i := range cfg.n {
		wg.Go(func() {
			<-barrier
			for try := 0; ; try++ {
				status, retry, snippet, err := floodPost(ctx, client, base+"/hooks/"+demoChannel, bodies[i])
				mu.Lock()
				if try == 0 {
					r.firstTry[status]++
				} else {
					r.retries++
				}
				switch {
				case err != nil:
					r.failures = append(r.failures, fmt.Sprintf("%s: %v", ids[i], err))
				case status == http.StatusAccepted:
					r.accepted++
				case status == http.StatusServiceUnavailable && try < 50:
					mu.Unlock()
					// The sender's retry, as a provider honours Retry-After.
					timer := time.NewTimer(retry)
					select {
					case <-ctx.Done():
						timer.Stop()
						return
					case <-timer.C:
					}
					continue
				default:
					r.failures = append(r.failures, fmt.Sprintf("%s: %d %s", ids[i], status, snippet))
				}
				mu.Unlock()
				return
			}
		})
	}
	start := time.Now()
	close(barrier)
	wg.Wait()
	r.flood = time.Since(start)
	stopWatching()
	<-watched
	r.waitingPeak = float64(waitingPeak.Load())
	if m, err := readMemory(p.Pid()); err == nil {
		r.floodHWM = m.hwm
		r.floodAnon = max(peakAnon.Load(), m.anon)
	}

	// Every webhook that was answered 202 must be there.
	for _, id := range ids {
		ok, err := eventStored(ctx, client, base, demoChannel+":"+id)
		if err != nil {
			return r, err
		}
		if ok {
			r.stored++
		}
	}
	open := 0.0
	if err := poll(ctx, "every draft job to finish", cfg.timeout, every(200*time.Millisecond), func() (bool, error) {
		var err error
		open, err = openDraftJobs(ctx, client, base, floodToken)
		return open == 0, err
	}); err != nil {
		return r, fmt.Errorf("%v draft jobs still open: %w", open, err)
	}
	stopSampling()
	<-sampled
	m, err := readMemory(p.Pid())
	if err != nil {
		return r, err
	}
	r.hwm, r.after = m.hwm, m.rss
	r.anon, r.file = peakAnon.Load(), peakFile.Load()
	tr.CloseIdleConnections()
	if err := p.Stop(stopGrace); err != nil {
		return r, err
	}
	return r, nil
}

// floodPost sends one webhook and returns its status and, for a 503, the
// wait its Retry-After asks for (1 s when it names none).
func floodPost(ctx context.Context, client *http.Client, url string, body []byte) (status int, retry time.Duration, snippet string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
	_, _ = io.Copy(io.Discard, resp.Body)
	retry = time.Second
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retry = time.Duration(s) * time.Second
	}
	return resp.StatusCode, retry, string(bytes.TrimSpace(raw)), nil
}

// eventStored asks the API for one event: true for 200, false for 404.
func eventStored(ctx context.Context, client *http.Client, base, key string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events/"+key, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+floodToken)
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("GET /api/v1/events/%s: %s", key, resp.Status)
}

// scrapeGauge reads one unlabelled gauge; false when the server has none
// (an older build) or the scrape failed.
func scrapeGauge(ctx context.Context, client *http.Client, base, name string) (float64, bool) {
	m, _, err := scrape(ctx, client, base+"/metrics", floodToken)
	if err != nil {
		return 0, false
	}
	return m.sum(name, nil)
}
