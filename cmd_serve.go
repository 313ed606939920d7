package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/web"
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
	cfgFrom := config.Override(cfgPath, config.SourceDefault, *cfgPath, e.getenv("HANDOFF_CONFIG"))
	cfg, from, err := config.LoadSources(*cfgPath, e.getenv)
	if err != nil {
		return err
	}
	from.DataDir = config.Override(&cfg.DataDir, from.DataDir, *dataDir, e.getenv("HANDOFF_DATA"))
	from.Addr = config.Override(&cfg.Addr, from.Addr, *addr, e.getenv("HANDOFF_ADDR"))
	log := slog.New(slog.NewJSONHandler(e.stderr, nil))
	// Before the store opens, so that a refused folder is explained too.
	log.Info("configuration", "config", *cfgPath, "config_source", cfgFrom,
		"addr", cfg.Addr, "addr_source", from.Addr, "data_dir", cfg.DataDir, "data_dir_source", from.DataDir)
	// The garbage collector keeps Go's defaults (GOGC=100), and honours
	// GOMEMLIMIT as a memory target. The old built-in GOGC=400 bought about
	// 15% accepted/s on small webhooks, but under 1 MiB ones it peaked at
	// 1284 MiB RSS against 1053 MiB at GOGC=100 and 782 MiB with
	// GOMEMLIMIT=256MiB (go run ./bench bodies, README "Memory").
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}

	cfg.Auth.ResolveSecretKey(e.getenv)
	token := e.getenv("HANDOFF_API_TOKEN")
	if err := config.CheckAPIToken(token); err != nil {
		return err
	}
	deps := app.Deps{Logger: log, APIToken: token}
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
	setup, err := firstAdmin(ctx, a.Store(), e)
	if err != nil {
		stop()
		return err
	}
	if err := a.Start(ctx); err != nil {
		stop()
		return err
	}
	if setup != "" {
		printSetupLink(e, cfg, a.Addr().String(), setup)
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

// setupLinkLife is how long the first start's setup link works.
const setupLinkLife = time.Hour

// firstAdmin prepares the first admin on a database with no users: with
// HANDOFF_ADMIN_PASSWORD it creates "admin" with that password; without,
// it stores a one-time setup link (only its hash) and returns the link's
// secret, for serve to print once the server listens. No password is ever
// printed or logged.
func firstAdmin(ctx context.Context, st *store.Store, e env) (setupSecret string, err error) {
	users, err := st.Users()
	if err != nil || len(users) > 0 {
		return "", err
	}
	now := time.Now().UTC()
	if pw := e.getenv("HANDOFF_ADMIN_PASSWORD"); pw != "" {
		hash, err := password.RuleFor(true, "admin").Hash(pw)
		if err != nil {
			return "", fmt.Errorf("HANDOFF_ADMIN_PASSWORD: %w", err)
		}
		// Users above only spares the hash when there are users; the
		// create checks again in its own transaction, so a user made
		// meanwhile stands and no second admin appears.
		_, err = st.CreateFirstUser(ctx, store.User{Name: "admin", Role: store.RoleAdmin, PasswordHash: hash, CreatedAt: now},
			store.AuditEntry{At: now, Who: "handoff serve", Action: "create user", Target: "admin", Detail: "the first admin, from HANDOFF_ADMIN_PASSWORD"})
		return "", err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	secret := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(secret))
	made, err := st.CreateSetupLink(ctx, sum[:], now.Add(setupLinkLife))
	if err != nil || !made {
		return "", err
	}
	return secret, nil
}

// printSetupLink tells the operator where to create the first admin: on
// stdout, not in the JSON logs on stderr, and only a link that works once
// within the hour, never a password.
func printSetupLink(e env, cfg *config.Config, addr string, secret string) {
	base := cfg.BaseURL
	if base == "" {
		base = "http://" + addr
	}
	fmt.Fprintf(e.stdout, "no users yet: open %s%s%s within an hour to create the first admin (the link works once; restart for a new one, or set HANDOFF_ADMIN_PASSWORD instead)\n", base, web.SetupPath, secret)
}
