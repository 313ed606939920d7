package pgengine

import (
	"context"
	"fmt"
)

// OwnerSize is the bytes of an Owner, which is their hex.
const OwnerSize = 4

// Owner names this engine among the processes sharing its schema: random
// at each Open with Options.Shared ("" otherwise), OwnerSize bytes in hex. Its hold connection
// holds an advisory lock of this name beside the shared one, so the
// others can tell (Alive) whether this process still holds the schema:
// once it is killed, or its connection lost, the lock is gone, and what
// it was running can be given to another process without waiting for a
// lease to end.
func (d *DB) Owner() string { return d.owner }

// Shared reports whether the engine was opened with Options.Shared (and
// not Exclusive): other processes may have its schema open.
func (d *DB) Shared() bool { return d.owner != "" }

// ownerKey is the advisory lock key of owner on schema.
func ownerKey(owner, schema string) int64 { return lockKey("owner:"+owner, schema) }

// Alive reports, of owners, those whose lock some session of this
// database holds: the processes still holding the schema (their hold
// connections alive, or taken again since a loss).
func (d *DB) Alive(ctx context.Context, owners []string) (map[string]bool, error) {
	if len(owners) == 0 {
		return map[string]bool{}, nil
	}
	byKey := make(map[int64]string, len(owners))
	keys := make([]int64, 0, len(owners))
	for _, o := range owners {
		k := ownerKey(o, d.schema)
		byKey[k] = o
		keys = append(keys, k)
	}
	// pg_locks splits a bigint key into classid (its high half) and objid
	// (its low half), with objsubid 1.
	rows, err := d.pool.Query(ctx, `select (classid::bigint << 32) | objid::bigint from pg_locks
		where locktype = 'advisory' and granted and objsubid = 1
		and database = (select oid from pg_database where datname = current_database())
		and (classid::bigint << 32) | objid::bigint = any($1)`, keys)
	if err != nil {
		return nil, classify(fmt.Errorf("pgengine: which processes hold the schema: %w", err))
	}
	defer rows.Close()
	alive := make(map[string]bool, len(owners))
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("pgengine: which processes hold the schema: %w", err)
		}
		alive[byKey[k]] = true
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("pgengine: which processes hold the schema: %w", err))
	}
	return alive, nil
}
