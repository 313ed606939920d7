package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine"
)

// OpenURL opens the store on the PostgreSQL database at url (serve's
// database_url) and migrates it, as Open does a file. Several processes
// open one database at once (Shared): their writes take turns under the
// engine's writers' lock (pgengine's Optimistic writers are not on yet:
// issue 33's notes), each commit that made a job ready notifies the
// others (Listen), and the periodic work runs on one of them (Lead). A
// move (handoff migrate) holds the database exclusively: no server opens
// it meanwhile, and it opens none a server has open. What only a bbolt
// file has (the page walk, restore by rename) is absent: Replace answers
// so.
func OpenURL(ctx context.Context, url string, opts Options) (*Store, error) {
	var opened atomic.Pointer[Store]
	onLost := func(err error) {
		if s := opened.Load(); s != nil {
			s.holdLost(err)
		}
	}
	db, err := pgengine.Open(ctx, url, pgengine.Options{Shared: !opts.ReadOnly, OnLost: onLost})
	if errors.Is(err, engine.ErrLocked) {
		return nil, fmt.Errorf("store: %w (is a handoff migrate running?)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open the PostgreSQL database: %w", err)
	}
	s, err := openOn(db, "PostgreSQL schema "+db.Schema(), opts.ReadOnly)
	if err == nil {
		s.pg = db
		opened.Store(s)
	}
	return s, err
}

// OnHoldLost calls fn each time this process loses its hold on a database
// that servers share (its connection lost: a database restart, a network
// cut): writes are refused until it is taken again, and meanwhile the
// leading server may give this one's running jobs to another, so fn stops
// them (jobs.Runner). Never called on a store no other process shares.
func (s *Store) OnHoldLost(fn func(error)) {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	s.onLost = append(s.onLost, fn)
}

func (s *Store) holdLost(err error) {
	s.lostMu.Lock()
	fns := slices.Clone(s.onLost)
	s.lostMu.Unlock()
	for _, fn := range fns {
		fn(err)
	}
}

// Database names the PostgreSQL database the store keeps its records in
// ("PostgreSQL schema NAME"), "" for a bbolt file: its backups are the
// database's own, and what the store writes as one is a logical export.
func (s *Store) Database() string {
	if s.pg != nil {
		return s.path
	}
	return ""
}

// Shared reports whether other processes may have the store's database
// open beside this one (PostgreSQL): then a running job may be another
// process's, and its start-up releases only the leases that ended.
func (s *Store) Shared() bool {
	return s.pg != nil && s.pg.Shared() && s.writes != nil
}

// ErrNoNotify is Listen on a database whose notifications do not reach
// this process (a pooler in transaction mode): poll instead.
var ErrNoNotify = pgengine.ErrNoNotify

// Listen calls woke after each commit of another process that made a job
// ready, with when the earliest of them is due, until ctx ends (see
// pgengine's Listen); at is zero when that is not known (a notification
// may have been missed, or came from a server before due times were
// told): then anything may be due. This store's own commits tell its
// DueHook instead. On a store no other process shares it returns at once.
func (s *Store) Listen(ctx context.Context, woke func(at time.Time)) error {
	if !s.Shared() {
		return nil
	}
	own := s.Owner()
	return s.pg.Listen(ctx, func(payload string) {
		at, owner, ok := parseNotice(payload)
		switch {
		case !ok:
			woke(time.Time{})
		case owner != own:
			woke(at)
		}
	})
}

// notice is the payload of a commit's notification (engine.Notifier):
// when the earliest job it made ready is due, in Unix milliseconds rounded
// up (a runner woken then finds it due), a space, and this server's Owner,
// so that it can tell its own.
func (s *Store) notice(due time.Time) string { return encodeNotice(due, s.Owner()) }

// encodeNotice is notice's form, which parseNotice reads.
func encodeNotice(due time.Time, owner string) string {
	return strconv.FormatInt(due.Add(time.Millisecond-1).UnixMilli(), 10) + " " + owner
}

// parseNotice reads a notice; ok is false for anything else (an empty
// payload, a probe), which says only that something may be due.
func parseNotice(p string) (at time.Time, owner string, ok bool) {
	ms, owner, found := strings.Cut(p, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMilli(n), owner, true
}

// LeadLease is how long the lead takes to move to another process once its
// leader is gone (pgengine.Lease).
var LeadLease = pgengine.Lease(pgengine.LeadCheck)

// Lead runs lead while this process leads the processes sharing the
// store's database, until ctx ends (pgengine's Lead: one leader at a
// time, fenced); a store no other process shares leads at once, for as
// long as ctx lasts.
func (s *Store) Lead(ctx context.Context, lead func(context.Context)) {
	if !s.Shared() {
		lead(ctx)
		return
	}
	s.pg.Lead(ctx, 0, lead)
}

// RoundTrips is how many round trips the store's transactions have made to
// its PostgreSQL server (0 on a bbolt file): what the tests of the reads
// ahead count.
func (s *Store) RoundTrips() int64 {
	if s.pg == nil {
		return 0
	}
	return s.pg.Trips()
}
