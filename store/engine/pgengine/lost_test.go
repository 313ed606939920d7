package pgengine_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

// cutter is a proxy in front of the test server that, once armed, cuts
// the first connection that sends a given key: a write transaction's
// buffered writes go with its COMMIT in one batch, so that is the COMMIT
// (whose text a connection's statement cache sends only once). It cuts
// before passing it on ("before", so the server never commits) or once
// the server has answered it ("after": committed, the answer never
// delivered).
type cutter struct {
	ln    net.Listener
	dial  func() (net.Conn, error)
	armed atomic.Pointer[armed]
	cut   chan struct{}
}

type armed struct{ mode, key string }

func newCutter(t *testing.T) (*cutter, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, dial: func() (net.Conn, error) { return net.Dial(network, addr) }, cut: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { c.serve(client) })
		}
	})
	url := fmt.Sprintf("host=%s port=5432 user=%s dbname=%s sslmode=disable", dir, cfg.User, cfg.Database)
	if cfg.Password != "" {
		url += " password=" + cfg.Password
	}
	return c, url
}

func (c *cutter) serve(client net.Conn) {
	defer client.Close()
	server, err := c.dial()
	if err != nil {
		return
	}
	defer server.Close()
	var swallow atomic.Bool
	go func() { // server → client; after an armed COMMIT, its answer is dropped with the connection
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && swallow.Load() {
				client.Close()
				server.Close()
				c.cut <- struct{}{}
				return
			}
			if n > 0 {
				if _, err := client.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if a := c.armed.Load(); n > 0 && a != nil && bytes.Contains(buf[:n], []byte(a.key)) {
			if c.armed.CompareAndSwap(a, nil) {
				if a.mode == "before" {
					c.cut <- struct{}{}
					return // both closed unforwarded: the server rolls back
				}
				swallow.Store(true)
			}
		}
		if n > 0 {
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *cutter) arm(mode, key string) { c.armed.Store(&armed{mode, key}) }

// A connection lost after COMMIT reached the server but before its answer
// came back: Update asks the server on another connection and reports the
// commit as done, never as failed; lost before COMMIT was sent, it reports
// the failure, and nothing was written.
func TestCommitAnswerLost(t *testing.T) {
	proxy, url := newCutter(t)
	db, err := pgengine.Open(context.Background(), url, pgengine.Options{Schema: pgtest.Schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(k string) error {
		_, err := db.Update(func(tx engine.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bk)
			if err != nil {
				return err
			}
			return b.Put([]byte(k), []byte("v"))
		})
		return err
	}
	get := func(k string) (v []byte) {
		if err := db.View(func(tx engine.Tx) error {
			if b := tx.Bucket(bk); b != nil {
				v = bytes.Clone(b.Get([]byte(k)))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := put("setup"); err != nil {
		t.Fatal(err)
	}
	proxy.arm("after", "answer-lost")
	if err := put("answer-lost"); err != nil {
		t.Errorf("Update whose COMMIT was answered but the answer lost = %v; want nil (it committed)", err)
	}
	<-proxy.cut
	if v := get("answer-lost"); string(v) != "v" {
		t.Errorf("answer-lost = %q; want the committed v", v)
	}
	proxy.arm("before", "never-sent")
	if err := put("never-sent"); err == nil {
		t.Error("Update whose COMMIT never reached the server = nil; want the failure")
	} else {
		t.Log(err)
	}
	<-proxy.cut
	if v := get("never-sent"); v != nil {
		t.Errorf("never-sent = %q; want absent", v)
	}
}

// TestAnswered tells a server's refusal of a statement (nothing of the
// transaction committed) from the server ending the connection, whose
// error may stand in place of the answer to a COMMIT that committed
// (a primary's shutdown under a pipelined batch): only the first is an
// answer; the second and a connection that failed send the commit to
// its outcome.
func TestAnswered(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"unique violation", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}, true},
		{"read-only transaction", fmt.Errorf("write: %w", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "25006"}), true},
		{"shutdown", fmt.Errorf("write: %w", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}), false},
		{"shutdown, German server", &pgconn.PgError{Severity: "SCHWERWIEGEND", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{"no unlocalized severity (before 9.6)", &pgconn.PgError{Severity: "PANIC", Code: "XX000"}, false},
		{"connection reset", fmt.Errorf("write: %w", syscall.ECONNRESET), false},
	} {
		if got := pgengine.Answered(c.err); got != c.want {
			t.Errorf("%s: answered(%v) = %v; want %v", c.name, c.err, got, c.want)
		}
	}
}
