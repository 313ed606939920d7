package pgserver_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

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

// A standby follows its primary (a row committed there is soon read on
// it) and refuses writes; once the primary is stopped and the standby
// promoted, it takes writes and has every row of the primary.
func TestStandbyPromote(t *testing.T) {
	ctx := context.Background()
	primary, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	primaryUp := true
	defer func() {
		if primaryUp {
			primary.Stop()
		}
	}()
	p, err := pgx.Connect(ctx, primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.Exec(ctx, "create table kept (x int); insert into kept values (1)"); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.StartStandby(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	if standby.Dir == primary.Dir {
		t.Fatalf("the standby shares the primary's folder %s", standby.Dir)
	}
	s, err := pgx.Connect(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var recovering bool
	if err := s.QueryRow(ctx, "select pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
		t.Fatalf("pg_is_in_recovery() on the standby = %v, %v; want true", recovering, err)
	}
	// A row written after the copy streams over.
	if _, err := p.Exec(ctx, "insert into kept values (2)"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := s.QueryRow(ctx, "select count(*) from kept").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for count() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the row written on the primary is not on the standby within 30 s: %s", standby.Log())
		}
		time.Sleep(10 * time.Millisecond) // the next try of a condition with a deadline
	}
	if _, err := s.Exec(ctx, "insert into kept values (3)"); err == nil {
		t.Fatal("the standby took a write")
	}
	// Stop the primary alone, promote the standby.
	primaryUp = false
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, "insert into kept values (3)"); err != nil {
		t.Fatalf("a write on the promoted standby: %v", err)
	}
	if n := count(); n != 3 {
		t.Errorf("%d rows on the promoted standby; want 3", n)
	}
}
