package web

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// TestBackupsFileRangeLogsBytesSent: a range request (a resumed download)
// of a scheduled backup is logged with the bytes it sent and the range it
// asked for, beside the file's size; a whole download logs the whole size
// as sent and no range.
func TestBackupsFileRangeLogsBytesSent(t *testing.T) {
	e, _, dir := backupsEnv(t)
	sendLead(t, e, "demo", "r-1", "r1@example.com")
	f, _, err := e.st.BackupToDir(dir, time.Date(2026, 3, 1, 2, 30, 0, 0, time.UTC), store.BackupOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	b := loggedIn(t, e, "ada", store.RoleAdmin, "")
	var logs testkit.Log
	e.srv.log = slog.New(slog.NewJSONHandler(&logs, nil))

	get := func(rng string) []byte {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.url+"/backups/file/"+f.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantCode := http.StatusOK
		if rng != "" {
			req.Header.Set("Range", rng)
			wantCode = http.StatusPartialContent
		}
		if strings.HasPrefix(rng, "bytes=999999999") {
			wantCode = http.StatusRequestedRangeNotSatisfiable
		}
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != wantCode {
			t.Fatalf("GET with Range %q: %d, want %d", rng, resp.StatusCode, wantCode)
		}
		return body
	}

	part := get("bytes=100-1123")
	if !bytes.Equal(part, want[100:1124]) {
		t.Fatalf("the range answered %d bytes, want the file's bytes 100–1123", len(part))
	}
	var line map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		l := logs.Lines(t, "backup download finished")
		if len(l) > 0 {
			line = l[0]
		}
		return len(l) > 0
	}, "the range download's log line")
	if line["bytes"] != float64(1024) || line["size"] != float64(len(want)) || line["range"] != "bytes=100-1123" || line["status"] != float64(http.StatusPartialContent) {
		t.Errorf("the range download logged %v; want bytes 1024, size %d, range bytes=100-1123, status 206", line, len(want))
	}

	if whole := get(""); !bytes.Equal(whole, want) {
		t.Fatalf("the whole download answered %d bytes, want %d", len(whole), len(want))
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		l := logs.Lines(t, "backup download finished")
		if len(l) > 1 {
			line = l[1]
		}
		return len(l) > 1
	}, "the whole download's log line")
	if _, ok := line["range"]; ok || line["bytes"] != float64(len(want)) || line["size"] != float64(len(want)) {
		t.Errorf("the whole download logged %v; want bytes and size %d and no range", line, len(want))
	}

	// A range past the file's end: 416, logged as no file sent.
	get("bytes=999999999-")
	testkit.Eventually(t, 10*time.Second, func() bool {
		l := logs.Lines(t, "backup download answered without the file")
		if len(l) > 0 {
			line = l[0]
		}
		return len(l) > 0
	}, "the unsatisfiable range's log line")
	if line["status"] != float64(http.StatusRequestedRangeNotSatisfiable) || line["range"] != "bytes=999999999-" {
		t.Errorf("the unsatisfiable range logged %v; want status 416 and its range", line)
	}
	if n := len(logs.Lines(t, "backup download finished")); n != 2 {
		t.Errorf("%d \"finished\" lines after a 416, want the 2 downloads before it", n)
	}
}
