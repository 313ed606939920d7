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
}
