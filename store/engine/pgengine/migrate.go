package pgengine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the engine's own schema (its catalog, not the store's
// records, which the store migrates in its buckets), version i+1 at index
// i. Each runs in one transaction with the version it reaches; append
// only, never edit one that has shipped.
var migrations = []string{
	// 1: the catalog of buckets (each bucket's table is made by
	// CreateBucketIfNotExists) and the tables of deleted buckets, dropped
	// by the next Open.
	`create table handoff_buckets (
		name bytea primary key,
		tbl  text not null unique
	);
	create sequence handoff_bucket_ids;
	create table handoff_retired (tbl text primary key);`,
	// 2: each write transaction's mark, written by its commit: after a
	// crash of the server a transaction id can be given again, so a
	// commit whose answer was lost is known by its mark (outcome). Marks
	// older than markKept are deleted by later commits.
	`create table handoff_commits (
		mark bytea primary key,
		at   timestamptz not null default now()
	);
	create index on handoff_commits (at);`,
	// 3: the catalog's generation, moved by every change of
	// handoff_buckets (a trigger, so that a process of an older build
	// moves it too): a transaction checks the catalog its engine kept by
	// this one row instead of reading the catalog (begin).
	`create table handoff_catalog (id integer primary key check (id = 1), gen bigint not null);
	insert into handoff_catalog (id, gen) values (1, 0);
	create function handoff_catalog_changed() returns trigger language plpgsql
		set search_path from current
		as $$ begin update handoff_catalog set gen = gen + 1; return null; end $$;
	create trigger handoff_catalog_changed after insert or update or delete or truncate on handoff_buckets
		for each statement execute procedure handoff_catalog_changed();`,
}

// SchemaVersion is the engine schema this build writes.
var SchemaVersion = len(migrations)

// migrate brings the engine's schema to SchemaVersion under a session
// advisory lock, so that of several processes starting at once one
// migrates and the others wait for it, then drops the tables of deleted
// buckets. It creates schema first when given.
func (d *DB) migrate(ctx context.Context, schema string) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return classify(fmt.Errorf("pgengine: connect: %w", err))
	}
	defer conn.Release()
	if schema != "" {
		// Before the lock, whose key is the schema's: IF NOT EXISTS makes two
		// processes' creates one (a race between them is a unique violation,
		// retried once).
		q := "create schema if not exists " + pgx.Identifier{schema}.Sanitize()
		if _, err := conn.Exec(ctx, q); err != nil {
			if _, err2 := conn.Exec(ctx, q); err2 != nil {
				return classify(fmt.Errorf("pgengine: create schema %s: %w", schema, err))
			}
		}
	}
	var cur *string
	if err := conn.QueryRow(ctx, "select current_schema()").Scan(&cur); err != nil {
		return classify(fmt.Errorf("pgengine: the current schema: %w", err))
	}
	if cur == nil {
		return errors.New("pgengine: the connection has no schema to create tables in: give one (Options.Schema, or search_path in the URL)")
	}
	d.schema = *cur
	d.lockKey = lockKey("write", d.schema)
	key := lockKey("migrate", d.schema)
	if _, err := conn.Exec(ctx, "select pg_advisory_lock($1)", key); err != nil {
		return classify(fmt.Errorf("pgengine: the migration lock: %w", err))
	}
	defer func() {
		if _, err := conn.Exec(ctx, "select pg_advisory_unlock($1)", key); err != nil {
			conn.Conn().Close(ctx) // a closed session holds no lock
		}
	}()
	if _, err := conn.Exec(ctx, "create table if not exists handoff_engine (version integer not null)"); err != nil {
		return classify(fmt.Errorf("pgengine: the version table: %w", err))
	}
	var version int
	err = conn.QueryRow(ctx, "select version from handoff_engine").Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err = conn.Exec(ctx, "insert into handoff_engine (version) values (0)"); err != nil {
			return classify(fmt.Errorf("pgengine: the version table: %w", err))
		}
	} else if err != nil {
		return classify(fmt.Errorf("pgengine: the engine's schema version: %w", err))
	}
	if version > SchemaVersion {
		return fmt.Errorf("pgengine: schema %s is at engine version %d, newer than this handoff's %d: run a newer handoff", d.schema, version, SchemaVersion)
	}
	for v := version + 1; v <= SchemaVersion; v++ {
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "update handoff_engine set version = $1", v)
			return err
		}); err != nil {
			return classify(fmt.Errorf("pgengine: migrate the engine's schema to version %d: %w", v, err))
		}
	}
	return d.dropRetired(ctx, conn)
}

// dropRetired drops the tables of the buckets deleted since the last
// open, each with its row of handoff_retired in one transaction. A read
// of another process still on one (its snapshot older than the delete)
// holds the drop until it ends.
func (d *DB) dropRetired(ctx context.Context, conn *pgxpool.Conn) error {
	rows, err := conn.Query(ctx, "select tbl from handoff_retired")
	if err != nil {
		return classify(fmt.Errorf("pgengine: the deleted buckets: %w", err))
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return classify(fmt.Errorf("pgengine: the deleted buckets: %w", err))
	}
	for _, tbl := range tables {
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "drop table if exists "+pgx.Identifier{tbl}.Sanitize()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "delete from handoff_retired where tbl = $1", tbl)
			return err
		}); err != nil {
			return classify(fmt.Errorf("pgengine: drop the table %s of a deleted bucket: %w", tbl, err))
		}
	}
	return nil
}
