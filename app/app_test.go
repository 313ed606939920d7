package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

const token = "app-test-token-1234"

// timeline is what GET /api/v1/events/{key} says of the jobs, the draft
// and the outbox row.
type timeline struct {
	Jobs []struct {
		Kind     string `json:"kind"`
		State    string `json:"state"`
		Attempts []struct {
			Error string `json:"error"`
		} `json:"attempts"`
	} `json:"jobs"`
	Draft *struct {
		ID string `json:"id"`
	} `json:"draft"`
	Outbox *struct {
		Status string `json:"status"`
	} `json:"outbox"`
}

// call sends a request with the API token and decodes a JSON answer into out.
func call(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %q", method, url, err, raw)
		}
	}
	return resp.StatusCode
}

// eventTimeline reads the timeline of the demo event id.
func eventTimeline(t *testing.T, base, id string) timeline {
	t.Helper()
	var tl timeline
	if code := call(t, http.MethodGet, base+"/api/v1/events/demo:"+id, "", &tl); code != http.StatusOK {
		t.Fatalf("GET the timeline of %s: %d", id, code)
	}
	return tl
}

// draftAtOnce is the demo config without the channels' quiet period, for
// the tests whose subject is not the quiet period: a message is drafted
// as soon as it is recorded.
func draftAtOnce() *config.Config {
	cfg := config.Default()
	for i := range cfg.Channels {
		cfg.Channels[i].Coalesce = 0
	}
	cfg.UndoWindow = 0 // an approval is sent at once
	return cfg
}

// TestOneEventEndToEnd: the wired process takes a webhook, drafts it on
// its workers, and sends the approved reply through the sandbox provider.
func TestOneEventEndToEnd(t *testing.T) {
	base := apptest.URL(apptest.Start(t, draftAtOnce(), app.Deps{APIToken: token}))
	if code := call(t, http.MethodPost, base+"/hooks/demo", `{"id":"m-1","from":"+15550001234","text":"call me"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	var tl timeline
	testkit.Eventually(t, 10*time.Second, func() bool { tl = eventTimeline(t, base, "m-1"); return tl.Draft != nil }, "the draft")
	if code := call(t, http.MethodPost, base+"/api/v1/drafts/"+tl.Draft.ID+"/approve", "", nil); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("approve: %d", code)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		tl = eventTimeline(t, base, "m-1")
		return tl.Outbox != nil && tl.Outbox.Status == "sent"
	}, "the reply sent")
}

// TestStopDrainsBeforeClosing: Stop refuses new connections first, cancels
// a draft in progress (its job released, nothing stored), and closes the
// database last; the next process on the same folder drafts it.
func TestStopDrainsBeforeClosing(t *testing.T) {
	cfg := draftAtOnce()
	cfg.DataDir = t.TempDir()
	cfg.Drafter.Delay = time.Second // the draft is still being written when Stop begins
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.Deps{Listener: ln, APIToken: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := apptest.URL(a)
	if code := call(t, http.MethodPost, base+"/hooks/demo", `{"id":"m-1","from":"+15550001234"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d, want 202", code)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		tl := eventTimeline(t, base, "m-1")
		return len(tl.Jobs) == 1 && tl.Jobs[0].State == string(store.JobRunning)
	}, "the draft job running")
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the stopped app still accepts connections")
	}

	// The same folder again: the file lock was released, and the draft
	// the stopping app was writing is written, by its one job.
	cfg.Drafter.Delay = 0
	again := apptest.Start(t, cfg, app.Deps{APIToken: token})
	var tl timeline
	testkit.Eventually(t, 10*time.Second, func() bool {
		tl = eventTimeline(t, apptest.URL(again), "m-1")
		return tl.Draft != nil
	}, "the draft after the restart")
	// The stop cut the draft short (its attempt released, nothing stored),
	// rather than wait for it: the restart's attempt wrote it.
	if len(tl.Jobs) != 1 || tl.Jobs[0].State != string(store.JobCompleted) || len(tl.Jobs[0].Attempts) != 2 || !strings.Contains(tl.Jobs[0].Attempts[0].Error, "shutdown") {
		t.Errorf("after a stop during drafting: jobs %+v; want its one job completed after two attempts, the first released at shutdown", tl.Jobs)
	}
}

// TestNewFailsLeavingNothingOpen: every error of New comes before anything
// runs, and leaves the folder and the address free.
func TestNewFailsLeavingNothingOpen(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name  string
		setup func(cfg *config.Config)
		want  string
	}{
		{"unknown drafter", func(cfg *config.Config) { cfg.Drafter.Kind = "oracle" }, "drafter.kind"},
		{"address in use", func(cfg *config.Config) { cfg.Addr = busy.Addr().String() }, "listen on"},
		{"empty database file", func(cfg *config.Config) {
			if err := os.WriteFile(filepath.Join(cfg.DataDir, store.FileName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir, cfg.Addr = t.TempDir(), "127.0.0.1:0"
			tc.setup(cfg)
			a, err := app.New(cfg, app.Deps{})
			if err == nil {
				a.Stop(t.Context())
				t.Fatalf("New succeeded; want an error mentioning %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if fi, statErr := os.Stat(filepath.Join(cfg.DataDir, store.FileName)); statErr == nil && fi.Size() == 0 {
				return // the refused empty file: nothing to reopen
			}
			st, err := store.Open(cfg.DataDir, store.Options{})
			if err != nil {
				t.Fatalf("the failed New left the store open: %v", err)
			}
			st.Close()
		})
	}
}

// TestStopBeforeStart releases the store and the listener of an app that
// never started (serve's first-admin step can fail between the two).
func TestStopBeforeStart(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir, cfg.Addr = t.TempDir(), "127.0.0.1:0"
	a, err := app.New(cfg, app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	addr := a.Addr().String()
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is still taken: %v", err)
	}
	ln.Close()
	st, err := store.Open(cfg.DataDir, store.Options{})
	if err != nil {
		t.Fatalf("the store is still open: %v", err)
	}
	st.Close()
}
