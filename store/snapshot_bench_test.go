package store

import (
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"
)

// BenchmarkSnapshotCopy measures Store.Snapshot, the local copy a backup
// download makes first: how long its read transaction is open for a file
// of 256 MiB (values of 1 MiB in a bucket of the benchmark's own), which
// bounds how long a remap could wait on it. It reports the whole
// snapshot's time per GiB (copy and hash) and the read transaction's.
func BenchmarkSnapshotCopy(b *testing.B) {
	dir := b.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	val := make([]byte, 1<<20)
	const mib = 256
	for i := 0; i < mib; i += 16 {
		err := st.update(b.Context(), func(tx *Tx) error {
			bk, err := tx.tx.CreateBucketIfNotExists([]byte("bench_snapshot"))
			if err != nil {
				return err
			}
			for j := i; j < i+16; j++ {
				rand.Read(val)
				if err := bk.Put(fmt.Appendf(nil, "%06d", j), val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var bytes int64
	var held time.Duration
	for i := 0; i < b.N; i++ {
		snap, err := st.Snapshot(dir)
		if err != nil {
			b.Fatal(err)
		}
		bytes += snap.Size
		held += snap.Held
		os.Remove(snap.Path)
	}
	b.StopTimer()
	gib := float64(bytes) / (1 << 30)
	b.ReportMetric(b.Elapsed().Seconds()/gib*1000, "ms/GiB")
	b.ReportMetric(held.Seconds()/gib*1000, "tx-ms/GiB")
}
