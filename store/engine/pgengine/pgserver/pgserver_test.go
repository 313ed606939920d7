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
// settings asked for, Restart keeps its data and ends its sessions, and
// Stop removes its folder.
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
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "create table kept (x int); insert into kept values (7)"); err != nil {
		t.Fatal(err)
	}
	// A restart ends the sessions and keeps the data.
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "select 1"); err == nil {
		t.Error("a session from before the restart still answers")
	}
	c2, err := pgx.Connect(ctx, srv.URLFor("other"))
	if err != nil {
		t.Fatalf("connect after the restart: %v", err)
	}
	defer c2.Close(ctx)
	var x int
	if err := c2.QueryRow(ctx, "select x from kept").Scan(&x); err != nil || x != 7 {
		t.Errorf("after the restart: %d, %v; want the row written before it", x, err)
	}
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(srv.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's folder after Stop: %v; want it removed", err)
	}
}
