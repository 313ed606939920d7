package pgengine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Classify is classify, for the tests of the error kinds.
var Classify = classify

// HolderPID is the server process holding d's exclusive lock; 0 while it is lost.
func (d *DB) HolderPID() uint32 { return d.hold.pid() }

// ExclusiveKey is the advisory lock key of Options.Exclusive on schema.
func ExclusiveKey(schema string) int64 { return lockKey("exclusive", schema) }

// Channel is d's notification channel.
func (d *DB) Channel() string { return d.channel }

// LeadPID is the server process of the connection holding the lead, or
// 0 when no process of this database holds it (tests end its session).
func (d *DB) LeadPID(ctx context.Context) (int, error) {
	var pid *int
	err := d.pool.QueryRow(ctx, `select pid from pg_locks where locktype = 'advisory' and granted
		and (classid::bigint << 32) | objid::bigint = $1 and objsubid = 1`, lockKey("leader", d.schema)).Scan(&pid)
	if err == pgx.ErrNoRows || pid == nil {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgengine: the lead's holder: %w", err)
	}
	return *pid, nil
}

// PoolConns is how many connections d's pool holds, idle or in use.
func (d *DB) PoolConns() int32 { return d.pool.Stat().TotalConns() }

// HoldTries is how many times d's hold tried to take its lock again.
func (d *DB) HoldTries() int64 { return d.hold.tries.Load() }

// ExecTx runs sql on the connection of the transaction et.
func ExecTx(et any, sql string) error {
	t := et.(*tx)
	if !t.ensure(context.Background()) {
		return t.err
	}
	_, err := t.conn.Exec(context.Background(), sql)
	return err
}

// TableOf is the quoted name of bucket name's table in transaction et.
func TableOf(et any, name []byte) string { return quoteIdent(et.(*tx).bucket(name).tbl) }

// SeqScans is how many sequential scans of bucket name's table the
// connection of transaction et has counted and not yet reported.
func SeqScans(et any, name []byte) (int64, error) {
	t := et.(*tx)
	if !t.ensure(context.Background()) {
		return 0, t.err
	}
	var n int64
	err := t.conn.QueryRow(context.Background(),
		"select coalesce(sum(seq_scan), 0) from pg_stat_xact_user_tables where relid = $1::regclass",
		TableOf(et, name)).Scan(&n)
	return n, err
}

// Answered is answered, for TestAnswered.
var Answered = answered

// FlushStmt is flushStmt: the statement a commit waits for the disk in.
const FlushStmt = flushStmt

// PruneDue makes d's next commit delete the old marks.
func (d *DB) PruneDue() { d.pruned.Store(0) }

// Migrations is migrations: the engine schema's versions, for
// TestMigrationFromVersion2.
var Migrations = migrations
