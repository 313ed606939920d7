package store

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestOutboxAndJobHooks: the outbox hook hears a row written new and each
// move to another status, inside the write (what it writes commits with
// it), and not a write that keeps the status; the job hook hears a job
// discarded, once.
func TestOutboxAndJobHooks(t *testing.T) {
	st := openTest(t)
	var heard []string
	st.HookOutboxMoves(func(tx *Tx, old *Outbox, o Outbox) error {
		from := "new"
		if old != nil {
			from = string(old.Status)
		}
		heard = append(heard, o.ID+":"+from+">"+string(o.Status))
		return tx.Audit(AuditEntry{At: o.UpdatedAt, Who: "hook", Action: "heard", Target: o.ID})
	})
	var discarded []string
	st.HookJobDiscards(func(_ *Tx, j Job) error {
		discarded = append(discarded, j.ID)
		return nil
	})
	ctx := context.Background()
	o := Outbox{V: 1, ID: "stuck:web:c1:1", Kind: OutboxAlert, Channel: "web", ConversationID: "c1", Status: OutboxPending, CreatedAt: t0, UpdatedAt: t0, Attempts: []OutboxAttempt{}}
	write := func(change func(o *Outbox)) {
		t.Helper()
		err := st.Update(ctx, func(tx *Tx) error {
			old, err := tx.Outbox(o.ID)
			if err != nil {
				return tx.PutOutbox(nil, &o)
			}
			n := old
			change(&n)
			o = n
			return tx.PutOutbox(&old, &n)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write(nil)
	write(func(o *Outbox) { o.Status = OutboxEffectPending })
	write(func(o *Outbox) { o.Note = "the same status" })
	write(func(o *Outbox) { o.Status = OutboxFailed })
	if want := []string{o.ID + ":new>pending", o.ID + ":pending>effect_pending", o.ID + ":effect_pending>failed"}; !reflect.DeepEqual(heard, want) {
		t.Errorf("heard %v, want %v", heard, want)
	}
	heardEntries := func() int {
		t.Helper()
		log, err := st.AuditLog(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range log {
			if e.Action == "heard" && e.Target == o.ID {
				n++
			}
		}
		return n
	}
	if n := heardEntries(); n != 3 {
		t.Errorf("the hook's audit entries committed = %d, want one per move heard (3)", n)
	}
	// A hook's error rolls the write back with what the hook wrote.
	st.HookOutboxMoves(func(tx *Tx, _ *Outbox, o Outbox) error {
		if err := tx.Audit(AuditEntry{At: o.UpdatedAt, Who: "hook", Action: "heard", Target: o.ID}); err != nil {
			return err
		}
		return context.Canceled
	})
	err := st.Update(ctx, func(tx *Tx) error {
		old, _ := tx.Outbox(o.ID)
		n := old
		n.Status = OutboxPending
		return tx.PutOutbox(&old, &n)
	})
	if err == nil {
		t.Fatal("a hook's error did not fail the write")
	}
	if got, _ := st.OutboxRow(o.ID); got.Status != OutboxFailed {
		t.Errorf("after the failed write the row is %s, want failed still", got.Status)
	}
	if n := heardEntries(); n != 3 {
		t.Errorf("after the failed write the hook's audit entries = %d, want 3 (its own entry rolled back)", n)
	}
	st.HookOutboxMoves(nil)

	j := enqueueAt(t, st, t0, 1)
	c := claimOne(t, st, t0, time.Minute)
	if _, err := st.FinishJob(ctx, c.ID, c.ExecutionID, t0, Result{Outcome: OutcomeRetry, Err: "boom"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{j.ID}; !reflect.DeepEqual(discarded, want) {
		t.Errorf("discarded %v, want %v (its last attempt failed)", discarded, want)
	}
	// The same attempt finished again (a retried commit round, a late
	// worker) is refused and heard by no hook.
	if _, err := st.FinishJob(ctx, c.ID, c.ExecutionID, t0, Result{Outcome: OutcomeRetry, Err: "boom"}); err == nil {
		t.Error("a finished attempt was finished again")
	}
	if want := []string{j.ID}; !reflect.DeepEqual(discarded, want) {
		t.Errorf("discarded after a second finish %v, want %v (heard once)", discarded, want)
	}
}
