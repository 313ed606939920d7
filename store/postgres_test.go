package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

// OpenURL opens a store on PostgreSQL that keeps what it committed across
// a reopen, and holds its schema against a second open while it runs.
func TestOpenURL(t *testing.T) {
	schema := pgtest.Schema(t)
	url := pgtest.URL(t) + " search_path=" + schema
	ctx := context.Background()
	st, err := OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, st, "web:m1", t0)
	if _, err := OpenURL(ctx, url, Options{}); !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), schema) {
		t.Errorf("a second OpenURL beside an open one = %v; want ErrLocked naming the schema", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatalf("OpenURL after the first closed: %v", err)
	}
	defer st.Close()
	if len(st.Migrations()) != 0 {
		t.Errorf("a reopen ran migrations %v", st.Migrations())
	}
	ev, err := st.EventByKey("web:m1")
	if err != nil || ev.ID != rec.Event.ID {
		t.Errorf("EventByKey after the reopen = %+v, %v; want event %s", ev, err, rec.Event.ID)
	}
	if err := st.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	// A backup of the PostgreSQL database is a bbolt file that verifies and
	// opens as a store with the same records: the way back to a file.
	dir := t.TempDir()
	bf, _, err := st.BackupToDir(dir, t0, BackupOptions{Keep: 2})
	if err != nil {
		t.Fatalf("BackupToDir: %v", err)
	}
	if err := VerifyFile(bf.Path); err != nil {
		t.Errorf("VerifyFile of the backup: %v", err)
	}
	copied, err := OpenFile(bf.Path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the backup: %v", err)
	}
	defer copied.Close()
	if ev, err := copied.EventByKey("web:m1"); err != nil || ev.ID != rec.Event.ID {
		t.Errorf("the backup's event = %+v, %v; want %s", ev, err, rec.Event.ID)
	}
}
