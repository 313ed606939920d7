package store

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/store/engine/boltengine"
	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkIngestPages records 20,000 events with their draft jobs from 64
// writers through the group commit (real fsyncs), with bbolt's default
// fill in every bucket (fill=default) and with appendFill (fill=append),
// side by side, and reports the pages each event dirtied (bbolt's own
// count of the pages its commits allocated, freelist included), the
// commits, and the file's bytes per event. The events' leads are new, as
// in the bench's ingest; a tenth of them are then claimed and completed,
// so the jobs bucket sees the updates appendFill leaves room for.
func BenchmarkIngestPages(b *testing.B) {
	const n = 20000
	for _, mode := range []string{"default", "append"} {
		b.Run("fill="+mode, func(b *testing.B) {
			if mode == "default" {
				saved := maps.Clone(appendFill)
				clear(appendFill)
				b.Cleanup(func() { maps.Copy(appendFill, saved) })
			}
			var pages, commits, size, alloc float64
			for b.Loop() {
				b.StopTimer()
				st := openTest(b)
				before, txid := st.bolt().Stats(), txID(b, st)
				b.StartTimer()
				var wg sync.WaitGroup
				next := make(chan int)
				for range benchWriters {
					wg.Go(func() {
						for i := range next {
							id := ulid.Make().String()
							ev := benchEvent(id, ulid.Make().String())
							ev.Key = fmt.Sprintf("web:%s-%d", id, i)
							if _, err := st.RecordEvent(context.Background(), ev, NewJob{ID: ulid.Make().String(), Kind: KindDraft, Key: ev.Key, MaxAttempts: 3}); err != nil {
								b.Error(err)
							}
						}
					})
				}
				for i := range n {
					next <- i
				}
				close(next)
				wg.Wait()
				now := time.Now()
				for range n / 10 / 100 {
					claimed, err := st.Claim(context.Background(), now.Add(time.Hour), AnyJobs(100), time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					for _, j := range claimed {
						if _, err := st.FinishJob(context.Background(), j.ID, j.ExecutionID, now, Result{Outcome: OutcomeCompleted}); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				after := st.bolt().Stats()
				d := after.TxStats.Sub(&before.TxStats)
				pages += float64(d.GetPageCount())
				commits += float64(txID(b, st) - txid)
				if fi, err := os.Stat(st.Path()); err == nil {
					size += float64(fi.Size())
				}
				if err := st.bolt().View(func(tx *bolt.Tx) error {
					return tx.ForEach(func(_ []byte, bk *bolt.Bucket) error {
						bs := bk.Stats()
						alloc += float64(bs.BranchAlloc + bs.LeafAlloc)
						return nil
					})
				}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			events := float64(n * b.N)
			b.ReportMetric(pages/events, "pages/event")
			b.ReportMetric(commits/float64(b.N), "commits")
			b.ReportMetric(size/events, "file-bytes/event")
			// The buckets' pages, without the file's room to grow into.
			b.ReportMetric(alloc/events, "page-bytes/event")
		})
	}
}

// txID is the id of st's last commit: bbolt adds one per commit.
func txID(tb testing.TB, st *Store) int {
	tb.Helper()
	id := 0
	if err := st.view(func(tx *Tx) error { n, _ := boltengine.TxID(tx.tx); id = int(n); return nil }); err != nil {
		tb.Fatal(err)
	}
	return id
}
