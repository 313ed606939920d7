package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkBoltCommit times one bbolt commit of 20 records of 1.3 KB (about
// handoff's event record and its batch size under the bench) with the
// store's options, three ways:
//   - alone;
//   - beside 64 goroutines in the same process that alternate 20 µs of work
//     with a 1 ms sleep, as webhook handlers do (about 60% of two cores);
//   - beside the same goroutines in another process.
//
// The second is much slower than the other two, because of Go's scheduler:
// the committer gives up its P while it waits in fdatasync and then queues
// behind the runnable handlers for one. The kernel gives a thread woken from
// I/O the CPU at once, so the same load in another process costs little.
//
//	go test -run XXX -bench BoltCommit -benchtime 3s ./bench/
func BenchmarkBoltCommit(b *testing.B) {
	b.Run("alone", func(b *testing.B) { benchCommit(b) })
	b.Run("beside-64-handlers", func(b *testing.B) {
		stop := make(chan struct{})
		done := startHandlers(stop)
		defer func() { close(stop); done.Wait() }()
		benchCommit(b)
	})
	b.Run("beside-64-handlers-in-another-process", func(b *testing.B) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHandlerLoad$")
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { stdin.Close(); cmd.Wait() }()
		if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
			b.Fatalf("the load process did not start: %v", err)
		}
		benchCommit(b)
	})
}

const helperEnv = "BENCH_HANDLER_LOAD"

// TestHelperHandlerLoad is the other process of BenchmarkBoltCommit: it runs
// the handler load until its stdin closes.
func TestHelperHandlerLoad(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("the load process of BenchmarkBoltCommit; not a test")
	}
	stop := make(chan struct{})
	done := startHandlers(stop)
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin)
	close(stop)
	done.Wait()
}

// startHandlers starts 64 goroutines that each spin for 20 µs and sleep for
// 1 ms until stop closes.
func startHandlers(stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for end := time.Now().Add(20 * time.Microsecond); time.Now().Before(end); {
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	return &wg
}

func benchCommit(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "commit.db"), 0o600, &bolt.Options{
		InitialMmapSize: 1 << 30,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	bucket := []byte("events")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 1300)
	seq := uint64(0)
	for b.Loop() {
		err := db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucket)
			for range 20 {
				seq++
				if err := bk.Put(binary.BigEndian.AppendUint64(nil, seq), val); err != nil {
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
