package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/testkit"
)

// apiBackup downloads GET /api/v1/backup with the API token; the body is
// read to the end, so the response's trailer is there.
func apiBackup(t *testing.T, e *testEnv) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+"/api/v1/backup", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the backup: %v", err)
	}
	return resp, body
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var snapshotName = regexp.MustCompile(`^attachment; filename="handoff-\d{8}T\d{6}Z\.db"$`)

// checkSnapshot checks a downloaded snapshot's headers and trailer.
func checkSnapshot(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("backup download: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Content-Disposition"); !snapshotName.MatchString(got) {
		t.Errorf("Content-Disposition %q; want a file name with the date and time", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/octet-stream" {
		t.Errorf("Content-Type %q", got)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}
	if got, want := resp.Trailer.Get("X-Backup-SHA256"), sha(body); got != want {
		t.Errorf("X-Backup-SHA256 trailer %q; the %d bytes received hash to %s", got, len(body), want)
	}
}

// verifyAndRestore writes a snapshot to a file, verifies it as `handoff
// verify` does, restores it into a new folder and opens that.
func verifyAndRestore(t *testing.T, body []byte) *store.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := store.OpenFile(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the snapshot does not open: %v", err)
	}
	err = ro.Check()
	ro.Close()
	if err != nil {
		t.Fatalf("the snapshot fails verification: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := store.Restore(context.Background(), dir, path); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("open the restored folder: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// recorders insert events straight into the store from several goroutines
// until halted, remembering which were acknowledged.
type recorders struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	n     atomic.Int64
	mu    sync.Mutex
	acked []string
	err   error
}

func startRecorders(t *testing.T, st *store.Store, n int) *recorders {
	t.Helper()
	r := &recorders{stop: make(chan struct{})}
	start := make(chan struct{})
	for g := range n {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			<-start
			for i := 0; ; i++ {
				select {
				case <-r.stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%05d", g, i)
				key := "demo:" + id
				_, err := leads.RecordEvent(context.Background(), st, store.Event{
					ID: ulid.Make().String(), Key: key, Channel: "demo", MessageID: id, CorrelationID: ulid.Make().String(),
					ConversationID: id + "@example.com", Contact: id + "@example.com", Name: "Writer", Text: "hello", ReceivedAt: time.Now().UTC(),
				}, store.NewJob{ID: ulid.Make().String(), Kind: review.KindDraft, Key: key, MaxAttempts: 3})
				r.mu.Lock()
				if err != nil {
					r.err = errors.Join(r.err, err)
					r.mu.Unlock()
					return
				}
				r.acked = append(r.acked, key)
				r.mu.Unlock()
				r.n.Add(1)
			}
		}()
	}
	close(start)
	t.Cleanup(func() { r.halt(t) })
	return r
}

func (r *recorders) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.acked)
}

func (r *recorders) waitFor(t *testing.T, n int64) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool { return r.n.Load() >= n }, fmt.Sprintf("%d acknowledged events", n))
}

func (r *recorders) halt(t *testing.T) {
	t.Helper()
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	r.wg.Wait()
	if r.err != nil {
		t.Errorf("a writer failed: %v", r.err)
	}
}

// TestBackupAPIWhileWriting downloads GET /api/v1/backup while goroutines
// insert events and the runner drafts them: the bytes match the trailer's
// SHA-256, verify, and restored hold every event acknowledged before the
// download began.
func TestBackupAPIWhileWriting(t *testing.T) {
	e := newTestEnv(t, nil)
	w := startRecorders(t, e.st, 4)
	w.waitFor(t, 200)
	before := w.snapshot()

	resp, body := apiBackup(t, e)
	w.waitFor(t, int64(len(before))+50) // the writers were never held up for long
	w.halt(t)
	checkSnapshot(t, resp, body)
	restored := verifyAndRestore(t, body)
	var lost []string
	for _, k := range before {
		if _, err := restored.EventByKey(k); err != nil {
			lost = append(lost, k)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d events acknowledged before the backup are missing from it, e.g. %s", len(lost), len(before), lost[0])
	}
}

// TestBackupAPIIsForAdmins: no credentials, a wrong token and an approver
// are refused; nothing is streamed to them.
func TestBackupAPIIsForAdmins(t *testing.T) {
	e := newTestEnv(t, nil)
	if code, _ := e.do(t, http.MethodGet, "/api/v1/backup", "", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code, _ := e.do(t, http.MethodGet, "/api/v1/backup", "", nil, http.Header{"Authorization": {"Bearer nope"}}); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	b := loggedIn(t, e, "olga", store.RoleApprover, "")
	for _, path := range []string{"/api/v1/backup", "/backups", "/backups/download", "/backups/file/" + store.BackupPrefix + "20260101T000000Z.db"} {
		if p := b.get(path); p.code != http.StatusForbidden {
			t.Errorf("approver GET %s: %d, want 403", path, p.code)
		}
	}
	anon := newBrowser(t, e.url)
	if p := anon.get("/backups"); p.code != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/login") {
		t.Errorf("GET /backups without a session: %d to %q, want 303 to /login", p.code, p.header.Get("Location"))
	}
}

// backupsEnv is a server with its scheduled backups folder
// (store.BackupDir) inside its temporary data folder, beside the live
// database, as in production.
func backupsEnv(t *testing.T) (*testEnv, *Metrics, string) {
	t.Helper()
	cfg := config.Default()
	cfg.Backups.Schedule, cfg.Backups.Keep = "30 2 * * *", 3
	e, _ := newEnv(t, cfg, envOptions{})
	return e, e.metrics, store.BackupDir(cfg.DataDir)
}

// fileSum is the SHA-256 of a file.
func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha(b)
}

// TestBackupsPage shows the schedule, no backup yet, then two scheduled
// backups with their size and SHA-256, and the result of a download.
func TestBackupsPage(t *testing.T) {
	e, m, dir := backupsEnv(t)
	b := loggedIn(t, e, "ada", store.RoleAdmin, "")

	p := b.get("/backups")
	if p.code != http.StatusOK {
		t.Fatalf("GET /backups: %d %s", p.code, p.body)
	}
	for _, want := range []string{
		`href="/backups/download"`, "Download a backup now", "30 2 * * *", "the newest 3", dir,
		"No scheduled backup yet", "No backup was taken since the server started",
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("GET /backups lacks %q", want)
		}
	}

	if strings.Contains(p.body, `id="backup-database"`) || !strings.Contains(p.body, `id="restore"`) {
		t.Error("GET /backups of a bbolt file speaks of a PostgreSQL database, or has no restore")
	}

	t1 := time.Date(2026, 3, 1, 2, 30, 0, 0, time.UTC)
	var files []store.BackupFile
	for i := range 2 {
		sendLead(t, e, "demo", fmt.Sprintf("p-%d", i), fmt.Sprintf("p%d@example.com", i))
		f, _, err := e.st.BackupToDir(dir, t1.Add(time.Duration(i)*24*time.Hour), store.BackupOptions{Keep: 3})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	m.Backup(time.Now().Add(-2*time.Hour), nil, nil)
	p = b.get("/backups")
	if p.code != http.StatusOK {
		t.Fatalf("GET /backups: %d", p.code)
	}
	for _, f := range files {
		for _, want := range []string{f.Name, fileSum(t, f.Path), `href="/backups/file/` + f.Name + `"`, fmt.Sprintf("%d bytes", f.Size)} {
			if !strings.Contains(p.body, want) {
				t.Errorf("GET /backups lacks %q of %s", want, f.Name)
			}
		}
	}
	// Newest first.
	if strings.Index(p.body, files[1].Name) > strings.Index(p.body, files[0].Name) {
		t.Errorf("the newer backup %s is listed after the older one", files[1].Name)
	}
	if !strings.Contains(p.body, "The last backup succeeded 2h ago") {
		t.Errorf("GET /backups does not say the last backup succeeded 2h ago")
	}

	m.Backup(time.Now(), nil, errors.New("the disk is full"))
	p = b.get("/backups")
	if !strings.Contains(p.body, "The last backup failed") || !strings.Contains(p.body, "The last good one was 2h ago") {
		t.Errorf("after a failed backup the page does not say so:\n%s", p.body)
	}
}

// TestBackupsDownloadNow: the page's button streams the same snapshot as
// the API, and counts as a good backup.
func TestBackupsDownloadNow(t *testing.T) {
	e, m, _ := backupsEnv(t)
	sendLead(t, e, "demo", "dl-1", "dl1@example.com")
	b := loggedIn(t, e, "ada", store.RoleAdmin, "")

	resp, err := b.c.Get(e.url + "/backups/download")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, resp, body)
	restored := verifyAndRestore(t, body)
	if _, err := restored.EventByKey("demo:dl-1"); err != nil {
		t.Errorf("the downloaded backup lacks the event: %v", err)
	}
	if _, last := m.LastBackup(); last != -1 {
		t.Errorf("after a download the scheduled backups' last result is %v, want -1 (a download is not a scheduled backup)", last)
	}
	if p := b.getOK("/backups"); strings.Contains(p.body, "The last backup succeeded") {
		t.Errorf("the page counts a download as the last scheduled backup")
	}
}

// TestBackupsFileDownload serves a listed backup byte for byte, with its
// SHA-256, and refuses every name that is not in the list: other files of
// the folder, the live database by any path, and made-up names.
func TestBackupsFileDownload(t *testing.T) {
	e, _, dir := backupsEnv(t)
	sendLead(t, e, "demo", "f-1", "f1@example.com")
	f, sum, err := e.st.BackupToDir(dir, time.Date(2026, 3, 1, 2, 30, 0, 0, time.UTC), store.BackupOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Things in and near the folder that must never be served.
	if err := os.WriteFile(filepath.Join(dir, ".backup-123.tmp"), []byte("half a backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("private"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, store.BackupPrefix+"dir.db"), 0o700); err != nil {
		t.Fatal(err)
	}
	b := loggedIn(t, e, "ada", store.RoleAdmin, "")

	resp, err := b.c.Get(e.url + "/backups/file/" + f.Name)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("GET /backups/file/%s: %d, %d bytes; want 200 and the file's %d bytes", f.Name, resp.StatusCode, len(body), len(want))
	}
	if got := resp.Header.Get("X-Backup-SHA256"); got != sum {
		t.Errorf("X-Backup-SHA256 %q, want %s", got, sum)
	}
	if got := resp.Header.Get("Content-Disposition"); got != `attachment; filename="`+f.Name+`"` {
		t.Errorf("Content-Disposition %q", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/octet-stream" {
		t.Errorf("Content-Type %q", got)
	}

	live, err := os.ReadFile(e.st.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/backups/file/" + store.BackupPrefix + "20990101T000000Z.db",
		"/backups/file/.backup-123.tmp",
		"/backups/file/notes.txt",
		"/backups/file/" + store.BackupPrefix + "dir.db",
		"/backups/file/..%2Fhandoff.db",
		"/backups/file/..%2F..%2F" + filepath.Base(filepath.Dir(e.st.Path())) + "%2Fhandoff.db",
		"/backups/file/%2E%2E%2Fhandoff.db",
		"/backups/file/..%5Chandoff.db",
		"/backups/file/" + strings.ReplaceAll(e.st.Path(), "/", "%2F"),
		"/backups/file/" + f.Name + "%2F..%2F..%2Fhandoff.db",
		"/backups/file/" + f.Name + "%00",
		"/backups/file/..",
		"/backups/file/../../handoff.db",
		"/backups/file/",
	} {
		resp, err := b.c.Get(e.url + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || bytes.Equal(body, live) || bytes.Contains(body, []byte("private")) || bytes.Contains(body, []byte("half a backup")) {
			t.Errorf("GET %s: %d with %d bytes; want 404 and nothing of the file", path, resp.StatusCode, len(body))
		}
	}
}

// TestBackupAPIFailureIsNoSnapshot: the snapshot is copied to the data
// folder before the first byte goes out, so a snapshot that fails is
// answered 503 with a sentence, never a 200 with a short body a client
// could take for a whole backup; no copy is left behind and the failure
// is counted.
func TestBackupAPIFailureIsNoSnapshot(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	st, err := store.Open(cfg.DataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(st, cfg, time.Now)
	srv, err := New(Deps{Config: cfg, Store: st, Jobs: noWaker{}, Logger: discardLogger(), APIToken: testToken, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	if err := st.Close(); err != nil { // every read transaction now fails
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/backup", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "nothing was sent") {
		t.Fatalf("a failed snapshot answered %d %s; want 503 saying nothing was sent", resp.StatusCode, body)
	}
	if left, _ := filepath.Glob(filepath.Join(cfg.DataDir, ".handoff-snapshot-*")); len(left) != 0 {
		t.Errorf("the failed snapshot left %v behind", left)
	}
	if _, last := m.LastBackup(); last != -1 {
		t.Errorf("last backup result %v after a broken download, want -1: a download does not speak for the schedule", last)
	}
	if failed, ok := counterValue(t, m.downloads.WithLabelValues("failed")), counterValue(t, m.downloads.WithLabelValues("ok")); failed != 1 || ok != 0 {
		t.Errorf("downloads counted: failed %v, ok %v; want failed 1, ok 0", failed, ok)
	}
}

// noWaker is a Waker for a server without workers.
type noWaker struct{}

func (noWaker) Wake() {}

// TestBackupsPageOnPostgres: on PostgreSQL the page says the backups are
// the database's own (pg_dump, point-in-time recovery), that what it
// writes is a logical export and how to use one, and offers no restore.
func TestBackupsPageOnPostgres(t *testing.T) {
	cfg := config.Default()
	schema := pgtest.Schema(t)
	cfg.DatabaseURL = pgtest.URL(t) + " search_path=" + schema
	e, _ := newEnv(t, cfg, envOptions{})
	b := loggedIn(t, e, "ada", store.RoleAdmin, "")
	p := b.get("/backups")
	if p.code != http.StatusOK {
		t.Fatalf("GET /backups: %d %s", p.code, p.body)
	}
	for _, want := range []string{`id="backup-database"`, "PostgreSQL schema " + schema, "pg_dump", "point-in-time recovery",
		"logical export", "handoff migrate --to postgres://", `href="/backups/download"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("GET /backups on PostgreSQL lacks %q", want)
		}
	}
	if strings.Contains(p.body, `id="restore"`) {
		t.Error("GET /backups on PostgreSQL offers a restore")
	}
	// The logical export downloads and verifies as a bbolt file.
	d := b.get("/backups/download")
	if d.code != http.StatusOK {
		t.Fatalf("GET /backups/download: %d", d.code)
	}
	path := filepath.Join(t.TempDir(), "export.db")
	if err := os.WriteFile(path, []byte(d.body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.VerifyFile(path); err != nil {
		t.Errorf("the logical export does not verify: %v", err)
	}
	// A restore asked all the same (the route is there) changes nothing and
	// says where restores of this database are done.
	f, _, err := e.st.BackupToDir(store.BackupDir(e.cfg.DataDir), time.Now(), store.BackupOptions{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := b.post("/backups/restore", url.Values{"source": {"local:" + f.Name}, "current": {"ada-password"}, "confirm": {"restore"}})
	if r.code == http.StatusOK || !strings.Contains(r.body, "Nothing was restored") || !strings.Contains(r.body, "point-in-time recovery") {
		t.Errorf("POST /backups/restore on PostgreSQL: %d %.600s; want it refused, saying the database restores itself", r.code, r.body)
	}
}
