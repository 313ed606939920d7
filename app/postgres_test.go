package app_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// With database_url, serve keeps its records in PostgreSQL: the corpus's
// webhooks are acknowledged and stored there, as sent, and no bbolt file
// is made.
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
}

// Several servers share one database: the corpus's webhooks, spread over
// three, are each recorded once (a redelivery to another server is a
// duplicate) and drafted once, by whichever server claimed the job; one
// server at a time runs the scheduled work, and once it stops another
// takes it over.
func TestSeveralServers(t *testing.T) {
	url := pgtest.URL(t) + " search_path=" + pgtest.Schema(t)
	var (
		apps [3]*app.App
		logs [3]*testkit.Log
	)
	for i := range apps {
		cfg := draftAtOnce()
		cfg.DataDir = t.TempDir()
		cfg.DatabaseURL = url
		logs[i] = &testkit.Log{}
		apps[i] = apptest.Start(t, cfg, app.Deps{APIToken: token, Logger: slog.New(slog.NewJSONHandler(logs[i], nil))})
	}
	bodies := corpus.Bodies(corpus.Demo)
	for i, b := range bodies {
		for n, want := range []int{http.StatusAccepted, http.StatusOK} {
			a := apps[(i+n)%len(apps)]
			resp, err := http.Post(apptest.URL(a)+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("%s, delivery %d to server %d: %d; want %d", b.Name(), n+1, (i+n)%len(apps), resp.StatusCode, want)
			}
		}
	}
	for _, b := range bodies {
		var tl timeline
		testkit.Eventually(t, 30*time.Second, func() bool {
			tl = eventTimeline(t, apptest.URL(apps[2]), b.Want.MessageID)
			return tl.Draft != nil
		}, b.Name()+" drafted")
		if len(tl.Jobs) != 1 || len(tl.Jobs[0].Attempts) != 1 {
			t.Errorf("%s: jobs %+v; want one draft job, run once", b.Name(), tl.Jobs)
		}
	}
	const leadsMsg = "this server leads: it runs the scheduled work"
	// leads counts each server's "leads" lines.
	leads := func() (n int, by [3]int) {
		for i, l := range logs {
			by[i] = len(l.Lines(t, leadsMsg))
			n += by[i]
		}
		return n, by
	}
	testkit.Eventually(t, 30*time.Second, func() bool { n, _ := leads(); return n == 1 }, "one server leads")
	_, by := leads()
	leader := slices.Index(by[:], 1)
	if err := apps[leader].Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { n, _ := leads(); return n == 2 }, "another server leads once the leader stopped")
	if _, after := leads(); after[leader] != 1 {
		t.Errorf("leads by server %v after server %d stopped; want the lead taken by another", after, leader)
	}
}
