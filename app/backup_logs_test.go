package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/testkit"
)

// logLines decodes the JSON log lines whose msg is msg.
func logLines(t *testing.T, logs string, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", l)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestBackupResultsAreLogged: each backup result is one log line with
// the file, its size and its SHA-256 and no secret: a backup written, its
// offsite copy verified, a download finished, and an offsite copy that
// failed.
func TestBackupResultsAreLogged(t *testing.T) {
	s3 := testkit.StartS3(t)
	cfg := config.Default()
	cfg.Backups.Target = &config.Target{
		Bucket: s3.Bucket, Prefix: "logs/", Endpoint: s3.Endpoint, Region: "us-east-1", Keep: 3,
		AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Timeout: time.Minute,
	}
	var logs testkit.Log
	a := apptest.Start(t, cfg, app.Deps{APIToken: token, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	base := apptest.URL(a)
	if code := call(t, http.MethodPost, base+"/hooks/demo", `{"id":"m-1","from":"+15550001234","text":"call me"}`, nil); code != http.StatusAccepted {
		t.Fatalf("POST /hooks/demo: %d", code)
	}
	var res struct {
		File struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"file"`
		SHA256 string `json:"sha256"`
	}
	if code := call(t, http.MethodPost, base+"/api/v1/backups?to=s3", "", &res); code != http.StatusOK {
		t.Fatalf("backup now: %d", code)
	}
	written := logLines(t, logs.String(), "backup written")
	if len(written) != 1 || written[0]["file"] != res.File.Name || written[0]["sha256"] != res.SHA256 || written[0]["bytes"] != float64(res.File.Size) {
		t.Errorf("backup written: %v; want one line with %s, %d bytes, %s", written, res.File.Name, res.File.Size, res.SHA256)
	}
	verified := logLines(t, logs.String(), "offsite copy verified")
	if len(verified) != 1 || verified[0]["sha256"] != res.SHA256 || verified[0]["bytes"] != float64(res.File.Size) || !strings.HasSuffix(verified[0]["key"].(string), res.File.Name) {
		t.Errorf("offsite copy verified: %v; want one line with the key, %d bytes, %s", verified, res.File.Size, res.SHA256)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	finished := logLines(t, logs.String(), "backup download finished")
	if len(finished) != 1 || finished[0]["bytes"] != float64(n) || finished[0]["sha256"] != resp.Trailer.Get("X-Backup-SHA256") {
		t.Errorf("backup download finished: %v; want one line with %d bytes and the trailer's %s", finished, n, resp.Trailer.Get("X-Backup-SHA256"))
	}

	// A target that refuses every connection: the copy fails, logged.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + closed.Addr().String()
	closed.Close()
	cfg2 := config.Default()
	cfg2.Backups.Target = &config.Target{
		Bucket: s3.Bucket, Endpoint: dead, Region: "us-east-1", Keep: 3,
		AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Timeout: 5 * time.Second,
	}
	var logs2 testkit.Log
	b := apptest.Start(t, cfg2, app.Deps{APIToken: token, Logger: slog.New(slog.NewJSONHandler(&logs2, nil))})
	if code := call(t, http.MethodPost, apptest.URL(b)+"/api/v1/backups?to=s3", "", nil); code != http.StatusBadGateway {
		t.Errorf("backup now to a dead target: %d, want 502", code)
	}
	failed := logLines(t, logs2.String(), "offsite copy failed")
	if len(failed) != 1 || failed[0]["target"] == nil || failed[0]["err"] == nil {
		t.Errorf("offsite copy failed: %v; want one line with the target, the file's sha256 and the error", failed)
	} else if sum, _ := failed[0]["sha256"].(string); sum == "" {
		t.Errorf("offsite copy failed: %v; want one line with the target, the file's sha256 and the error", failed)
	}
	for _, l := range []string{logs.String(), logs2.String()} {
		if strings.Contains(l, s3.SecretKey) {
			t.Errorf("the logs hold the target's secret key")
		}
	}
}
