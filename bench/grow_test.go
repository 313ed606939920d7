package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff/handoff/store"
)

// TestFileTxID: the txid read from the file's meta pages, while the
// database is open in this process, moves by one per commit, as bbolt's own
// Tx.ID says.
func TestFileTxID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := fileTxID(path)
	for i := range 3 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	var id int
	_ = db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
	after := fileTxID(path)
	if before < 0 || after-before != 3 || after != int64(id) {
		t.Errorf("fileTxID went from %d to %d over 3 commits; bbolt says the last is %d", before, after, id)
	}
	if got := fileTxID(filepath.Join(t.TempDir(), "none.db")); got != -1 {
		t.Errorf("fileTxID of a missing file = %d, want -1", got)
	}
}

// TestCPUSeconds: this process's CPU time is read and grows with work.
func TestCPUSeconds(t *testing.T) {
	pid := os.Getpid()
	a := cpuSeconds(pid)
	if a < 0 {
		t.Skip("no /proc/PID/stat here")
	}
	// Busy (reading /proc is work too) until the kernel has counted 5
	// ticks more: a reader that never saw time move spins until the
	// test's own deadline (t.Context), and one that parsed the wrong
	// fields reads a value that does not move.
	b := a
	for b < a+0.05 && t.Context().Err() == nil {
		b = cpuSeconds(pid)
	}
	if b < a+0.05 {
		t.Errorf("cpuSeconds went from %.2f to %.2f across the whole busy loop", a, b)
	}
}

func TestParseGrowFlags(t *testing.T) {
	cfg, err := parseGrowFlags([]string{"-sizes", "200000,50_000,200000", "-c", "64,1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 50000, 200000}; !slices.Equal(cfg.sizes, want) {
		t.Errorf("sizes = %v, want %v (fresh added, sorted, once each)", cfg.sizes, want)
	}
	if want := []int{64, 1}; !slices.Equal(cfg.conns, want) {
		t.Errorf("conns = %v, want %v", cfg.conns, want)
	}
	for _, bad := range [][]string{{"-sizes", "ten"}, {"-sizes", "-5"}, {"-c", "0"}, {"-n", "0"}, {"-size", "3"}, {"extra"}} {
		if _, err := parseGrowFlags(bad); err == nil {
			t.Errorf("parseGrowFlags(%q) accepted it", bad)
		}
	}
}

// TestGrowFill: the fill child records n events through the store's own
// ingest, each its own lead with its draft job, and the store checks clean.
func TestGrowFill(t *testing.T) {
	data := t.TempDir()
	const n = 2500 // more than one fill transaction
	if err := serveGrowFill(context.Background(), data, n, 512, os.Stderr); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(data, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Events != n || s.Jobs != n || s.Ready != n {
		t.Errorf("after the fill: %+v, want %d events, jobs and ready jobs", s, n)
	}
	if _, err := st.EventByKey(demoChannel + ":" + eventID('f', 1, n-1)); err != nil {
		t.Errorf("the last event of the fill: %v", err)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check after the fill: %v", err)
	}
}

func TestSpread(t *testing.T) {
	if got, want := spread([]float64{3, 1, 2}, "%.0f"), "2 [1–3]"; got != want {
		t.Errorf("spread = %q, want %q", got, want)
	}
	if got := sizeName(1_000_000) + " " + sizeName(50_000) + " " + sizeName(0); got != "1M 50k fresh" {
		t.Errorf("sizeName = %q", got)
	}
}
