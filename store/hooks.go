package store

import (
	"sync/atomic"
	"time"
)

// LeadHook is told of a move of a lead inside the move's transaction, with
// the lead as moved and the move's time: what it writes commits with the
// move or not at all. The lead's moves (leads/moves.go) call Tx.LeadMoved;
// the store knows no hook's purpose (crm's enqueues the CRM write, so leads
// never imports crm).
type LeadHook func(tx *Tx, h Handoff, now time.Time) error

// OutboxHook is told, inside the write's transaction, of every outbox row
// written new (old nil) or moved to another status (old is the row as it
// was): PutOutbox calls it after the write, so what it writes commits with
// the move (package outbound enqueues its events there). A write that
// keeps the status (a receipt, an erasure) does not call it.
type OutboxHook func(tx *Tx, old *Outbox, o Outbox) error

// JobHook is told, inside the write's transaction, of a job just
// discarded: it joins the dead-letter list.
type JobHook func(tx *Tx, j Job) error

// hooks are a store's own: two stores in one process (tests, an app
// restarted in place) never call each other's.
type hooks struct {
	lead   atomic.Pointer[LeadHook]
	outbox atomic.Pointer[OutboxHook]
	job    atomic.Pointer[JobHook]
	due    atomic.Pointer[DueHook]
}

// DueHook is told, after a commit, when the earliest of the jobs it made
// ready is due (a job enqueued, retried or released), so that the runner
// sleeps until then instead of looking at the queue after every commit.
type DueHook func(at time.Time)

// HookDue makes fn the hook of every commit that made a job ready in this
// store (nil: none). It runs on the committer's goroutine: it must not
// block.
func (s *Store) HookDue(fn DueHook) {
	if fn == nil {
		s.hooks.due.Store(nil)
		return
	}
	s.hooks.due.Store(&fn)
}

// jobReady notes in tx that j, just written, is ready: the commit tells
// the DueHook, and the other processes on a shared database, of the
// earliest.
func (tx *Tx) jobReady(j *Job) {
	if j == nil || !j.ready() {
		return
	}
	if tx.due.IsZero() || j.RunAt.Before(tx.due) {
		tx.due = j.RunAt
	}
}

// dueSaid calls the DueHook with at, the earliest due of a commit's
// ready jobs (zero: it made none ready).
func (h *hooks) dueSaid(at time.Time) {
	if at.IsZero() {
		return
	}
	if fn := h.due.Load(); fn != nil {
		(*fn)(at)
	}
}

// HookLeadMoves makes fn the hook of every lead move in this store (nil:
// none); set it after Open, before the first move that needs it.
func (s *Store) HookLeadMoves(fn LeadHook) {
	if fn == nil {
		s.hooks.lead.Store(nil)
		return
	}
	s.hooks.lead.Store(&fn)
}

// HookOutboxMoves makes fn the hook of every outbox row created or moved
// to another status in this store (nil: none).
func (s *Store) HookOutboxMoves(fn OutboxHook) {
	if fn == nil {
		s.hooks.outbox.Store(nil)
		return
	}
	s.hooks.outbox.Store(&fn)
}

// HookJobDiscards makes fn the hook of every job discarded in this store
// (nil: none).
func (s *Store) HookJobDiscards(fn JobHook) {
	if fn == nil {
		s.hooks.job.Store(nil)
		return
	}
	s.hooks.job.Store(&fn)
}

// LeadMoved runs the store's LeadHook, if any, for lead h just moved in tx.
func (tx *Tx) LeadMoved(h Handoff, now time.Time) error {
	if tx.hooks == nil {
		return nil
	}
	if fn := tx.hooks.lead.Load(); fn != nil {
		return (*fn)(tx, h, now)
	}
	return nil
}

// outboxMoved runs the OutboxHook for o, written over old in tx, when it
// is new or its status changed.
func (tx *Tx) outboxMoved(old, o *Outbox) error {
	if tx.hooks == nil || o == nil || old != nil && old.Status == o.Status {
		return nil
	}
	if fn := tx.hooks.outbox.Load(); fn != nil {
		return (*fn)(tx, old, *o)
	}
	return nil
}

// jobMoved runs the JobHook for j, written over old in tx, when it has
// just been discarded.
func (tx *Tx) jobMoved(old, j *Job) error {
	if tx.hooks == nil || j == nil || j.State != JobDiscarded || old != nil && old.State == JobDiscarded {
		return nil
	}
	if fn := tx.hooks.job.Load(); fn != nil {
		return (*fn)(tx, *j)
	}
	return nil
}
