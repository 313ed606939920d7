package e2e

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/storetest"
	"github.com/handoff/handoff/testkit"
)

// TestOneUnreadableRecordThroughTheBinary writes a real file through the
// real binary (several messages, their draft jobs and drafts), stops it,
// flips bytes inside one event's stored value (bit rot: bbolt keeps no page
// checksum) and, in another, a byte of a key that keeps the JSON valid
// ("name" become "nam\xff"), and restarts on the file: serve starts,
// /readyz is 200, the lists answer, the damaged event answers 422 naming
// itself, /metrics counts both records, and handoff verify exits non-zero
// naming each on its own line.
func TestOneUnreadableRecordThroughTheBinary(t *testing.T) {
	inst := startInstance(t, "")
	ids := []string{"rot-1", "rot-2", "rot-3", "rot-4"}
	for _, id := range ids {
		if res, err := inst.postHook(id); err != nil || res.code != http.StatusAccepted {
			t.Fatalf("hook %s: %v %v", id, res, err)
		}
	}
	views := map[string]eventView{}
	testkit.Eventually(t, 20*time.Second, func() bool {
		for _, id := range ids {
			v, err := inst.event("demo:" + id)
			if err != nil || v.Draft == nil {
				return false
			}
			views[id] = v
		}
		return true
	}, "every draft")
	inst.stopCleanly()

	file := filepath.Join(inst.dataDir, store.FileName)
	rotten, renamed := views["rot-1"].Event.ID, views["rot-3"].Event.ID
	if err := storetest.Rot(file, "events", []byte(rotten), storetest.Replace(`"v":1`, `"v"#1`)); err != nil {
		t.Fatal(err)
	}
	if err := storetest.Rot(file, "events", []byte(renamed), storetest.Replace(`"name"`, "\"nam\xff\"")); err != nil {
		t.Fatal(err)
	}

	inst.restart() // fails the test unless it starts and answers /healthz
	if code, err := inst.status("/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz = %d, %v; want 200", code, err)
	}
	get := func(path string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, inst.cur().URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+inst.token)
		resp, err := inst.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/api/v1/drafts", "/api/v1/handoffs", "/api/v1/dead-letters", "/api/v1/events/" + url.PathEscape("demo:rot-2")} {
		if code, body := get(p); code != http.StatusOK {
			t.Errorf("GET %s: %d %s; want 200", p, code, body)
		}
	}
	if code, body := get("/api/v1/events/" + url.PathEscape("demo:rot-1")); code != http.StatusUnprocessableEntity || !strings.Contains(body, "event "+rotten+" cannot be read") {
		t.Errorf("GET the rotten event: %d %s; want 422 naming it", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\nhandoff_unreadable_records 2\n") {
		t.Errorf("/metrics does not count 2 unreadable records")
	}
	if !strings.Contains(inst.cur().Tail(logTail), "2 records cannot be read") {
		t.Errorf("the start's log does not name the unreadable records:\n%s", inst.cur().Tail(logTail))
	}
	if err := inst.stop(30 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}

	code, out, errOut := runOnce(t, "verify", file)
	if code == 0 {
		t.Fatalf("verify of a file with unreadable records exited 0:\n%s%s", out, errOut)
	}
	for _, want := range []string{"event " + rotten + " cannot be read: invalid character", "event " + renamed + " cannot be read: json: unknown field \"nam"} {
		n := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("verify printed %q on %d lines, want one:\n%s%s", want, n, out, errOut)
		}
	}
}
