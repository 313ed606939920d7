package pgengine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoNotify is a Listen whose own probe never came back: the server
// took the LISTEN, but its notifications do not reach this connection.
// That is what a pooler in transaction mode (PgBouncer's
// pool_mode=transaction) does, since it hands each transaction to any
// server connection: the one that listened is not the one this process
// reads. The caller polls instead.
var ErrNoNotify = errors.New("pgengine: LISTEN/NOTIFY does not reach this process (is a pooler in transaction mode between it and PostgreSQL? point database_url at the server, or at a pooler in session mode): polling instead")

// channelOf is the notification channel of schema: one per schema, as
// the advisory locks are, so that two schemas of one database (the
// tests') never wake each other.
func channelOf(schema string) string {
	return fmt.Sprintf("handoff_%016x", uint64(lockKey("notify", schema)))
}

// probeWait bounds how long Listen waits for its own probe.
const probeWait = 5 * time.Second

// Listen calls woke with the payload of each commit's Notify, by any
// process, until ctx ends; it returns nil then. It listens on a
// connection of its own: when that is lost it calls woke("") once (a
// notification may have been missed meanwhile) and listens again on a new
// one, retrying every second up to every ten until it can.
//
// Each time it starts listening it proves that notifications arrive: it
// notifies its channel from another connection and waits for that probe.
// When the first probe does not come back it returns ErrNoNotify; a later
// one (after a reconnect) is retried as a lost connection is.
func (d *DB) Listen(ctx context.Context, woke func(payload string)) error {
	backoff := time.Second
	for first := true; ; first = false {
		err := d.listen(ctx, woke)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrNoNotify) && first {
			return err
		}
		woke("")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// ErrNoSession is an Open with a hold (Options.Exclusive or Shared) whose
// connection is no session of its own: a pooler in transaction mode hands
// each of its transactions to any server connection, so the hold's and
// the lead's session locks would stay with whichever server connection
// took them, after this process is gone, and no other process would ever
// run its jobs or lead.
var ErrNoSession = errors.New("pgengine: database_url goes through a pooler in transaction mode (a LISTEN on a connection of this process's own did not hear its NOTIFY): the servers' locks need a session each; point database_url at PostgreSQL itself, or at a pooler in session mode")

// proveSession checks that a connection made with cc keeps its session
// from one statement to the next, as the hold and the lead need: it
// listens on a channel of its own, notifies it from a second connection
// and waits up to probeWait for the notification, which a pooler in
// transaction mode does not deliver (the LISTEN stays on a server
// connection that has gone back to the pooler's pool). Both connections
// speak the simple protocol: a pooler in transaction mode also loses
// prepared statements, which would fail the probe before it could say why.
func proveSession(ctx context.Context, cc *pgx.ConnConfig) error {
	cc = cc.Copy()
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	listener, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return classify(fmt.Errorf("pgengine: connect: %w", err))
	}
	defer listener.Close(context.Background())
	notifier, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return classify(fmt.Errorf("pgengine: connect: %w", err))
	}
	defer notifier.Close(context.Background())
	var b [8]byte
	rand.Read(b[:])
	channel := "handoff_session_" + hex.EncodeToString(b[:])
	if _, err := listener.Exec(ctx, "listen "+quoteIdent(channel)); err != nil {
		return classify(fmt.Errorf("pgengine: listen: %w", err))
	}
	if _, err := notifier.Exec(ctx, "select pg_notify($1, '')", channel); err != nil {
		return classify(fmt.Errorf("pgengine: notify: %w", err))
	}
	wctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	if _, err := listener.WaitForNotification(wctx); err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return ErrNoSession
		}
		return classify(fmt.Errorf("pgengine: listen: %w", err))
	}
	return nil
}

// listen is one connection's turn of Listen: it returns when the
// connection fails or ctx ends.
func (d *DB) listen(ctx context.Context, woke func(string)) error {
	conn, err := pgx.ConnectConfig(ctx, d.cc)
	if err != nil {
		return fmt.Errorf("pgengine: listen: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "listen "+quoteIdent(d.channel)); err != nil {
		return fmt.Errorf("pgengine: listen: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	probe := "probe " + hex.EncodeToString(b[:])
	if _, err := d.pool.Exec(ctx, "select pg_notify($1, $2)", d.channel, probe); err != nil {
		return fmt.Errorf("pgengine: listen: the probe: %w", err)
	}
	deadline := time.Now().Add(probeWait)
	for {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		n, err := conn.WaitForNotification(pctx)
		expired := pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			if expired {
				return ErrNoNotify
			}
			return fmt.Errorf("pgengine: listen: %w", err)
		}
		if n.Payload == probe {
			break
		}
		woke(n.Payload) // a commit's, before the probe
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("pgengine: listen: %w", err)
		}
		woke(n.Payload)
	}
}
