package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
)

// serve runs the server until ctx ends (SIGTERM or SIGINT), then shuts down
// in order (app.Stop): stop accepting HTTP, drain the workers, stop cron,
// close the database last.
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

	deps := app.Deps{Logger: log, APIToken: e.getenv("HANDOFF_API_TOKEN")}
	if e.getenv("HANDOFF_FAULT") == "exit-after-draft-commit" {
		// Crash tests: die the hardest way right after a draft commits.
		deps.AfterDraftSave = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	a, err := app.New(cfg, deps)
	if err != nil {
		return err
	}
	// A fresh context for stopping: the signal's context is already done.
	stop := func() error { return a.Stop(context.Background()) }
	if err := firstAdmin(ctx, a.Store(), e); err != nil {
		stop()
		return err
	}
	if err := a.Start(ctx); err != nil {
		stop()
		return err
	}
	log.Info("listening", "addr", a.Addr().String(), "data", cfg.DataDir, "version", version())

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case <-a.Failed():
	}
	if err := stop(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
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
		pw, generated = password.Generate(), true
	}
	hash, err := password.Hash(pw)
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
