package offsite_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	c, err := tg.Upload(ctx, path, name)
	if err != nil {
		t.Fatal(err)
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
		if _, err := tg.Upload(ctx, path, name); err != nil {
			t.Fatal(err)
		}
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
	if _, err := tg.Upload(ctx, path, name); err != nil {
		t.Fatal(err)
	}
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
	path, name, _ := backupFile(t, t.TempDir(), 8, 100)
	_, err := tg.Upload(context.Background(), path, name)
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
