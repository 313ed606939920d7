package leads_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/testkit/corpus"
)

// BenchmarkIngestPostgres is the ingest's transaction (leads.RecordTx of
// a new lead's first message, from the corpus) by 64 writers through the
// store's group commit on PostgreSQL, with the round's reads prefetched
// (leads.Record: Store.UpdateIngest) and without (Store.Update), side by
// side in one run: events/s and the ratio.
//
//	go test -run '^$' -bench BenchmarkIngestPostgres -benchtime 4000x ./leads/
func BenchmarkIngestPostgres(b *testing.B) {
	const writers = 64
	rates := map[string]float64{}
	for _, mode := range []string{"prefetch", "one-read-a-get"} {
		b.Run(mode, func(b *testing.B) {
			url := pgtest.URL(b) + " search_path=" + pgtest.Schema(b)
			st, err := store.OpenURL(context.Background(), url, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			es := make([]*store.Encoded, b.N)
			for i := range es {
				id := fmt.Sprintf("bench-%s-%d", mode, i)
				body := corpus.Message(i, id, "conv-"+id, "+1555")
				ev := store.Event{ID: ulid.Make().String(), Key: "demo:" + id, Channel: "demo", MessageID: id,
					ConversationID: "conv-" + id, ReceivedAt: time.Now(), Body: body.Raw, Text: body.Want.Text}
				if es[i], err = store.EncodeEvent(ev, store.NewJob{ID: ulid.Make().String(), Kind: "draft", Key: ev.Key, MaxAttempts: 3}); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for range writers {
				wg.Go(func() {
					for {
						i := int(next.Add(1) - 1)
						if i >= len(es) {
							return
						}
						var err error
						if mode == "prefetch" {
							_, err = leads.Record(context.Background(), st, es[i])
						} else {
							err = st.Update(context.Background(), func(tx *store.Tx) error { _, err := leads.RecordTx(tx, es[i]); return err })
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			rate := float64(b.N) / time.Since(t0).Seconds()
			rates[mode] = rate
			b.ReportMetric(rate, "events/s")
		})
	}
	if rates["one-read-a-get"] > 0 {
		b.Logf("prefetch / one read a Get: %.2f× (%.0f vs %.0f events/s)", rates["prefetch"]/rates["one-read-a-get"], rates["prefetch"], rates["one-read-a-get"])
	}
}
