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

// Listen calls woke after each commit, by any process, that wrote into a
// bucket of Options.Notify, until ctx ends; it returns nil then. It
// listens on a connection of its own: when that is lost it calls woke
// once (a notification may have been missed meanwhile) and listens again
// on a new one, retrying every second up to every ten until it can.
//
// Each time it starts listening it proves that notifications arrive: it
// notifies its channel from another connection and waits for that probe.
// When the first probe does not come back it returns ErrNoNotify; a later
// one (after a reconnect) is retried as a lost connection is.
func (d *DB) Listen(ctx context.Context, woke func()) error {
	backoff := time.Second
	for first := true; ; first = false {
		err := d.listen(ctx, woke)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrNoNotify) && first {
			return err
		}
		woke()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// listen is one connection's turn of Listen: it returns when the
// connection fails or ctx ends.
func (d *DB) listen(ctx context.Context, woke func()) error {
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
		woke() // a commit's, before the probe
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("pgengine: listen: %w", err)
		}
		woke()
	}
}
