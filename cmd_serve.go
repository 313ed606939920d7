package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
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
	config.Override(&cfg.DatabaseURL, config.SourceDefault, "", e.getenv("HANDOFF_DATABASE_URL"))
	log := slog.New(slog.NewJSONHandler(e.stderr, nil))
	// Before the store opens, so that a refused folder is explained too.
	// The database URL may hold a password: only its engine is said.
	database := "bbolt"
	if cfg.DatabaseURL != "" {
		database = "postgresql (experimental)"
	}
	log.Info("configuration", "config", *cfgPath, "config_source", cfgFrom,
		"addr", cfg.Addr, "addr_source", from.Addr, "data_dir", cfg.DataDir, "data_dir_source", from.DataDir,
		"database", database)
	// The garbage collector keeps Go's defaults (GOGC=100), and honours
	// GOMEMLIMIT as a memory target. The old built-in GOGC=400 bought about
	// 15% accepted/s on small webhooks, but under 1 MiB ones it peaked at
	// 1284 MiB RSS against 1053 MiB at GOGC=100 and 782 MiB with
	// GOMEMLIMIT=256MiB (go run ./bench bodies, README "Memory"). Without
	// GOMEMLIMIT, limits.memory sets the limit (cmd_memory.go).
	memLimit, memFrom := applyMemoryLimit(cfg.Limits, e.getenv)
	log.Info("memory limit", "memory_limit", memLimit, "memory_limit_source", memFrom)
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
	setup, err := firstAdmin(ctx, a.Store(), e, cfg.DataDir)
	if err != nil {
		stop()
		return err
	}
	if err := a.Start(ctx); err != nil {
		stop()
		return err
	}
	if setup != "" {
		if err := tellSetupLink(e, cfg, a.Addr().String(), setup); err != nil {
			stop()
			return err
		}
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
// secret, for serve to tell once the server listens (tellSetupLink). No
// password is ever printed or logged. Once there is a person, the file of
// an earlier start's link is deleted.
func firstAdmin(ctx context.Context, st *store.Store, e env, dataDir string) (setupSecret string, err error) {
	people, err := st.Users()
	if err != nil || len(people) > 0 {
		if err == nil {
			// A link written by an earlier start is dead now.
			_ = os.Remove(filepath.Join(dataDir, users.SetupLinkFile))
		}
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
		if err == nil {
			_ = os.Remove(filepath.Join(dataDir, users.SetupLinkFile))
		}
		return "", err
	}
	secret := users.NewSecret()
	made, err := st.CreateSetupLink(ctx, users.HashSecret(secret), now.Add(setupLinkLife))
	if err != nil || !made {
		return "", err
	}
	return secret, nil
}

// tellSetupLink tells the operator where to create the first admin, never
// in the JSON logs on stderr, and only a link that works once within the
// hour, never a password. The link is written to a file in the data folder
// that only this user can read; stdout names the file, and carries the link
// itself only on a terminal: otherwise whatever reads stdout (docker's log,
// the journal) would keep a live link beyond its reader.
func tellSetupLink(e env, cfg *config.Config, addr string, secret string) error {
	base := cfg.BaseURL
	if base == "" {
		base = "http://" + addr
	}
	link := base + users.SetupPath + secret
	path := filepath.Join(cfg.DataDir, users.SetupLinkFile)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // what the operator can open from anywhere
	}
	if err := writePrivate(path, []byte(link+"\n")); err != nil {
		return fmt.Errorf("write the setup link: %w", err)
	}
	const after = "to create the first admin (the link works once; restart for a new one, or set HANDOFF_ADMIN_PASSWORD instead)"
	if isTerminal(e.stdout) {
		fmt.Fprintf(e.stdout, "no users yet: open %s within an hour %s; it is also in %s\n", link, after, path)
		return nil
	}
	fmt.Fprintf(e.stdout, "no users yet: the setup link is in %s (readable by this user only); open it within an hour %s\n", path, after)
	return nil
}

// isTerminal reports whether w is a character device (a terminal), not a
// pipe or a file something keeps.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// writePrivate writes data to path, mode 0600 whatever was there before:
// a temporary file beside it (created 0600), synced, renamed over it.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".setup-link-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
