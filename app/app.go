// Package app wires the process: the store, the providers, the drafter, the
// job kinds and their runner, the cron schedule and the HTTP server, built
// in that order by New, started by Start and stopped in reverse by Stop.
// serve runs it; every test that needs a whole server runs it too, so the
// process is wired here and nowhere else.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff/handoff/approvals"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/crm"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/drafter"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/offsite"
	"github.com/handoff/handoff/outbound"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/web"
	"github.com/handoff/handoff/workers"
)

// HTTPGrace is how long Stop lets HTTP requests finish, and ShutdownGrace
// how long it then gives running jobs before their contexts are cancelled
// and they are released back to the queue (a draft in flight is retried
// after the restart, its output never half stored; a send in flight is
// settled by the delivery rules, as after a crash). Together, with the
// database's close, they fit inside the 10 s that `docker stop` waits
// before its SIGKILL.
const (
	HTTPGrace     = 3 * time.Second
	ShutdownGrace = 5 * time.Second
)

// Deps is what serve or a test injects; every field may be left zero.
type Deps struct {
	Logger *slog.Logger // nil: logs are discarded
	// Now is the clock of the HTTP side and of the metrics' gauges; nil:
	// time.Now. The queue keeps real time, so a test's frozen clock never
	// holds a retry back.
	Now func() time.Time
	// Listener is where HTTP is served; nil: New listens on cfg.Addr.
	Listener net.Listener
	APIToken string // HANDOFF_API_TOKEN; empty disables bearer access
	// AfterDraftSave, when set, runs right after each draft commits (crash tests).
	AfterDraftSave func()
	// VerifyBackup, when set, checks each scheduled backup's copy instead
	// of store.VerifyFile (tests damage the copy, then call it).
	VerifyBackup func(path string) error
	// MmapSize, when set, is the store's initial map (store.Options):
	// tests make it small, so that bbolt must remap as the file grows.
	MmapSize int
}

// App is the whole process.
type App struct {
	log    *slog.Logger
	st     *store.Store
	runner *jobs.Runner
	sched  *jobs.Schedule
	maint  *workers.Maintenance
	web    *web.Server
	bulk   *workers.BulkReplayJob
	ln     net.Listener
	http   *http.Server
	served chan error
	// metricsLn and metricsHTTP serve GET /metrics alone when
	// cfg.MetricsAddr is set; nil otherwise.
	metricsLn   net.Listener
	metricsHTTP *http.Server
	cfg         *config.Config
	// surfaces are the approval surfaces (package approvals).
	surfaces *approvals.Approvals
	// backups is the backups page's process side: backup now, offsite
	// copies, restore (backups.go).
	backups *backups
	// checked ends when the background page check (store.CheckPages) has
	// returned; stopCheck cuts it short.
	checked   chan struct{}
	stopCheck context.CancelFunc
	// walked says the background page check ran to its end (sound or
	// damaged), so a restore that failed need not start it again.
	walked atomic.Bool
	// bg holds the goroutines Start leaves running besides the servers
	// (the offsite gauges' first listing); stopBg cuts them short, and
	// Stop waits for them before it closes anything.
	bg     sync.WaitGroup
	stopBg context.CancelFunc

	started bool
}

// New builds the process from a validated config: it opens the store (a
// damaged file is refused, never opened), then the providers, the drafter,
// the job kinds, the runner, the cron schedule and the web server, and
// binds the listener. Nothing runs yet; every error is returned here, with
// what was opened closed again.
func New(cfg *config.Config, d Deps) (_ *App, err error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	// A damaged file is refused in one sentence, never opened: bbolt would
	// crash on it, or a zero-length file would become an empty database.
	var st *store.Store
	if cfg.DatabaseURL != "" {
		// PostgreSQL (experimental): the data folder keeps the backups,
		// the downloads' copies and the setup link.
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data folder: %w", err)
		}
		st, err = store.OpenURL(context.Background(), cfg.DatabaseURL, store.Options{})
	} else {
		st, err = store.Open(cfg.DataDir, store.Options{CheckPages: true, MmapSize: d.MmapSize})
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	// The open's lock proves no download streams from these any more.
	if left, err := store.RemoveSnapshots(cfg.DataDir); len(left) > 0 || err != nil {
		d.Logger.Warn("deleted the copies of downloads a stop left unfinished", "files", left, slog.Any("err", err))
	}
	for _, m := range st.Migrations() {
		d.Logger.Info("database migrated", slog.Int("from_schema", m.From), slog.Int("to_schema", m.To), slog.String("migration", m.Name))
	}
	for _, r := range st.Repairs() { // what the open's migrations rewrote
		attrs := []any{slog.Int("repaired", r.Repaired), slog.Int("unreadable", r.Unreadable), slog.Int("verified", r.Verified)}
		switch {
		case r.Repaired+r.Unreadable > 0:
			d.Logger.Warn(r.String(), attrs...)
		case r.Verified > 0:
			d.Logger.Info(r.String(), attrs...)
		}
	}
	a := &App{log: d.Logger, st: st, served: make(chan error, 1), cfg: cfg}
	// Records that cannot be read do not stop the start (each shows as an
	// unreadable row where it is listed); they are said once, here.
	if us := st.Unreadable(); len(us) > 0 {
		var names []string
		for _, u := range us {
			names = append(names, u.Kind+" "+u.ID+": "+u.Reason)
		}
		a.log.Error(fmt.Sprintf("%d records cannot be read; serving the rest (see handoff verify)", len(us)), slog.Any("records", names))
	}
	if err := a.seedFacts(d.Now()); err != nil {
		return nil, err
	}
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: a.st, Window: d.Now})
	if err != nil {
		return nil, err
	}
	dr, err := newDrafter(cfg)
	if err != nil {
		return nil, err
	}
	metrics := web.NewMetrics(a.st, cfg, d.Now)
	kinds, draftJob := workers.Kinds(a.st, cfg, dr, providers)
	if draftJob.Canary, err = newCanary(cfg); err != nil {
		return nil, err
	}
	digests := &workers.DigestJob{Store: a.st, Config: cfg} // digests[]: its Wake is the runner's
	kinds[workers.KindDigest] = digests
	// The approval surfaces (Slack, Telegram, email, ntfy): their jobs, their
	// sweep on the schedule below, their callbacks in web; Wake is the runner's.
	if a.surfaces, err = approvals.New(a.st, cfg, approvals.Options{Now: d.Now, Log: d.Logger, Providers: providers}); err != nil {
		return nil, err
	}
	for kind, job := range workers.SurfaceKinds(a.surfaces) {
		kinds[kind] = job
	}
	draftJob.Observe = metrics.ModelCall
	draftJob.ObserveCost = metrics.DraftCost
	draftJob.AfterSave = d.AfterDraftSave
	a.runner = jobs.NewRunner(a.st, kinds, jobs.Options{
		Workers: cfg.Workers,
		// The draft pool: many template drafts at once, a model server's few calls.
		Concurrency: map[string]int{
			review.KindDraft: cfg.DraftConcurrency(),
		},
		Lease:   lease(cfg),
		Backoff: jobs.Backoff{Base: cfg.Retry.BaseDelay, Max: cfg.Retry.MaxDelay},
		Logger:  d.Logger,
		Observe: metrics.JobAttempt,
		Poll:    poll(a.st),
	})
	// Bulk replays stamp their replays with the HTTP side's clock, as a
	// single replay does, and wake the runner for the work they queue.
	a.bulk = kinds[delivery.KindBulkReplay].(*workers.BulkReplayJob)
	a.bulk.Now, a.bulk.Log, a.bulk.Wake = d.Now, d.Logger, a.runner.Wake
	kinds[delivery.Kind].(*delivery.Job).Log = d.Logger
	// The CRMs (crm[]) are the delivery job's too: each lead move enqueues
	// its write in the move's transaction (the store's HookLeadMoves).
	crms, err := crm.Open(cfg, a.st, crm.Options{Logger: d.Logger})
	if err != nil {
		return nil, err
	}
	for name, s := range crms {
		kinds[delivery.Kind].(*delivery.Job).Providers[name] = s
	}
	if len(crms) > 0 {
		kinds[delivery.Kind].(*delivery.Job).Gate = crm.Gate(cfg, a.st)
	}
	// The outbound events (events[]): each business change writes its
	// events in its own transaction (the store's hooks); the delivery job
	// posts them, under delivery.KindEvent, in a pool of their own.
	var leadHooks []store.LeadHook
	if len(crms) > 0 {
		leadHooks = append(leadHooks, crm.Hook(cfg))
	}
	// A CRM write recorded sent moves its lead (the CRM holds its record:
	// matched, then owned), in the transaction that records it.
	var outboxHooks []store.OutboxHook
	if len(crms) > 0 {
		outboxHooks = append(outboxHooks, crm.Written())
	}
	if len(cfg.Events) > 0 {
		for name, s := range outbound.Open(cfg) {
			kinds[delivery.Kind].(*delivery.Job).Providers[name] = s
		}
		ev := outbound.New(cfg)
		leadHooks = append(leadHooks, ev.LeadMoved)
		outboxHooks = append(outboxHooks, ev.OutboxMoved)
		a.st.HookJobDiscards(ev.JobDiscarded)
	}
	if len(outboxHooks) > 0 {
		a.st.HookOutboxMoves(func(tx *store.Tx, old *store.Outbox, o store.Outbox) error {
			for _, fn := range outboxHooks {
				if err := fn(tx, old, o); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if len(leadHooks) > 0 { // crm's write and the status change, in the move's transaction
		a.st.HookLeadMoves(func(tx *store.Tx, h store.Handoff, now time.Time) error {
			for _, fn := range leadHooks {
				if err := fn(tx, h, now); err != nil {
					return err
				}
			}
			return nil
		})
	}

	a.sched = jobs.NewSchedule(d.Logger)
	if err := a.sched.Add("reap job leases", "@every 1m", time.Minute, a.runner.Reap); err != nil {
		return nil, err
	}
	if a.st.Shared() {
		if err := a.sched.Add("release the jobs of servers gone", "@every "+releaseEvery.String(), time.Minute, a.runner.ReleaseGone); err != nil {
			return nil, err
		}
	}
	a.maint = &workers.Maintenance{Store: a.st, Config: cfg, Log: d.Logger, Backups: metrics, Wake: a.runner.Wake, Verify: d.VerifyBackup}
	if len(crms) > 0 {
		a.maint.Flagged = crm.StuckHook(cfg) // a stuck lead says so on its CRM record too
	}
	a.backups = &backups{a: a, metrics: metrics}
	if t := cfg.Backups.Target; t != nil {
		if a.backups.target, err = offsite.New(*t, store.IsBackupName); err != nil {
			return nil, err
		}
	}
	a.maint.AfterBackup = a.backups.afterBackup
	digests.Wake = a.runner.Wake
	a.surfaces.Wake = a.runner.Wake
	if len(a.surfaces.Surfaces()) > 0 {
		sweep := cfg.Approvals.SweepEvery()
		if err := a.sched.Add("follow approval cards", "@every "+sweep.String(), 30*time.Second, a.surfaces.Sweep); err != nil {
			return nil, err
		}
	}
	if err := a.maint.ScheduleDigests(a.sched); err != nil {
		return nil, err
	}
	for _, task := range []struct {
		name, spec string
		fn         func(context.Context) error
	}{
		{"resolve unfinished deliveries", "@every 1m", a.maint.EnsureDelivery},
		{"flag stuck leads", "@every 1m", a.maint.FlagStuck},
		{"prune by retention", "@every 1h", a.maint.Prune},
		{"scheduled backup", cfg.Backups.Schedule, a.backups.scheduled},
	} {
		if err := a.sched.Add(task.name, task.spec, 30*time.Minute, task.fn); err != nil {
			return nil, fmt.Errorf("schedule %s: %w", task.name, err)
		}
	}
	// The last good backup survives a restart: it is the newest file on
	// disk, since only a verified copy takes a backup's name.
	if files, err := store.Backups(store.BackupDir(cfg.DataDir)); err == nil && len(files) > 0 {
		metrics.RestoreLastBackup(files[0].ModTime, files[0].Warnings)
	}

	lookers := make(map[string]delivery.Looker, len(providers)+len(crms))
	for name, p := range providers {
		lookers[name] = p
	}
	for name, s := range crms {
		lookers[name] = s
	}
	// The pages judge the dead letters as the bulk replay does: one outbox,
	// with every job kind's rules (workers.DeadKinds).
	a.web, err = web.New(web.Deps{Config: cfg, Store: a.st, Jobs: a.runner, Logger: d.Logger, APIToken: d.APIToken, Now: d.Now, Metrics: metrics, Backups: a.backups, Providers: lookers, Outbox: a.bulk.Outbox, Surfaces: a.surfaces})
	if err != nil {
		return nil, err
	}
	a.http = &http.Server{
		Handler:           a.web,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute, // backups stream for a while
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(d.Logger.Handler(), slog.LevelWarn),
	}
	if a.ln = d.Listener; a.ln == nil {
		if a.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	if cfg.MetricsAddr != "" {
		if a.metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			a.ln.Close()
			return nil, fmt.Errorf("listen on metrics_addr %s: %w", cfg.MetricsAddr, err)
		}
		a.metricsHTTP = &http.Server{
			Handler:           a.web.MetricsHandler(),
			ReadHeaderTimeout: 10 * time.Second,
			WriteTimeout:      30 * time.Second,
			ErrorLog:          slog.NewLogLogger(d.Logger.Handler(), slog.LevelWarn),
		}
	}
	return a, nil
}

// Start runs the process: it gives unfinished deliveries a job, starts the
// workers (releasing the jobs a stopped process left running), the cron
// schedule, and serves HTTP last, so nothing is accepted before the
// workers run. On an error nothing is left running; Stop still closes the
// store.
func (a *App) Start(ctx context.Context) error {
	if err := a.maint.EnsureDelivery(ctx); err != nil {
		return err
	}
	if err := a.runner.Start(ctx); err != nil {
		return err
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.stopBg = cancel
	if a.st.Shared() {
		a.shareWork(bctx)
	} else {
		a.sched.Start()
	}
	a.started = true
	go func() {
		if err := a.http.Serve(a.ln); !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http server stopped", slog.Any("err", err))
			a.served <- err
		}
	}()
	if a.metricsHTTP != nil {
		go func() {
			if err := a.metricsHTTP.Serve(a.metricsLn); !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("metrics server stopped", slog.Any("err", err))
			}
		}()
	}
	a.checkPagesInBackground()
	a.bg.Go(func() { a.backups.lastOffsite(bctx) })
	a.bg.Go(func() { a.surfaces.Listen(bctx) }) // Slack's Socket Mode, when configured
	return nil
}

// releaseEvery is how often the leading server looks for servers gone
// whose jobs still run (jobs.Runner.ReleaseGone): a killed server's jobs
// run again within two of these and store.LeadLease.
const releaseEvery = 5 * time.Second

// sharedPoll is how often a server on a database that others share looks
// for jobs they committed, besides their notifications.
const sharedPoll = time.Second

// notifyEvery bounds how often the other servers' commits wake this
// server's runner: each commit that makes a job ready notifies every
// server, and each wake for a job due now costs a look at the queue (a
// round trip or two), so a burst of commits wakes it once at once and once
// more at the end of the interval, not once a commit. A job due later
// costs no look until it is due (Runner.WakeAt).
const notifyEvery = 25 * time.Millisecond

// coalesce returns a signal that calls fn at once, and then at most once
// every interval for all the signals given meanwhile, until ctx ends: a
// signal is never lost, only merged with the others of its interval. Its
// goroutine joins wg.
func coalesce(ctx context.Context, wg *sync.WaitGroup, every time.Duration, fn func()) func() {
	pending := make(chan struct{}, 1)
	wg.Go(func() {
		pause := time.NewTimer(every)
		pause.Stop()
		defer pause.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-pending:
			}
			fn()
			pause.Reset(every)
			select {
			case <-ctx.Done():
				return
			case <-pause.C:
			}
		}
	})
	return func() {
		select {
		case pending <- struct{}{}:
		default:
		}
	}
}

// poll is the runner's Options.Poll for st.
func poll(st *store.Store) time.Duration {
	if st.Shared() {
		return sharedPoll
	}
	return 0
}

// shareWork is the part of Start that only a server on a shared database
// (PostgreSQL, several servers) has: the other servers' commits wake its
// runner (LISTEN/NOTIFY, or its poll alone behind a pooler that breaks
// it), and the schedule runs only while this server leads them, so that
// the periodic work runs on one server at a time and moves to another
// within store.LeadLease once its leader is gone.
func (a *App) shareWork(ctx context.Context) {
	a.log.Info("this server shares its database with the others on it", slog.String("owner", a.st.Owner()))
	woke := coalesce(ctx, &a.bg, notifyEvery, a.runner.Wake)
	a.bg.Go(func() {
		err := a.st.Listen(ctx, func(at time.Time) {
			if at.After(time.Now()) {
				a.runner.WakeAt(at) // no look at the queue until then
			} else {
				woke()
			}
		})
		if err != nil {
			a.log.Warn(err.Error(), slog.Duration("poll", sharedPoll))
		}
	})
	a.bg.Go(func() {
		a.st.Lead(ctx, func(lctx context.Context) {
			a.log.Info("this server leads: it runs the scheduled work", slog.Duration("lease", store.LeadLease))
			a.sched.Start()
			<-lctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
			a.sched.Stop(sctx)
			cancel()
			if ctx.Err() == nil {
				a.log.Warn("this server lost the lead (its connection to the database); another takes over the scheduled work")
			}
		})
	})
}

// checkPagesInBackground runs the page walk that the open of a large file
// left out (store.Options.CheckPages), once the server is ready and the
// writes are quiet (quietMoment, pagecheck.go): a damaged page is logged
// and fails /readyz from then on.
func (a *App) checkPagesInBackground() {
	a.checked = make(chan struct{})
	if !a.st.Deferred() {
		close(a.checked)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopCheck = cancel
	a.log.Info("checking the database's pages in the background",
		slog.String("starts", fmt.Sprintf("once %s see at most %d commits, within %s at the latest",
			pageWalkWindow, pageWalkQuiet, pageWalkWindow*pageWalkWindows)))
	go func() {
		defer close(a.checked)
		t0 := time.Now()
		ticker := time.NewTicker(pageWalkWindow)
		why, last, ok := quietMoment(ctx, ticker.C, a.st.Commits, pageWalkQuiet, pageWalkWindows)
		ticker.Stop()
		if !ok {
			return
		}
		a.log.Info("the background page check started", slog.String("why", why),
			slog.Duration("waited", time.Since(t0).Round(time.Second)),
			slog.Uint64("commits_last_window", last), slog.Duration("window", pageWalkWindow))
		t1 := time.Now()
		err := a.st.CheckPages(ctx)
		if ctx.Err() == nil {
			a.walked.Store(true)
		}
		switch {
		case err == nil:
			a.log.Info("the database's pages are sound", slog.Duration("took", time.Since(t1)))
		case ctx.Err() == nil:
			a.log.Error("the database is damaged; restore a backup", slog.Any("err", err))
		}
	}()
}

// Stop shuts the process down in order: stop accepting HTTP and let
// requests finish, drain the workers (jobs still running after
// ShutdownGrace are released, never discarded; a bulk replay among them
// resumes at its next item after a restart), stop
// cron, and close the database last. ctx can cut both waits short. Stop
// also releases an app that was built but never started.
func (a *App) Stop(ctx context.Context) error {
	// A restore in progress finishes first: the store is not closed under it.
	a.backups.restoring.Lock()
	defer a.backups.restoring.Unlock()
	if !a.started {
		a.ln.Close()
		if a.metricsLn != nil {
			a.metricsLn.Close()
		}
		return a.closeStore()
	}
	hctx, cancel := context.WithTimeout(ctx, HTTPGrace)
	defer cancel()
	if err := a.http.Shutdown(hctx); err != nil {
		a.log.Warn("http shutdown", slog.Any("err", err))
		a.http.Close()
	}
	if a.metricsHTTP != nil {
		if err := a.metricsHTTP.Shutdown(hctx); err != nil {
			a.metricsHTTP.Close()
		}
	}
	jctx, cancelJobs := context.WithTimeout(ctx, ShutdownGrace)
	defer cancelJobs()
	if err := a.runner.Stop(jctx); err != nil {
		a.log.Warn("job runner stop", slog.Any("err", err))
	}
	a.stopBg() // the lead too, so that it starts no schedule from now on
	a.sched.Stop(jctx)
	if a.stopCheck != nil {
		a.stopCheck()
	}
	<-a.checked
	a.bg.Wait()
	a.surfaces.Wait() // the answers sent after a surface's request
	return a.closeStore()
}

func (a *App) closeStore() error {
	if err := a.st.Close(); err != nil {
		return fmt.Errorf("close the database: %w", err)
	}
	return nil
}

// Failed delivers the error that ended serving HTTP before Stop (the
// listener failed); it is logged already.
func (a *App) Failed() <-chan error { return a.served }

// Addr is the address HTTP is served on.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// MetricsAddr is where the metrics_addr listener listens; nil without one.
func (a *App) MetricsAddr() net.Addr {
	if a.metricsLn == nil {
		return nil
	}
	return a.metricsLn.Addr()
}

// Store is the process's store: for the first-admin bootstrap between New
// and Start, and for tests.
func (a *App) Store() *store.Store { return a.st }

// Web is the HTTP side, for web's own tests.
func (a *App) Web() *web.Server { return a.web }

// Jobs is the job runner, for tests.
func (a *App) Jobs() *jobs.Runner { return a.runner }

// BulkReplay is the bulk replay job kind, for tests to set its Pause
// before Start.
func (a *App) BulkReplay() *workers.BulkReplayJob { return a.bulk }

// newDrafter builds the configured drafter.
func newDrafter(cfg *config.Config) (workers.Drafter, error) {
	return drafterOf(cfg, cfg.Drafter)
}

// newCanary builds the candidate of drafter.canary, nil without one.
func newCanary(cfg *config.Config) (*workers.Canary, error) {
	c := cfg.Drafter.Canary
	if c == nil {
		return nil, nil
	}
	dr, err := drafterOf(cfg, c.Candidate(cfg.Drafter))
	if err != nil {
		return nil, fmt.Errorf("drafter.canary: %w", err)
	}
	return &workers.Canary{Drafter: dr, Version: c.PromptVersion, Share: c.Share, Client: cfg.ClientOf, Runs: c.Runs}, nil
}

// drafterOf builds drafter c of cfg.
func drafterOf(cfg *config.Config, c config.Drafter) (workers.Drafter, error) {
	switch c.Kind {
	case "template":
		return drafter.NewTemplate(c.Template, c.PromptVersion, c.Delay)
	case "openai":
		return drafter.NewOpenAI(drafter.OpenAIConfig{
			BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, PromptVersion: c.PromptVersion,
			SystemPrompt: c.SystemPrompt, Timeout: c.Timeout, ChannelPrompts: c.ChannelPrompts,
			Structured: c.Structured,
			Price:      drafter.Price{Input: c.Price.Input, Output: c.Price.Output, Currency: c.Price.Currency},
		})
	default:
		return nil, fmt.Errorf("config: drafter.kind: %q is not a drafter (use template or openai)", c.Kind)
	}
}

// seedFacts reads each client's facts_file into its facts versions
// (facts.Seed: version 1 of a client without any, the next version of a
// changed file unless a person edited the facts since, when the file's
// text is offered on the facts page instead) and logs what it did.
func (a *App) seedFacts(now time.Time) error {
	for _, cl := range a.cfg.ClientList() {
		path, text := a.cfg.FactsFileOf(cl.ID)
		out, v, err := facts.Seed(context.Background(), a.st, cl.ID, path, text, now)
		if err != nil {
			return fmt.Errorf("app: facts of client %s: %w", cl.ID, err)
		}
		switch out {
		case facts.Seeded, facts.Updated:
			a.log.Info("facts_file read as a new facts version", slog.String("client", cl.ID), slog.String("file", path), slog.Int("version", v.Version), slog.String("outcome", string(out)))
		case facts.Offered:
			a.log.Warn("facts_file changed after the facts were edited on the dashboard: the edit stays, the file's text waits on the facts page", slog.String("client", cl.ID), slog.String("file", path), slog.Int("version", v.Version))
		}
	}
	return nil
}

// lease outlasts the slowest call a job makes (the model, or a provider),
// so the reaper only takes jobs whose worker is truly gone or hung.
func lease(cfg *config.Config) time.Duration {
	longest := cfg.Drafter.Timeout + cfg.Drafter.Delay
	for _, p := range cfg.Providers {
		longest = max(longest, 2*p.Timeout+p.Delay) // a lookup and a send
	}
	return longest + time.Minute
}
