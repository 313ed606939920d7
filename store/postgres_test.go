package store

import (
	"context"
	"errors"
	"testing"

	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
)

// OpenURL opens a store on PostgreSQL that keeps what it committed across
// a reopen; a second opens beside it (several servers share a database),
// and a move's exclusive hold opens beside neither.
func TestOpenURL(t *testing.T) {
	schema := pgtest.Schema(t)
	url := pgtest.URL(t) + " search_path=" + schema
	ctx := context.Background()
	st, err := OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, st, "web:m1", t0)
	second, err := OpenURL(ctx, url, Options{})
	if err != nil {
		t.Fatalf("a second OpenURL beside an open one: %v", err)
	}
	if !st.Shared() || !second.Shared() {
		t.Error("stores on one PostgreSQL database do not say they share it")
	}
	if ev, err := second.EventByKey("web:m1"); err != nil || ev.ID != rec.Event.ID {
		t.Errorf("the second store's EventByKey = %+v, %v; want event %s", ev, err, rec.Event.ID)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err := openMovePostgres(ctx, url); !errors.As(err, new(inUseError)) {
		if db != nil {
			db.Close()
		}
		t.Errorf("a move into a database a store has open = %v; want it refused as in use", err)
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
