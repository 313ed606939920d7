package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/store"
)

// TestResolveManyOrphans: more orphaned rows than one of Resolve's writes
// takes (its chunks of 256) each get exactly one live delivery job, and a
// second sweep finds none left. (The rows are alerts to the team, which
// need no draft for the file to check.)
func TestResolveManyOrphans(t *testing.T) {
	const rows = 600
	st := openStore(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var ids []string
	if err := st.Update(ctx, func(tx *store.Tx) error {
		ids = ids[:0]
		for i := range rows {
			id := fmt.Sprintf("stuck:web:conv-%04d:%d", i, now.Unix())
			status := store.OutboxPending
			if i%2 == 1 {
				status = store.OutboxEffectPending
			}
			o := store.Outbox{V: 1, ID: id, Kind: store.OutboxAlert, CorrelationID: ulid.Make().String(), To: "team",
				Text: "A lead is stuck.", Provider: "sandbox", Status: status, ApprovedBy: "stuck-lead alert",
				CreatedAt: now, UpdatedAt: now, Attempts: []store.OutboxAttempt{}}
			if err := tx.PutOutbox(nil, &o); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ob := delivery.New(st, config.Default())
	if n, err := ob.Resolve(ctx, now); err != nil || n != rows {
		t.Fatalf("Resolve = %d, %v; want %d", n, err, rows)
	}
	for _, id := range ids {
		var j store.Job
		if err := st.View(func(tx *store.Tx) (err error) { j, err = tx.LiveJob(delivery.Kind, id); return err }); err != nil || j.State != store.JobAvailable {
			t.Fatalf("row %s: live job %s, %v; want one available", id, j.State, err)
		}
	}
	if n, err := ob.Resolve(ctx, now); err != nil || n != 0 {
		t.Errorf("second Resolve = %d, %v; want 0", n, err)
	}
}
