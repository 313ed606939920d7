package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
)

// TestBackupToS3: `handoff backup --to s3` has the running server write a
// backup and copy it to a real S3-compatible server, where the bytes are
// the backup's own.
func TestBackupToS3(t *testing.T) {
	const token = "T-offsite-token-456"
	s3 := testkit.StartS3(t)
	cfg := config.Default()
	cfg.Backups.Target = &config.Target{
		Bucket: s3.Bucket, Prefix: "cli/", Endpoint: s3.Endpoint, Region: "us-east-1", Keep: 5,
		AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Timeout: time.Minute,
	}
	a := apptest.Start(t, cfg, app.Deps{APIToken: token})
	url := apptest.URL(a)

	c := runCLI(t, "", map[string]string{"HANDOFF_API_TOKEN": token}, "backup", "--to", "s3", "--url", url)
	c.wantOK(t)
	m := regexp.MustCompile(`^(handoff-backup-\d{8}T\d{6}Z\.db): \d+ bytes \(sha256 [0-9a-f]{64}\), copied to cli/handoff-backup-\d{8}T\d{6}Z\.db and verified there\n$`).FindStringSubmatch(c.stdout.String())
	if m == nil {
		t.Fatalf("stdout %q", c.stdout.String())
	}
	local, err := os.ReadFile(filepath.Join(store.BackupDir(cfg.DataDir), m[1]))
	if err != nil {
		t.Fatal(err)
	}
	remote, err := os.ReadFile(filepath.Join(s3.Root, s3.Bucket, "cli", m[1]))
	if err != nil || !bytes.Equal(local, remote) {
		t.Fatalf("the copy in the bucket is not the backup (%d vs %d bytes, %v)", len(remote), len(local), err)
	}

	runCLI(t, "", nil, "backup", "--to", "s3", "-o", "x.db", "--url", url, "--token", token).wantErr(t, "not both")
	runCLI(t, "", nil, "backup", "--to", "gcs", "--url", url, "--token", token).wantErr(t, "the only target is s3")
}

// TestBackupToS3WithoutTarget: a server with no backups.target says so.
func TestBackupToS3WithoutTarget(t *testing.T) {
	const token = "T-offsite-token-789"
	url := apptest.URL(apptest.Start(t, nil, app.Deps{APIToken: token}))
	runCLI(t, "", map[string]string{"HANDOFF_API_TOKEN": token}, "backup", "--to", "s3", "--url", url).wantErr(t, "409", "no offsite target is configured")
}

// TestBackupOutNeverReplacesAGoodFile: `handoff backup -o FILE` writes a
// verified FILE from a running server; a later download that does not
// verify (here a server that sends a truncated snapshot, with its true
// SHA-256 as the trailer, so only the verification can catch it) fails,
// saying why, and leaves the good FILE byte for byte, with no temporary
// file beside it.
func TestBackupOutNeverReplacesAGoodFile(t *testing.T) {
	const token = "T-backup-out-123"
	a := apptest.Start(t, nil, app.Deps{APIToken: token})
	dir := t.TempDir()
	out := filepath.Join(dir, "handoff.db")
	vars := map[string]string{"HANDOFF_API_TOKEN": token}
	runCLI(t, "", vars, "backup", "-o", out, "--url", apptest.URL(a)).wantOK(t)
	good, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.VerifyFile(out); err != nil {
		t.Fatalf("the first backup does not verify: %v", err)
	}

	bad := good[:len(good)/2]
	sum := sha256.Sum256(bad)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Backup-SHA256")
		w.WriteHeader(http.StatusOK)
		w.Write(bad)
		w.Header().Set("X-Backup-SHA256", hex.EncodeToString(sum[:]))
	}))
	t.Cleanup(srv.Close)
	runCLI(t, "", vars, "backup", "-o", out, "--url", srv.URL).wantErr(t, "was not written", "left as it was", "truncated")
	after, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(after, good) {
		t.Fatalf("the good file changed after a download that did not verify (%d bytes, was %d; %v)", len(after), len(good), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the folder holds %v, want the good file alone", names)
	}
}
