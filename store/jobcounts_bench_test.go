package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/store/engine"
)

// BenchmarkJobCounts measures what the handoff_jobs gauge reads per scrape
// with 1,000 and with 200,000 queued draft jobs: "counts" is JobCounts as
// it is (the per-kind, per-state counts in meta), "scan" the way it was
// read before schema 4 (every queued job decoded from the queue's
// indexes), kept here as the baseline. counts must not grow with the queue.
func BenchmarkJobCounts(b *testing.B) {
	for _, n := range []int{1_000, 200_000} {
		st := openTest(b)
		fillJobs(b, st, n)
		b.Run(fmt.Sprintf("counts/jobs=%d", n), func(b *testing.B) {
			for b.Loop() {
				c, err := st.JobCounts()
				if err != nil || len(c) != 1 || c[0].N != n {
					b.Fatalf("JobCounts = %v, %v; want %d available drafts", c, err, n)
				}
			}
		})
		b.Run(fmt.Sprintf("scan/jobs=%d", n), func(b *testing.B) {
			for b.Loop() {
				c, err := scanJobCounts(st)
				if err != nil || c[[2]string{KindDraft, string(JobAvailable)}] != n {
					b.Fatalf("scan = %v, %v; want %d available drafts", c, err, n)
				}
			}
		})
	}
}

// scanJobCounts is JobCounts as schema 3 read it: every job in the ready,
// leased and dead indexes, decoded.
func scanJobCounts(st *Store) (map[[2]string]int, error) {
	counts := map[[2]string]int{}
	err := st.view(func(tx *Tx) error {
		count := func(id []byte) error {
			j, err := tx.Job(string(id))
			if err != nil {
				return err
			}
			counts[[2]string{j.Kind, string(j.State)}]++
			return nil
		}
		if err := tx.bucket(bucketJobsReady).ForEach(func(k, _ []byte) error { return count(k[len(KindDraft)+1+8:]) }); err != nil {
			return err
		}
		if err := tx.bucket(bucketJobsLeased).ForEach(func(k, _ []byte) error { _, id := splitTimeKey(k); return count([]byte(id)) }); err != nil {
			return err
		}
		return tx.bucket(bucketJobsDead).ForEach(func(k, _ []byte) error { return count(k) })
	})
	return counts, err
}

// fillJobs enqueues n available draft jobs, a few thousand per transaction.
func fillJobs(b *testing.B, st *Store, n int) {
	b.Helper()
	const chunk = 5000
	for done := 0; done < n; done += chunk {
		err := st.raw(func(btx engine.Tx) error {
			tx := &Tx{tx: btx}
			for i := done; i < min(done+chunk, n); i++ {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				nj := NewJob{ID: ulid.Make().String(), Kind: KindDraft, Key: fmt.Sprintf("web:j-%07d", i), MaxAttempts: 8}
				if _, _, err := enqueue(tx, nj, ulid.Make().String(), at); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
