package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store/engine"
)

// benchWriters is how many goroutines insert at once, as a busy webhook endpoint would.
const benchWriters = 64

// benchBody is a 512-byte payload, the size of a typical webhook body.
var benchBody = json.RawMessage(`{"text":"` + strings.Repeat("x", 500) + `"}`)

func setWriters(b *testing.B) {
	p := (benchWriters + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	b.SetParallelism(p)
}

func reportInserts(b *testing.B, start time.Time) {
	if s := time.Since(start).Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "inserts/s")
	}
}

func randomID() string {
	var buf [13]byte
	rand.Read(buf[:])
	return fmt.Sprintf("%x", buf[:]) // 26 characters, like a ULID, but in no order
}

func benchEvent(id, corr string) Event {
	return Event{
		ID: id, Key: "web:" + id, Channel: "web", MessageID: id, CorrelationID: corr,
		ConversationID: id, Contact: "ada@example.com", Text: "hello", Body: benchBody,
		ContentType: "application/json", ReceivedAt: t0,
	}
}

// BenchmarkRecordEventParallel measures the group committer: ~64 goroutines
// each recording new events (event, dedup index, lead and draft job in one
// transaction per round).
func BenchmarkRecordEventParallel(b *testing.B) {
	benchRecordEvent(b, func() string { return ulid.Make().String() })
}

// BenchmarkRandomKeys is the same with random record ids instead of ULIDs:
// inserts land all over each B+tree instead of at its right edge.
func BenchmarkRandomKeys(b *testing.B) {
	benchRecordEvent(b, randomID)
}

func benchRecordEvent(b *testing.B, newID func() string) {
	st := openTest(b)
	setWriters(b)
	b.ReportAllocs()
	// The pages are bbolt's: on another engine (HANDOFF_TEST_ENGINE) the
	// benchmark reports inserts/s alone.
	var before bolt.TxStats
	if st.file != nil {
		before = st.bolt().Stats().TxStats
	}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			id := newID()
			rec, err := st.RecordEvent(ctx, benchEvent(id, newID()), NewJob{ID: newID(), Kind: "draft", Key: "web:" + id, MaxAttempts: 3})
			if err != nil || !rec.Created {
				b.Errorf("RecordEvent(%s): created %v err %v got %s dup %d", id, rec.Created, err, rec.Event.Key, rec.Event.Duplicates)
				return
			}
		}
	})
	reportInserts(b, start)
	b.StopTimer()
	if st.file == nil {
		return
	}
	// Pages written per event, amortized over the group commits: what the
	// data model on the ingest path costs the disk (bbolt counts one write
	// per dirty page it writes at commit).
	after := st.bolt().Stats().TxStats
	b.ReportMetric(float64(after.GetWrite()-before.GetWrite())/float64(b.N), "pages/event")
}

// BenchmarkBoltBatchParallel does the same insert-if-absent (event, dedup
// index, job and ready index) through bolt's own db.Batch on a bbolt file
// opened with default options: the baseline the committer is measured against.
func BenchmarkBoltBatchParallel(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "batch.db"), 0o600, nil)
	if err != nil {
		b.Fatalf("bolt.Open: %v", err)
	}
	b.Cleanup(func() { db.Close() })
	names := [][]byte{bucketEvents, bucketEventsByKey, bucketJobs, bucketJobsReady}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, n := range names {
			if _, err := tx.CreateBucket(n); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatalf("create buckets: %v", err)
	}
	setWriters(b)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := ulid.Make().String()
			ev := benchEvent(id, ulid.Make().String())
			jobID := ulid.Make().String()
			err := db.Batch(func(tx *bolt.Tx) error {
				byKey := tx.Bucket(bucketEventsByKey)
				if byKey.Get([]byte(ev.Key)) != nil {
					return nil
				}
				raw, err := json.Marshal(ev)
				if err != nil {
					return err
				}
				if err := tx.Bucket(bucketEvents).Put([]byte(ev.ID), raw); err != nil {
					return err
				}
				if err := byKey.Put([]byte(ev.Key), []byte(ev.ID)); err != nil {
					return err
				}
				j := Job{V: 1, ID: jobID, Kind: "draft", Key: ev.Key, CorrelationID: ev.CorrelationID, State: JobAvailable,
					MaxAttempts: 3, RunAt: t0, CreatedAt: t0, UpdatedAt: t0, Attempts: []Attempt{}}
				raw, err = json.Marshal(j)
				if err != nil {
					return err
				}
				if err := tx.Bucket(bucketJobs).Put([]byte(jobID), raw); err != nil {
					return err
				}
				return tx.Bucket(bucketJobsReady).Put(timeKey(t0, jobID), nil)
			})
			if err != nil {
				b.Errorf("Batch: %v", err)
				return
			}
		}
	})
	reportInserts(b, start)
	b.StopTimer()
	var n int
	db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucketEvents).Stats().KeyN; return nil })
	if n < b.N {
		b.Errorf("batch file holds %d events after %d inserts", n, b.N)
	}
}

// BenchmarkRecordEventWrite measures the committer's own step of an ingest
// alone, without the fsyncs: RecordEvent's write of events encoded
// beforehand, a thousand to a transaction.
func BenchmarkRecordEventWrite(b *testing.B) {
	st := openTest(b)
	st.bolt().NoSync = true // the committer is idle: only this goroutine touches the handle
	type encoded struct {
		ev     Event
		evRaw  []byte
		j      Job
		jobRaw []byte
	}
	const chunk = 1000
	batch := make([]encoded, 0, chunk)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		b.StopTimer()
		batch = batch[:0]
		for range min(chunk, b.N-done) {
			id := ulid.Make().String()
			ev := benchEvent(id, ulid.Make().String())
			ev.V = recordVersion
			evRaw, _ := json.Marshal(ev)
			j := newJob(NewJob{ID: ulid.Make().String(), Kind: "draft", Key: ev.Key, MaxAttempts: 3}, ev.CorrelationID, ev.ReceivedAt)
			jobRaw, _ := encode(&j)
			batch = append(batch, encoded{ev, evRaw, j, jobRaw})
		}
		b.StartTimer()
		if err := st.raw(func(btx engine.Tx) error {
			tx := &Tx{tx: btx}
			for _, e := range batch {
				if _, err := recordRaw(tx, &e.ev, e.evRaw, &e.j, e.jobRaw); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
