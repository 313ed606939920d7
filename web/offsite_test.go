package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// offsiteConfig is the demo with backups.target on the S3 server s.
func offsiteConfig(s testkit.S3, prefix string) *config.Config {
	cfg := config.Default()
	cfg.Backups.Target = &config.Target{
		Bucket: s.Bucket, Prefix: prefix, Endpoint: s.Endpoint, Region: "us-east-1", Keep: 3,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, Timeout: time.Minute,
	}
	return cfg
}

// backupNow calls POST /api/v1/backups?to=s3 with the API token.
func backupNow(t *testing.T, e *testEnv) (int, BackupResult, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/backups?to=s3", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var res BackupResult
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("backup now: %v: %s", err, raw)
		}
	}
	return resp.StatusCode, res, string(raw)
}

func scrapeText(t *testing.T, e *testEnv) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

func hasEvent(t *testing.T, st *store.Store, key string) bool {
	t.Helper()
	_, err := st.EventByKey(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("event %s: %v", key, err)
	}
	return err == nil
}

// TestOffsiteBackupThenRestoreFromDashboard is the operator's path: a
// backup arrives in a real S3-compatible server, byte for byte, is listed
// and counted; later writes are undone by restoring that copy from the
// dashboard, with a typed confirmation, while the server keeps running;
// the old database is kept, the restore audited, and the workers work on.
func TestOffsiteBackupThenRestoreFromDashboard(t *testing.T) {
	s3 := testkit.StartS3(t)
	e := newTestEnv(t, offsiteConfig(s3, "agency-a/"))
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	pending(t, e, "demo", "before-1", "hello before the backup")

	code, res, raw := backupNow(t, e)
	if code != http.StatusOK || res.Copy == nil {
		t.Fatalf("backup now: %d %s", code, raw)
	}
	local, err := os.ReadFile(filepath.Join(store.BackupDir(e.cfg.DataDir), res.File.Name))
	if err != nil {
		t.Fatalf("the local backup: %v", err)
	}
	remote, err := os.ReadFile(filepath.Join(s3.Root, s3.Bucket, "agency-a", res.File.Name))
	if err != nil {
		t.Fatalf("the S3 server holds no copy: %v", err)
	}
	if !bytes.Equal(local, remote) || sha(remote) != res.SHA256 || res.Copy.SHA256 != res.SHA256 {
		t.Fatalf("the copy differs from the backup: %d vs %d bytes, sha %s vs %s (reported %s)", len(remote), len(local), sha(remote), sha(local), res.Copy.SHA256)
	}
	m := scrapeText(t, e)
	for _, want := range []string{
		fmt.Sprintf("handoff_offsite_backup_last_success_bytes %d", len(local)),
		"handoff_offsite_backup_last_result 1",
		`handoff_offsite_backups_total{result="ok"} 1`,
		"handoff_offsite_backup_last_success_timestamp_seconds ",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	p := admin.getOK("/backups")
	if !strings.Contains(p.body, `id="offsite-copies"`) || !strings.Contains(p.body, res.File.Name) || !strings.Contains(p.body, "s3://handoff-test/agency-a") {
		t.Fatalf("the backups page does not list the offsite copy: %.2000s", p.body)
	}

	// Written after the backup: the restore takes it away.
	pending(t, e, "demo", "after-1", "hello after the backup")
	source := url.Values{"source": {"offsite:" + res.File.Name}, "current": {"boss-password"}}

	source.Set("confirm", "yes")
	if p := admin.post("/backups/restore", source); p.code != http.StatusBadRequest || !strings.Contains(p.body, "Nothing was restored") {
		t.Fatalf("restore without the typed word: %d %.300s", p.code, p.body)
	}
	if !hasEvent(t, e.st, "demo:after-1") {
		t.Fatal("a refused restore changed the database")
	}

	source.Set("confirm", "restore")
	p = admin.post("/backups/restore", source)
	if p.code != http.StatusOK || !strings.Contains(p.body, "Restored the offsite copy") {
		t.Fatalf("restore: %d %.1000s", p.code, p.body)
	}
	if hasEvent(t, e.st, "demo:after-1") || !hasEvent(t, e.st, "demo:before-1") {
		t.Fatal("the restored database is not the backup's")
	}
	kept, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, store.FileName+".before-restore-*"))
	if len(kept) != 1 {
		t.Fatalf("kept databases: %v, want one", kept)
	}
	old, err := store.OpenFile(kept[0], store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasEvent(t, old, "demo:after-1") {
		t.Error("the kept database lacks what was written before the restore")
	}
	old.Close()
	log, err := e.st.AuditLog(20)
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, a := range log {
		if a.Action == "backup restored" && a.Who == "boss" && strings.Contains(a.Target, res.File.Name) && strings.Contains(a.Detail, filepath.Base(kept[0])) {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no audit entry for the restore in %+v", log)
	}
	// The workers run again, on the restored database.
	pending(t, e, "demo", "after-restore", "hello after the restore")
	// And the next backup goes offsite as before.
	if code, res2, raw := backupNow(t, e); code != http.StatusOK || res2.Copy == nil {
		t.Fatalf("backup after the restore: %d %s", code, raw)
	}

	// A second restore keeps only the database it set aside, names it,
	// and says the one the first restore kept was deleted.
	again := newBrowser(t, e.url)
	again.login("boss", "boss-password")
	p = again.post("/backups/restore", source)
	if p.code != http.StatusOK || !strings.Contains(p.body, "only the newest is kept") {
		t.Fatalf("second restore: %d %.1000s", p.code, p.body)
	}
	kept2, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, store.FileName+".before-restore-*"))
	if len(kept2) != 1 || kept2[0] == kept[0] {
		t.Fatalf("kept databases after a second restore: %v, want one, not the first restore's %s", kept2, kept[0])
	}
	if !strings.Contains(p.body, kept2[0]) {
		t.Errorf("the answer does not say where the old database is kept (%s): %.1000s", kept2[0], p.body)
	}
	old, err = store.OpenFile(kept2[0], store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasEvent(t, old, "demo:after-restore") {
		t.Error("the database kept by the second restore lacks what was written before it")
	}
	old.Close()
}

// uploadRestore posts file as the dashboard's upload form does.
func uploadRestore(t *testing.T, b *browser, name string, file []byte, confirm string) page {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("csrf", b.csrf)
	mw.WriteField("confirm", confirm)
	mw.WriteField("current", b.pw)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(file)
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, b.base+"/backups/restore/upload", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{code: resp.StatusCode, body: string(raw), header: resp.Header}
}

// TestRestoreUpload restores an uploaded snapshot while webhooks keep
// arriving, and refuses a damaged file without changing anything.
func TestRestoreUpload(t *testing.T) {
	e := newTestEnv(t, nil)
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	pending(t, e, "demo", "kept-1", "in the snapshot")
	resp, snapshot := apiBackup(t, e)
	checkSnapshot(t, resp, snapshot)
	pending(t, e, "demo", "lost-1", "after the snapshot")

	damaged := bytes.Clone(snapshot)
	for i := 4096; i < len(damaged) && i < 3*4096; i++ {
		damaged[i] ^= 0x5a
	}
	if p := uploadRestore(t, admin, "bad.db", damaged, "restore"); p.code != http.StatusUnprocessableEntity || !strings.Contains(p.body, "Nothing was restored") {
		t.Fatalf("restore of a damaged file: %d %.500s", p.code, p.body)
	}
	if p := uploadRestore(t, admin, "good.db", snapshot, "nope"); p.code != http.StatusBadRequest {
		t.Fatalf("restore without the typed word: %d", p.code)
	}
	if kept, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, store.FileName+".before-restore-*")); len(kept) != 0 || !hasEvent(t, e.st, "demo:lost-1") {
		t.Fatalf("a refused restore changed something: kept %v", kept)
	}

	// Webhooks go on during the restore: each is answered, and each one
	// answered 202 after the restore ended is in the restored database.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var afterRestore []string
	var restored bool
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("during-%d-%d", w, i)
				b := corpus.Message(3*i+w, id, "x@example.com", "x@example.com") // layouts and texts mixed; one conversation, as before
				mu.Lock()
				startedAfter := restored
				mu.Unlock()
				code, _ := e.do(t, http.MethodPost, "/hooks/demo", b.ContentType, b.Raw, nil)
				if code != http.StatusAccepted {
					t.Errorf("webhook during the restore: %d", code)
					return
				}
				if startedAfter {
					mu.Lock()
					afterRestore = append(afterRestore, "demo:"+id)
					mu.Unlock()
				}
			}
		}()
	}
	p := uploadRestore(t, admin, "good.db", snapshot, "restore")
	mu.Lock()
	restored = true
	mu.Unlock()
	testkit.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(afterRestore) >= 10
	}, "webhooks after the restore")
	close(stop)
	wg.Wait()
	if p.code != http.StatusOK || !strings.Contains(p.body, "Restored the uploaded file good.db") {
		t.Fatalf("restore: %d %.800s", p.code, p.body)
	}
	if hasEvent(t, e.st, "demo:lost-1") || !hasEvent(t, e.st, "demo:kept-1") {
		t.Fatal("the restored database is not the snapshot")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range afterRestore {
		if !hasEvent(t, e.st, k) {
			t.Errorf("%s was accepted after the restore but is not in the database", k)
		}
	}
	if err := e.st.Check(); err != nil {
		t.Fatalf("check after the restore: %v", err)
	}
}

// TestOffsiteFailureIsShown: a target that refuses the upload fails the
// backup-now with its reason, on the page and in the metrics.
func TestOffsiteFailureIsShown(t *testing.T) {
	s3 := testkit.StartS3(t)
	s3.SecretKey = "the-wrong-secret"
	e := newTestEnv(t, offsiteConfig(s3, ""))
	admin := loggedIn(t, e, "boss", store.RoleAdmin, "")
	p := admin.post("/backups/now", nil)
	if p.code != http.StatusBadGateway || !strings.Contains(p.body, "The backup failed") || strings.Contains(p.body, "the-wrong-secret") {
		t.Fatalf("backup now with a refused upload: %d %.800s", p.code, p.body)
	}
	m := scrapeText(t, e)
	if !strings.Contains(m, "handoff_offsite_backup_last_result 0") || !strings.Contains(m, `handoff_offsite_backups_total{result="failed"} 1`) || strings.Contains(m, "handoff_offsite_backup_last_success_bytes") {
		t.Errorf("metrics after a failed copy:\n%s", grepLines(m, "offsite"))
	}
	if p := admin.getOK("/backups"); !strings.Contains(p.body, `id="offsite-last" class="notice error"`) {
		t.Errorf("the page does not show the failed copy: %.1500s", p.body)
	}
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
