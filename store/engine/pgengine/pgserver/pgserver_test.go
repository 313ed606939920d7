package pgserver_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/handoff/handoff/store/engine/pgengine/pgserver"
)

// A started cluster answers with fsync and synchronous_commit on and the
// settings asked for, and Stop removes its folder.
func TestStartStop(t *testing.T) {
	ctx := context.Background()
	srv, err := pgserver.Start(ctx, pgserver.Options{Settings: []string{"work_mem=8MB"}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Stop()
		}
	}()
	c, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"fsync": "on", "synchronous_commit": "on", "work_mem": "8MB", "listen_addresses": ""} {
		var got string
		if err := c.QueryRow(ctx, "select current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q; want %q", name, got, want)
		}
	}
	if _, err := c.Exec(ctx, "create database other"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	c, err = pgx.Connect(ctx, srv.URLFor("other"))
	if err != nil {
		t.Fatalf("connect to a second database: %v", err)
	}
	c.Close(ctx)
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(srv.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's folder after Stop: %v; want it removed", err)
	}
}
