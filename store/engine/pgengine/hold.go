package pgengine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff/handoff/store/engine"
)

// hold is the lock of Options.Exclusive or Options.Shared: a session
// advisory lock (exclusive, or shared) on a connection of its own, watched
// every check, and taken again on a new connection when that one is lost.
// Shared holds exclude only an exclusive one: several servers share a
// schema, and a move (exclusive) never runs beside any of them.
type hold struct {
	cc     *pgx.ConnConfig
	key    int64
	schema string
	check  time.Duration
	shared bool
	// owner is the key of a shared hold's second lock, exclusive and this
	// engine's own (Owner): held on the same connection, so that other
	// processes see from pg_locks whether this one still holds the schema.
	owner int64
	// onLost is Options.OnLost: told once each time the hold is lost.
	onLost func(error)

	mu   sync.Mutex
	conn *pgx.Conn // nil while the lock is lost
	// gone is why the lock is not held (nil while it is): what Update
	// answers meanwhile.
	gone atomic.Pointer[error]
	quit chan struct{}
	done chan struct{}
	// tries counts the takes tried by watch (tests).
	tries atomic.Int64
}

// takeHold takes the lock or fails with engine.ErrLocked when another
// holds it, and starts watching it.
func takeHold(ctx context.Context, cc *pgx.ConnConfig, key int64, schema string, check time.Duration, shared bool, owner int64, onLost func(error)) (*hold, error) {
	if check <= 0 {
		check = 2 * time.Second
	}
	h := &hold{cc: cc, key: key, schema: schema, check: check, shared: shared, owner: owner, onLost: onLost, quit: make(chan struct{}), done: make(chan struct{})}
	conn, err := h.take(ctx)
	if err != nil {
		return nil, err
	}
	h.conn = conn
	go h.watch()
	return h, nil
}

// take connects and takes the lock.
func (h *hold) take(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, h.cc)
	if err != nil {
		return nil, classify(fmt.Errorf("pgengine: connect: %w", err))
	}
	q, what := "select pg_try_advisory_lock($1)", "the exclusive lock"
	if h.shared {
		q, what = "select pg_try_advisory_lock_shared($1)", "the shared lock"
	}
	var got bool
	if err := conn.QueryRow(ctx, q, h.key).Scan(&got); err != nil {
		conn.Close(ctx)
		return nil, classify(fmt.Errorf("pgengine: %s: %w", what, err))
	}
	if got && h.shared {
		if err := conn.QueryRow(ctx, "select pg_try_advisory_lock($1)", h.owner).Scan(&got); err != nil {
			conn.Close(ctx)
			return nil, classify(fmt.Errorf("pgengine: the owner lock: %w", err))
		}
		if !got {
			conn.Close(ctx)
			return nil, fmt.Errorf("%w: the owner lock of this process on schema %s is held by another session", engine.ErrLocked, h.schema)
		}
	}
	if !got {
		conn.Close(ctx)
		if h.shared {
			return nil, fmt.Errorf("%w: schema %s of this PostgreSQL database is held exclusively (a handoff migrate, or a server of a release before several processes could share it)", engine.ErrLocked, h.schema)
		}
		return nil, fmt.Errorf("%w: another handoff process has schema %s of this PostgreSQL database open", engine.ErrLocked, h.schema)
	}
	return conn, nil
}

// lost is nil while the lock is held, else why writes are refused.
func (h *hold) lost() error {
	if e := h.gone.Load(); e != nil {
		return *e
	}
	return nil
}

// pingWait is the least time a hold's ping waits for its answer.
const pingWait = 2 * time.Second

// watch pings the lock's connection every check; a failed ping marks the
// lock lost (before the next write asks) and each later check tries to
// take it again.
func (h *hold) watch() {
	defer close(h.done)
	tick := time.NewTicker(h.check)
	defer tick.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-tick.C:
		}
		// A connection the server ended fails its ping at once; a slow
		// answer is no loss. Bounded by the check alone (200 ms in tests),
		// a ping on a loaded machine timed out, and the lock was given up
		// while its session still held it (CI: a second exclusive Open
		// beside the first, a write refused after a failover).
		ctx, cancel := context.WithTimeout(context.Background(), max(h.check, pingWait))
		h.mu.Lock()
		if h.conn != nil {
			if err := h.conn.Ping(ctx); err != nil {
				h.conn.Close(ctx)
				h.conn = nil
				e := fmt.Errorf("%w: this process lost its hold on schema %s (its connection: %v); writes wait until it is taken again", engine.ErrLocked, h.schema, err)
				h.gone.Store(&e)
				if h.onLost != nil {
					go h.onLost(e)
				}
			}
		}
		if h.conn == nil {
			h.tries.Add(1)
			if conn, err := h.take(ctx); err == nil {
				h.conn = conn
				h.gone.Store(nil)
			}
		}
		h.mu.Unlock()
		cancel()
	}
}

// pid is the server process holding the lock, 0 while it is lost (tests).
func (h *hold) pid() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return 0
	}
	return h.conn.PgConn().PID()
}

// release stops the watch and closes the connection, which ends the lock.
func (h *hold) release() {
	close(h.quit)
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != nil {
		h.conn.Close(context.Background())
		h.conn = nil
	}
}
