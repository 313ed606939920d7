package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkIngestLeadTerms is BenchmarkIngestPages with the leads people
// search for: 20,000 events of leads with a name (a third of them
// accented, as "Zoë Müller") and a phone number as their contact,
// recorded by 64 writers through the group commit; with msgs=1 each event
// is a new lead (the index's worst case: its entries are written when a
// lead's name or contact changes, so a lead's later messages write none),
// with msgs=4 each lead sends four (the corpus: 300 messages of 80
// customers). It reports
// what the search's index costs each event: the pages every commit
// dirtied (written-bytes/event: bbolt's count of allocated pages × the
// page size, what issue 26 counts as written), the entries and the bytes
// of idx_handoffs_by_term's pages per event, and those of all buckets.
//
//	go test -run '^$' -bench IngestLeadTerms -benchtime 3x ./store/
func BenchmarkIngestLeadTerms(b *testing.B) {
	for _, perLead := range []int{1, 4} {
		b.Run(fmt.Sprintf("msgs=%d", perLead), func(b *testing.B) { benchLeadTerms(b, perLead) })
	}
}

func benchLeadTerms(b *testing.B, perLead int) {
	const n = 20000
	first := []string{"Zoë", "Ada", "José", "Maria", "Chloé", "Noah", "Amélie", "Liam", "Søren", "Yusuf", "Emma", "Björn"}
	last := []string{"Müller", "Lovelace", "García", "Smith", "Ñúñez", "Brown", "Dvořák", "Khan", "Nguyễn", "Jones", "O'Brien", "Lee"}
	var pages, termEntries, termBytes, allBytes float64
	pageSize := 0
	for b.Loop() {
		b.StopTimer()
		st := openTest(b)
		before := st.bolt().Stats()
		pageSize = st.bolt().Info().PageSize
		b.StartTimer()
		var wg sync.WaitGroup
		next := make(chan int)
		for range benchWriters {
			wg.Go(func() {
				for i := range next {
					id := ulid.Make().String()
					ev := benchEvent(id, ulid.Make().String())
					ev.Key = fmt.Sprintf("web:%s-%d", id, i)
					lead := i / perLead
					ev.ConversationID = fmt.Sprintf("lead-%d", lead)
					ev.Name = first[lead%len(first)] + " " + last[(lead/len(first))%len(last)]
					ev.Contact = fmt.Sprintf("+1 %03d %03d %04d", 200+lead%800, (lead*7)%1000, lead%10000)
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
		b.StopTimer()
		after := st.bolt().Stats()
		d := after.TxStats.Sub(&before.TxStats)
		pages += float64(d.GetPageCount())
		if err := st.bolt().View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
				bs := bk.Stats()
				if string(name) == string(bucketHandoffsByTerm) {
					termEntries += float64(bs.KeyN)
					termBytes += float64(bs.BranchAlloc + bs.LeafAlloc)
				}
				allBytes += float64(bs.BranchAlloc + bs.LeafAlloc)
				return nil
			})
		}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	events := float64(n * b.N)
	b.ReportMetric(pages/events, "pages/event")
	b.ReportMetric(pages*float64(pageSize)/events, "written-bytes/event")
	b.ReportMetric(termEntries/events, "term-entries/event")
	b.ReportMetric(termBytes/events, "term-page-bytes/event")
	b.ReportMetric(allBytes/events, "page-bytes/event")
}
