package app_test

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/engine"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/testkit/corpus"
)

// With database_url, serve keeps its records in PostgreSQL: the corpus's
// webhooks are acknowledged and stored there, as sent, no bbolt file is
// made, and a second process on the same database is refused while the
// first runs.
func TestDatabaseURL(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.DatabaseURL = pgtest.URL(t) + " search_path=" + pgtest.Schema(t)
	a := apptest.Start(t, cfg, app.Deps{})
	bodies := corpus.Bodies(corpus.Demo)
	if len(bodies) == 0 {
		t.Fatal("the corpus has no demo bodies")
	}
	for _, b := range bodies {
		resp, err := http.Post(apptest.URL(a)+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d; want 202", b.Name(), resp.StatusCode)
		}
	}
	for _, b := range bodies {
		ev, err := a.Store().EventByKey("demo:" + b.Want.MessageID)
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		if ev.Text != b.Want.Text {
			t.Errorf("%s: stored text %q; want %q", b.Name(), ev.Text, b.Want.Text)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, store.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a bbolt file in the data folder beside database_url: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	second := *cfg
	second.DataDir = t.TempDir()
	if b, err := app.New(&second, app.Deps{Listener: ln}); err == nil {
		b.Stop(t.Context())
		t.Error("a second process opened the database the first has open")
	} else if !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), "another handoff process") {
		t.Errorf("the second open = %v; want ErrLocked saying another process has it", err)
	}
}
