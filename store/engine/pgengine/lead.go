package pgengine

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// LeadCheck is Lead's default check: how often a leader proves it still
// holds the lead, and how often the others try to take it.
const LeadCheck = 2 * time.Second

// Lease is how long the lead can take to move once its holder is gone:
// the time a holder needs to notice it lost its connection (a ping every
// check, answered within a check), which is also the fence a new leader
// waits before it starts. A killed leader's session ends on the server at
// once (its socket closes), so another process leads within a check to
// try, plus this: 1.5 Lease.
func Lease(check time.Duration) time.Duration { return 2 * check }

// Lead runs lead while this process leads the schema, until ctx ends, and
// returns once lead has returned. The lead is a session advisory lock on
// a connection of its own (so at most one process of the schema holds
// it): the others try to take it every check. The holder pings its
// connection every check, each ping bounded by a check; once one fails
// (the connection lost, the server restarted) it cancels lead's context
// and, after lead returns, tries again like the others.
//
// The fence: a process that takes the lock waits Lease(check) before it
// runs lead, so a holder whose connection died (which ended its session,
// and released the lock) has noticed and cancelled its own lead by then.
// Work under the lead is therefore never begun by two processes at once,
// though a task already running when its leader lost the lead may finish
// beside the new leader's first ones: each task is its own transactions.
// check <= 0 is LeadCheck.
func (d *DB) Lead(ctx context.Context, check time.Duration, lead func(context.Context)) {
	if check <= 0 {
		check = LeadCheck
	}
	key := lockKey("leader", d.schema)
	for {
		conn := d.tryLead(ctx, key, check)
		if conn != nil {
			d.hold1(ctx, conn, check, lead)
			conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(check):
		}
	}
}

// tryLead connects and takes the lead's lock: the connection holding it,
// or nil (held by another, or the server unreachable).
func (d *DB) tryLead(ctx context.Context, key int64, check time.Duration) *pgx.Conn {
	cctx, cancel := context.WithTimeout(ctx, check)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, d.cc)
	if err != nil {
		return nil
	}
	var got bool
	if err := conn.QueryRow(cctx, "select pg_try_advisory_lock($1)", key).Scan(&got); err != nil || !got {
		conn.Close(context.Background())
		return nil
	}
	return conn
}

// hold1 is one lead: the fence, then lead, while every ping answers.
func (d *DB) hold1(ctx context.Context, conn *pgx.Conn, check time.Duration, lead func(context.Context)) {
	tick := time.NewTicker(check)
	defer tick.Stop()
	alive := func() bool {
		pctx, cancel := context.WithTimeout(ctx, check)
		defer cancel()
		return conn.Ping(pctx) == nil
	}
	fence := time.NewTimer(Lease(check))
	defer fence.Stop()
	for fenced := false; !fenced; {
		select {
		case <-ctx.Done():
			return
		case <-fence.C:
			fenced = true
		case <-tick.C:
			if !alive() {
				return
			}
		}
	}
	if !alive() {
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-tick.C:
			if !alive() {
				return
			}
		}
	}
}
