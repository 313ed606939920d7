package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/store"
)

// TestFactsAcrossRestarts: the facts_file is version 1 at the first
// start; an admin's edit survives a start with a changed file, whose text
// is offered and logged instead; a start after the file changes again
// with nobody editing in between (the current version from the file, read
// in by an admin) takes the file's text as the next version.
func TestFactsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "facts.md")
	var logs bytes.Buffer
	var running *app.App
	halt := func() {
		t.Helper()
		if running == nil {
			return
		}
		if err := running.Store().Check(); err != nil {
			t.Errorf("check: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := running.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		running = nil
	}
	t.Cleanup(halt)
	start := func(text string) *store.Store {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		cfg.DataDir = dir
		read, err := config.ReadFacts(file)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Drafter.FactsFile, cfg.Drafter.Facts = file, read
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(cfg, app.Deps{Listener: ln, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err != nil {
			ln.Close()
			t.Fatal(err)
		}
		running = a
		return a.Store()
	}
	current := func(st *store.Store) store.FactsVersion {
		t.Helper()
		v, ok, err := facts.Current(st, config.DefaultClient.ID)
		if err != nil || !ok {
			t.Fatalf("current facts: %v %v", ok, err)
		}
		return v
	}

	st := start("- Haircut €35\n")
	if v := current(st); v.Version != 1 || v.Source != facts.SourceConfig || v.Entries[0].Text != "Haircut €35" {
		t.Fatalf("first start: %+v", v)
	}
	if _, err := facts.Save(context.Background(), st, facts.Edit{Client: config.DefaultClient.ID, Text: "- Haircut €38 & <b>tip</b>", Author: "root", Source: facts.SourceDashboard, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	halt()

	st = start("- Haircut €40\n")
	if v := current(st); v.Version != 2 || v.Author != "root" {
		t.Errorf("after a start with a changed file: %+v, want the admin's version 2", v)
	}
	if f, ok, err := facts.Offer(st, config.DefaultClient.ID); err != nil || !ok || f.Text != "- Haircut €40" {
		t.Errorf("offer = %+v %v %v", f, ok, err)
	}
	if !strings.Contains(logs.String(), "the edit stays, the file's text waits on the facts page") {
		t.Errorf("the start did not log the offer: %s", logs.String())
	}
	if _, err := facts.Reload(context.Background(), st, config.DefaultClient.ID, file, "root", time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	halt()

	st = start("- Haircut €42\n")
	if v := current(st); v.Version != 4 || v.Source != facts.SourceConfig || v.Text != "- Haircut €42" {
		t.Errorf("after the file changed with nobody editing: %+v, want version 4 from the file", v)
	}
}
