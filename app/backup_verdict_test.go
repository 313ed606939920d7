package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/offsite"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/web"
)

// startApp builds and starts the app on cfg (its DataDir kept by the
// caller, so a second app can start on the same files); stop stops it.
func startApp(t *testing.T, cfg *config.Config, d app.Deps) (base string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.Listener, d.APIToken = ln, token
	a, err := app.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			if err := a.Stop(t.Context()); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return "http://" + a.Addr().String(), stop
}

// api calls the JSON API with the admin token.
func api(t *testing.T, method, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// metricLine is the line of the scrape that starts with name and a space.
func metricLine(scrape, name string) string {
	for _, l := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// TestRejectedBackupThroughTheApp: the server's backup now (the
// scheduled task's code) with a copy that fails the real verification
// (Deps.VerifyBackup truncates it first) answers with the reason, keeps
// the earlier verified backup as the newest, puts the copy apart, and the
// metrics say the last backup failed while its age is the good one's.
func TestRejectedBackupThroughTheApp(t *testing.T) {
	cfg := draftAtOnce()
	cfg.DataDir = t.TempDir()
	cfg.Backups.Keep = 1
	var damage atomic.Bool
	base, _ := startApp(t, cfg, app.Deps{VerifyBackup: func(p string) error {
		if damage.Load() {
			if err := os.Truncate(p, 3*4096); err != nil {
				t.Error(err)
			}
		}
		return store.VerifyFile(p)
	}})
	code, raw := api(t, http.MethodPost, base+"/api/v1/backups")
	if code != http.StatusOK {
		t.Fatalf("good backup: %d %s", code, raw)
	}
	var good web.BackupResult
	if err := json.Unmarshal([]byte(raw), &good); err != nil {
		t.Fatal(err)
	}
	damage.Store(true)
	code, raw = api(t, http.MethodPost, base+"/api/v1/backups")
	if code != http.StatusBadGateway || !strings.Contains(raw, "failed verification") || !strings.Contains(raw, "truncated") {
		t.Fatalf("backup of a damaged copy: %d %s; want 502 with the reason", code, raw)
	}
	files, err := store.Backups(store.BackupDir(cfg.DataDir))
	if err != nil || len(files) != 1 || files[0].Name != good.File.Name {
		t.Errorf("backups = %+v (%v), want the good one alone (keep 1 did not count the bad one)", files, err)
	}
	if rej, _ := store.RejectedBackups(store.BackupDir(cfg.DataDir)); len(rej) != 1 {
		t.Errorf("rejected = %+v, want one", rej)
	}
	_, scrape := api(t, http.MethodGet, base+"/metrics")
	if l := metricLine(scrape, "handoff_backup_last_result"); l != "handoff_backup_last_result 0" {
		t.Errorf("last result: %q", l)
	}
	if metricLine(scrape, "handoff_backup_age_seconds") == "" {
		t.Errorf("no backup age after a good backup then a rejected one")
	}
}

// TestOffsiteMetricAfterRestartIsTheNewestVerified: a verified copy A,
// then a copy B whose upload the S3 server took before it was killed, so
// neither its read-back nor its delete ran: B stays in the bucket,
// newest by name and by time. After the process and the S3 server
// restart, the last-success gauge is A's upload time, not B's.
func TestOffsiteMetricAfterRestartIsTheNewestVerified(t *testing.T) {
	s3 := testkit.StartS3(t)
	up, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close() // as a dead server's connection would
		}
	}
	var armed, killed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(w, r)
		if armed.Load() && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, ".db") && killed.CompareAndSwap(false, true) {
			s3.Kill()
		}
	}))
	t.Cleanup(proxy.Close)

	cfg := draftAtOnce()
	cfg.DataDir = t.TempDir()
	target := func(endpoint string) *config.Target {
		return &config.Target{Bucket: s3.Bucket, Endpoint: endpoint, Region: "us-east-1", Keep: 3,
			AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Timeout: 20 * time.Second}
	}
	cfg.Backups.Target = target(proxy.URL)
	base, stop := startApp(t, cfg, app.Deps{})
	code, raw := api(t, http.MethodPost, base+"/api/v1/backups?to=s3")
	var a web.BackupResult
	if code != http.StatusOK || json.Unmarshal([]byte(raw), &a) != nil || a.Copy == nil || !a.Copy.Verified {
		t.Fatalf("first backup: %d %s", code, raw)
	}
	// A is an hour older in the bucket, so the two copies' times differ
	// whatever second B lands in.
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(s3.Root, s3.Bucket, a.File.Name), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	code, raw = api(t, http.MethodPost, base+"/api/v1/backups?to=s3")
	if code != http.StatusBadGateway || !strings.Contains(raw, "verify the copy") {
		t.Fatalf("backup with the S3 server killed after the upload: %d %s", code, raw)
	}
	if !killed.Load() {
		t.Fatal("the S3 server was never killed: the fault did not happen")
	}
	stop()

	s3 = testkit.RestartS3(t, s3)
	tg, err := offsite.New(*target(s3.Endpoint), store.IsBackupName)
	if err != nil {
		t.Fatal(err)
	}
	list, err := tg.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Verified || list[1].Name != a.File.Name || !list[1].Verified || !list[0].Uploaded.After(list[1].Uploaded) {
		t.Fatalf("the bucket after the fault: %+v; want the unverified copy newest, then %s verified and older", list, a.File.Name)
	}
	cfg.Backups.Target = target(s3.Endpoint)
	base, _ = startApp(t, cfg, app.Deps{})
	want := fmt.Sprintf("handoff_offsite_backup_last_success_timestamp_seconds %v", float64(list[1].Uploaded.UnixMilli())/1000)
	wrong := fmt.Sprintf("handoff_offsite_backup_last_success_timestamp_seconds %v", float64(list[0].Uploaded.UnixMilli())/1000)
	var got string
	testkit.Eventually(t, 10*time.Second, func() bool {
		_, scrape := api(t, http.MethodGet, base+"/metrics")
		got = metricLine(scrape, "handoff_offsite_backup_last_success_timestamp_seconds")
		return got != ""
	}, "the offsite gauges set from the bucket")
	if got != want {
		t.Errorf("after the restart: %q, want %q (the newest verified copy), not %q (the newest listed)", got, want, wrong)
	}
}
