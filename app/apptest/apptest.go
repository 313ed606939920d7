// Package apptest runs the whole process, wired by app exactly as serve
// wires it, inside a test: in a temporary data folder, on a free loopback
// port, stopped in order when the test ends and its file checked after.
package apptest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
)

// New builds the app for cfg (nil: the demo config) without starting it, so
// a test can reach inside before the first request; the test's end stops
// it and checks the database file. The data folder is a fresh temporary
// one unless cfg names another (the demo's ./data never counts: a test
// must not touch the working folder), and a nil d.Listener is a free port
// on 127.0.0.1.
func New(t testing.TB, cfg *config.Config, d app.Deps) *app.App {
	t.Helper()
	if cfg == nil {
		cfg = config.Default()
	}
	if cfg.DataDir == "" || cfg.DataDir == config.DefaultDataDir {
		cfg.DataDir = t.TempDir()
	}
	if d.Listener == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		d.Listener = ln
	}
	a, err := app.New(cfg, d)
	if err != nil {
		d.Listener.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop the app: %v", err)
		}
		var st *store.Store
		var err error
		if cfg.DatabaseURL != "" {
			st, err = store.OpenURL(ctx, cfg.DatabaseURL, store.Options{})
		} else {
			st, err = store.Open(cfg.DataDir, store.Options{})
		}
		if err != nil {
			t.Errorf("reopen the store after the test: %v", err)
			return
		}
		defer st.Close()
		r, err := st.Inspect()
		if err == nil && expected(cfg.DataDir) {
			r.Unreadable, r.MoreUnreadable = nil, 0 // the test damaged them on purpose
		}
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			t.Errorf("store check after test: %v", err)
		}
	})
	return a
}

// rotten is the data folders whose records a test damaged on purpose.
var rotten sync.Map

// ExpectUnreadable says that the test damaged records of the database in
// dir on purpose: the check after the test then still fails on structural
// damage and on any index disagreement, not on those records.
func ExpectUnreadable(dir string) { rotten.Store(dir, true) }

func expected(dir string) bool { _, ok := rotten.Load(dir); return ok }

// Start builds the app as New does and starts it.
func Start(t testing.TB, cfg *config.Config, d app.Deps) *app.App {
	t.Helper()
	a := New(t, cfg, d)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

// URL is the base URL of a's HTTP server.
func URL(a *app.App) string { return "http://" + a.Addr().String() }
