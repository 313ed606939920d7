package boltengine

import (
	"path/filepath"
	"testing"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/storetest"
)

// TestContract runs the engine contract on a bbolt file, mapped ahead (as
// the store maps it) so that the write beside an open read needs no remap:
// a remap waits for every open read, and that read waits for the write.
func TestContract(t *testing.T) {
	storetest.Contract(t, func(t *testing.T) engine.Engine {
		db, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{MapFreelist: true, MmapSize: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
		return db
	})
}
