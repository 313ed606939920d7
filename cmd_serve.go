package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/jobs"
	"github.com/handoff/handoff/jobs/drafter"
	"github.com/handoff/handoff/jobs/provider"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/web"
)

// Shutdown budget: HTTP gets this long to finish requests, then running jobs
// get as long again before they are released back to the queue.
const shutdownGrace = 15 * time.Second

// serve runs the server until ctx ends (SIGTERM or SIGINT), then shuts down
// in order: stop accepting HTTP, drain the workers, stop cron, close the
// database last.
func serve(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("serve", e)
	cfgPath := fs.String("config", "", "configuration file (YAML); none runs the demo")
	dataDir := fs.String("data", "", "data folder (default from the config, else "+config.DefaultDataDir+")")
	addr := fs.String("addr", "", "listen address (default from the config, else "+config.DefaultAddr+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	e.override(cfgPath, "HANDOFF_CONFIG")
	cfg, err := config.Load(*cfgPath, e.getenv)
	if err != nil {
		return err
	}
	e.override(dataDir, "HANDOFF_DATA")
	e.override(addr, "HANDOFF_ADDR")
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *addr != "" {
		cfg.Addr = *addr
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, nil))
	if e.getenv("GOGC") == "" {
		// Every webhook allocates a few short-lived records; with memory to
		// spare on one box, collecting a quarter as often buys throughput
		// (measured with bench/: about +15% accepted/s). GOGC overrides.
		debug.SetGCPercent(400)
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}

	// A damaged file is refused in one sentence, never opened: bbolt would
	// crash on it, or a zero-length file would become an empty database.
	st, err := store.Open(cfg.DataDir, store.Options{CheckPages: true})
	if err != nil {
		return err
	}
	defer st.Close()

	if err := firstAdmin(ctx, st, e); err != nil {
		return err
	}
	d, err := newDrafter(cfg.Drafter)
	if err != nil {
		return err
	}
	providers, err := provider.Open(cfg.Providers, provider.Deps{Sandbox: st})
	if err != nil {
		return err
	}
	metrics := web.NewMetrics(st, cfg, time.Now)
	kinds, draftJob := jobs.Kinds(st, cfg, d, providers)
	draftJob.Observe = metrics.ModelCall
	if e.getenv("HANDOFF_FAULT") == "exit-after-draft-commit" {
		// Crash tests: die the hardest way right after a draft commits.
		draftJob.AfterSave = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	runner := jobs.NewRunner(st, kinds, jobs.Options{
		Workers: cfg.Workers,
		Lease:   lease(cfg),
		Backoff: jobs.Backoff{Base: cfg.Retry.BaseDelay, Max: cfg.Retry.MaxDelay},
		Logger:  log,
		Observe: metrics.JobAttempt,
	})
	srv, err := web.New(web.Deps{Config: cfg, Store: st, Jobs: runner, Logger: log, APIToken: e.getenv("HANDOFF_API_TOKEN"), Metrics: metrics})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	httpSrv := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute, // backups stream for a while
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	// Everything that can fail is set up before the workers start, so an
	// error here leaves nothing running behind the deferred Close.
	sched := jobs.NewSchedule(log)
	if err := sched.Add("reap job leases", "@every 1m", time.Minute, runner.Reap); err != nil {
		ln.Close()
		return err
	}
	maint := &jobs.Maintenance{Store: st, Config: cfg, Log: log, Backups: metrics, Wake: runner.Wake}
	// The last good backup survives a restart: it is the newest file on disk.
	if files, err := store.Backups(jobs.BackupDir(cfg.DataDir)); err == nil && len(files) > 0 {
		metrics.RestoreLastBackup(files[0].ModTime)
	}
	if err := maint.EnsureDelivery(ctx); err != nil {
		ln.Close()
		return err
	}
	for _, task := range []struct {
		name, spec string
		fn         func(context.Context) error
	}{
		{"resolve unfinished deliveries", "@every 1m", maint.EnsureDelivery},
		{"flag stuck leads", "@every 1m", maint.FlagStuck},
		{"prune by retention", "@every 1h", maint.Prune},
		{"scheduled backup", cfg.Backups.Schedule, maint.Backup},
	} {
		if err := sched.Add(task.name, task.spec, 30*time.Minute, task.fn); err != nil {
			ln.Close()
			return fmt.Errorf("schedule %s: %w", task.name, err)
		}
	}
	if err := runner.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	sched.Start()

	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "data", cfg.DataDir, "version", version())

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", slog.Any("err", err))
		}
	}
	// A fresh context: the signal's context is already done.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", slog.Any("err", err))
	}
	if err := srv.Stop(sctx); err != nil {
		log.Warn("bulk replay stop", slog.Any("err", err))
	}
	jctx, cancelJobs := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancelJobs()
	if err := runner.Stop(jctx); err != nil {
		log.Warn("job runner stop", slog.Any("err", err))
	}
	sched.Stop(jctx)
	if err := st.Close(); err != nil {
		return fmt.Errorf("close the database: %w", err)
	}
	log.Info("stopped")
	return nil
}

// newDrafter builds the configured drafter.
func newDrafter(c config.Drafter) (jobs.Drafter, error) {
	switch c.Kind {
	case "template":
		return drafter.NewTemplate(c.Template, c.PromptVersion, c.Delay)
	case "openai":
		return drafter.NewOpenAI(drafter.OpenAIConfig{
			BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, PromptVersion: c.PromptVersion,
			SystemPrompt: c.SystemPrompt, Timeout: c.Timeout,
		})
	default:
		return nil, fmt.Errorf("config: drafter.kind: %q is not a drafter (use template or openai)", c.Kind)
	}
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

// firstAdmin creates the admin user "admin" on a database with no users:
// with HANDOFF_ADMIN_PASSWORD, or a generated password printed once.
func firstAdmin(ctx context.Context, st *store.Store, e env) error {
	users, err := st.Users()
	if err != nil || len(users) > 0 {
		return err
	}
	pw, generated := e.getenv("HANDOFF_ADMIN_PASSWORD"), false
	if pw == "" {
		pw, generated = web.GeneratePassword(), true
	}
	hash, err := web.HashPassword(pw)
	if err != nil {
		return fmt.Errorf("HANDOFF_ADMIN_PASSWORD: %w", err)
	}
	err = st.CreateUser(ctx, store.User{Name: "admin", Role: store.RoleAdmin, PasswordHash: hash, CreatedAt: time.Now().UTC()})
	if errors.Is(err, store.ErrExists) {
		// Someone created "admin" since Users ran (user add against the
		// same folder): nothing was stored, so there is no password to print.
		return nil
	}
	if err != nil {
		return err
	}
	if generated {
		// Printed to stdout, not logged: the JSON logs go to stderr, which
		// log collectors keep.
		fmt.Fprintf(e.stdout, "created the admin user \"admin\" with password %s (shown once; set HANDOFF_ADMIN_PASSWORD to choose it)\n", pw)
	}
	return nil
}
