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

// BenchmarkResolve times the start-up's sweep for replies left without a
// delivery job over a file of 50,000 unfinished rows, each with its job
// (a backlog waiting for a provider: nothing to requeue), side by side
// with the sweep as it was (every row read, in one write transaction that
// held the write lock throughout: 19 s on a file of 900,000 such rows).
func BenchmarkResolve(b *testing.B) {
	const rows = 50000
	dir := b.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	now := time.Now().UTC()
	for start := 0; start < rows; start += 1000 {
		if err := st.Update(ctx, func(tx *store.Tx) error {
			for i := start; i < start+1000; i++ {
				id := fmt.Sprintf("conv-%06d:d%s-1", i, ulid.Make())
				o := store.Outbox{V: 1, ID: id, EventKey: "web:" + id, CorrelationID: ulid.Make().String(), Channel: "web",
					ConversationID: fmt.Sprintf("conv-%06d", i), To: "ada@example.com", Text: "Hello, we will call you today.",
					Provider: "sandbox", Status: store.OutboxPending, ApprovedBy: "ada", CreatedAt: now, UpdatedAt: now, Attempts: []store.OutboxAttempt{}}
				if err := tx.PutOutbox(nil, &o); err != nil {
					return err
				}
				if _, _, err := tx.Enqueue(store.NewJob{ID: ulid.Make().String(), Kind: delivery.Kind, Key: id, MaxAttempts: 4}, o.CorrelationID, now); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	ob := delivery.New(st, config.Default())
	b.Run("sweep=keys", func(b *testing.B) {
		for b.Loop() {
			if n, err := ob.Resolve(ctx, now); err != nil || n != 0 {
				b.Fatalf("Resolve = %d, %v; want nothing to requeue", n, err)
			}
		}
		b.ReportMetric(float64(rows), "rows")
	})
	b.Run("sweep=rows-in-one-write", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := st.Update(ctx, func(tx *store.Tx) error {
				n = 0
				for _, status := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending} {
					if err := tx.EachOutbox(status, func(o store.Outbox) error {
						_, created, err := tx.Enqueue(store.NewJob{ID: ulid.Make().String(), Kind: delivery.Kind, Key: o.ID, MaxAttempts: 4}, o.CorrelationID, now)
						if created {
							n++
						}
						return err
					}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil || n != 0 {
				b.Fatalf("old sweep = %d, %v; want nothing to requeue", n, err)
			}
		}
		b.ReportMetric(float64(rows), "rows")
	})
}
