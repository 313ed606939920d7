package offsite_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/offsite"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

func target(t *testing.T, s testkit.S3, prefix string, keep int) *offsite.Target {
	t.Helper()
	tg, err := offsite.New(config.Target{
		Bucket: s.Bucket, Prefix: prefix, Endpoint: s.Endpoint, Region: "us-east-1", Keep: keep,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, Timeout: time.Minute,
	}, store.IsBackupName)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// sumOf is data's SHA-256 in hex, as the store hands it to Upload.
func sumOf(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// upload uploads the backup file at path, then prunes, as app does.
func upload(t *testing.T, tg *offsite.Target, path, name string) offsite.Copy {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tg.Upload(context.Background(), path, name, sumOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// backupFile writes n random bytes as a backup named for minute m.
func backupFile(t *testing.T, dir string, m int, n int) (string, string, []byte) {
	t.Helper()
	name := store.BackupPrefix + time.Date(2026, 12, 1, 10, m, 0, 0, time.UTC).Format("20060102T150405Z") + ".db"
	data := make([]byte, n)
	rand.Read(data)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, name, data
}

func TestUploadListDownload(t *testing.T) {
	s := testkit.StartS3(t)
	tg := target(t, s, "agency-a/", 30)
	ctx := context.Background()
	dir := t.TempDir()
	// Larger than one part of a multipart upload (16 MiB), so the
	// multipart path is what is verified.
	path, name, data := backupFile(t, dir, 1, 17<<20+123)
	c, err := tg.Upload(ctx, path, name, sumOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if c.SHA256 != sumOf(data) {
		t.Errorf("copy sha256 = %s, want %s", c.SHA256, sumOf(data))
	}
	if c.Size != int64(len(data)) || c.Key != "agency-a/"+name || len(c.SHA256) != 64 {
		t.Errorf("copy = %+v", c)
	}
	// The bytes are in the server's own folder, whole.
	onServer, err := os.ReadFile(filepath.Join(s.Root, s.Bucket, "agency-a", name))
	if err != nil {
		t.Fatalf("the server holds no object: %v", err)
	}
	if !bytes.Equal(onServer, data) {
		t.Fatalf("the server holds %d bytes that differ from the %d uploaded", len(onServer), len(data))
	}
	list, err := tg.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != name || list[0].Size != int64(len(data)) {
		t.Fatalf("list = %+v", list)
	}
	var buf bytes.Buffer
	got, err := tg.Download(ctx, name, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) || got.SHA256 != c.SHA256 {
		t.Errorf("download: %d bytes, sha %s; want %d bytes, sha %s", buf.Len(), got.SHA256, len(data), c.SHA256)
	}
}

func TestKeepPrunesOnlyOwnBackups(t *testing.T) {
	s := testkit.StartS3(t)
	tg := target(t, s, "p/", 2)
	ctx := context.Background()
	dir := t.TempDir()
	// Objects that are not backups under the prefix, and a backup under
	// another prefix, must survive every prune.
	for _, p := range []string{"p/notes.txt", "p/sub/" + store.BackupPrefix + "20200101T000000Z.db", "other/" + store.BackupPrefix + "20200101T000000Z.db"} {
		full := filepath.Join(s.Root, s.Bucket, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("keep me"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for m := range 4 {
		path, name, _ := backupFile(t, dir, m, 1000+m)
		upload(t, tg, path, name)
		names = append(names, name)
	}
	list, err := tg.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list {
		got = append(got, c.Name)
	}
	if want := []string{names[3], names[2]}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("kept %v, want %v", got, want)
	}
	for _, p := range []string{"p/notes.txt", "p/sub/" + store.BackupPrefix + "20200101T000000Z.db", "other/" + store.BackupPrefix + "20200101T000000Z.db"} {
		if _, err := os.Stat(filepath.Join(s.Root, s.Bucket, filepath.FromSlash(p))); err != nil {
			t.Errorf("%s was deleted by the prune: %v", p, err)
		}
	}
	for _, n := range names[:2] {
		if _, err := os.Stat(filepath.Join(s.Root, s.Bucket, "p", n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the old copy %s is still there (%v)", n, err)
		}
	}
}

func TestDownloadRefusesDamagedCopy(t *testing.T) {
	s := testkit.StartS3(t)
	tg := target(t, s, "", 5)
	ctx := context.Background()
	path, name, data := backupFile(t, t.TempDir(), 7, 4096)
	upload(t, tg, path, name)
	// Bit rot in the bucket: same size, one byte changed.
	data[100] ^= 0xff
	if err := os.WriteFile(filepath.Join(s.Root, s.Bucket, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := tg.Download(ctx, name, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("download of a damaged copy: err = %v, want a SHA-256 mismatch", err)
	}
	if _, err := tg.Download(ctx, "../etc/passwd", &bytes.Buffer{}); !errors.Is(err, offsite.ErrNotFound) {
		t.Errorf("download of a foreign name: err = %v, want ErrNotFound", err)
	}
	if _, err := tg.Download(ctx, store.BackupPrefix+"20000101T000000Z.db", &bytes.Buffer{}); !errors.Is(err, offsite.ErrNotFound) {
		t.Errorf("download of a missing copy: err = %v, want ErrNotFound", err)
	}
}

func TestWrongCredentialsFail(t *testing.T) {
	s := testkit.StartS3(t)
	s.SecretKey = "not-the-secret"
	tg := target(t, s, "", 5)
	path, name, data := backupFile(t, t.TempDir(), 8, 100)
	_, err := tg.Upload(context.Background(), path, name, sumOf(data))
	if err == nil {
		t.Fatal("an upload with a wrong secret succeeded")
	}
	if strings.Contains(err.Error(), s.SecretKey) {
		t.Errorf("the error shows the secret: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Root, s.Bucket))
	if len(entries) != 0 {
		t.Errorf("the bucket holds %d objects after a refused upload", len(entries))
	}
}

// TestUploadChecksTheGivenSum: the SHA-256 passed in is what the copy is
// checked against; a sum that is not the file's fails the upload and
// leaves no copy in the bucket.
func TestUploadChecksTheGivenSum(t *testing.T) {
	s := testkit.StartS3(t)
	tg := target(t, s, "", 5)
	path, name, data := backupFile(t, t.TempDir(), 9, 2048)
	other := append([]byte{1}, data...)
	_, err := tg.Upload(context.Background(), path, name, sumOf(other))
	if err == nil || !strings.Contains(err.Error(), "verify the copy") {
		t.Fatalf("upload with another file's sum: err = %v, want a failed verification", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root, s.Bucket, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unverified copy is still in the bucket (%v)", err)
	}
	if _, err := tg.Upload(context.Background(), path, name, "not-a-sum"); err == nil {
		t.Error("an upload without a SHA-256 succeeded")
	}
}

// TestPruneFailureLeavesTheCopy: a bucket that refuses deletes takes and
// verifies the upload; only Prune fails, and the copies stay.
func TestPruneFailureLeavesTheCopy(t *testing.T) {
	s := testkit.StartS3(t)
	up, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(up)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete || r.URL.Query().Has("delete") {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>deletes are not allowed</Message></Error>`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	s.Endpoint = proxy.URL
	tg := target(t, s, "", 1)
	dir := t.TempDir()
	var names []string
	for m := range 2 {
		path, name, data := backupFile(t, dir, m, 500+m)
		c, err := tg.Upload(context.Background(), path, name, sumOf(data))
		if err != nil {
			t.Fatalf("upload %d through a bucket that refuses deletes: %v", m, err)
		}
		if c.Name != name {
			t.Errorf("copy = %+v, want %s", c, name)
		}
		names = append(names, name)
	}
	err = tg.Prune(context.Background())
	if err == nil || !strings.Contains(err.Error(), names[0]) {
		t.Fatalf("prune where deletes are refused: err = %v, want one naming %s", err, names[0])
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(s.Root, s.Bucket, n)); err != nil {
			t.Errorf("%s is gone after a failed prune: %v", n, err)
		}
	}
}

// dyingProxy forwards to the S3 server s and kills it right after it
// answered the first PUT of a backup (not of a verification record), so
// the read-back and the delete that follow meet a dead store: each
// connection is cut, as a dead peer's would be.
func dyingProxy(t *testing.T, s testkit.S3) string {
	t.Helper()
	up, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}
	var killed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(w, r)
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, ".db") && killed.CompareAndSwap(false, true) {
			s.Kill()
		}
	}))
	t.Cleanup(proxy.Close)
	return proxy.URL
}

// TestUnverifiedCopyNeverCounts: the store dies between the upload and
// its read-back, so the delete of the unchecked copy fails too and it
// stays in the bucket. Once the store is back, the listing marks it
// unverified and the newest verified copy is the one before; with keep 2
// it is never counted (the older verified copy stays after the next good
// upload) and it goes once two verified copies newer than it are kept.
func TestUnverifiedCopyNeverCounts(t *testing.T) {
	s := testkit.StartS3(t)
	ctx := context.Background()
	dir := t.TempDir()
	pathA, nameA, _ := backupFile(t, dir, 1, 3000)
	upload(t, target(t, s, "", 2), pathA, nameA)

	dying := s
	dying.Endpoint = dyingProxy(t, s)
	pathB, nameB, dataB := backupFile(t, dir, 2, 3001)
	fast, err := offsite.New(config.Target{
		Bucket: s.Bucket, Endpoint: dying.Endpoint, Region: "us-east-1", Keep: 2,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, Timeout: 20 * time.Second,
	}, store.IsBackupName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fast.Upload(ctx, pathB, nameB, sumOf(dataB)); err == nil || !strings.Contains(err.Error(), "verify the copy") {
		t.Fatalf("upload to a store that died after the PUT: err = %v, want a failed verification", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root, s.Bucket, nameB)); err != nil {
		t.Fatalf("the test's fault did not happen: the unchecked copy is not in the bucket (%v)", err)
	}

	s = testkit.RestartS3(t, s)
	tg := target(t, s, "", 2)
	list, err := tg.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != nameB || list[0].Verified || list[1].Name != nameA || !list[1].Verified {
		t.Fatalf("list after the restart = %+v, want %s unverified then %s verified", list, nameB, nameA)
	}
	if c, ok := offsite.NewestVerified(list); !ok || c.Name != nameA {
		t.Errorf("newest verified = %+v, want %s", c, nameA)
	}

	pathC, nameC, _ := backupFile(t, dir, 3, 3002)
	upload(t, tg, pathC, nameC)
	if got := names(t, tg); got != strings.Join([]string{nameC + "+", nameB + "-", nameA + "+"}, ",") {
		t.Errorf("after the next verified copy: %s; want the unverified one kept apart and both verified ones", got)
	}
	pathD, nameD, _ := backupFile(t, dir, 4, 3003)
	upload(t, tg, pathD, nameD)
	if got := names(t, tg); got != strings.Join([]string{nameD + "+", nameC + "+"}, ",") {
		t.Errorf("after two verified copies newer than the unverified one: %s; want the newest two verified", got)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Root, s.Bucket))
	var got []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") { // versitygw's own temporary folder
			got = append(got, e.Name())
		}
	}
	if want := []string{nameC, nameC + ".verified", nameD, nameD + ".verified"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the bucket holds %v, want %v: two copies and their two records", got, want)
	}
}

// names lists the bucket's copies as name+ (verified) or name- (not).
func names(t *testing.T, tg *offsite.Target) string {
	t.Helper()
	list, err := tg.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list {
		mark := "-"
		if c.Verified {
			mark = "+"
		}
		out = append(out, c.Name+mark)
	}
	return strings.Join(out, ",")
}
