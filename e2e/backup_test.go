package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/testkit"
)

// backupConfig writes a scheduled backup every second and keeps two.
const backupConfig = `workers: 2
backups: {schedule: "@every 1s", keep: 2}
`

// runOnce runs a one-shot command of the binary (backup, verify, restore)
// with no HANDOFF_* variable set, and returns its exit code and output.
func runOnce(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, requireBinary(t), args...)
	cmd.Env = proc.Environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("handoff %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// scheduledBackups lists the scheduled backups of a data folder, oldest first.
func scheduledBackups(t *testing.T, dataDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, "backups"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "handoff-backup-") && strings.HasSuffix(e.Name(), ".db") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// TestBackupUnderLoadAndRestore takes a backup with `handoff backup` from
// the real binary while webhooks pour in, checks the scheduled backups
// rotate and verify, then restores the backup into a second installation
// (refused while it runs) and finds there every event acknowledged before
// the backup began.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	inst := startInstance(t, backupConfig)

	var (
		mu       sync.Mutex
		accepted []string
		failures []string
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("bk-%d-%05d", g, n)
				res, err := inst.postHook(id)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: %v", id, err))
				case res.code != http.StatusAccepted:
					failures = append(failures, fmt.Sprintf("%s: %s", id, res))
				default:
					accepted = append(accepted, id)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	acceptedNow := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(accepted)
	}
	close(start)
	testkit.Eventually(t, 30*time.Second, func() bool { return len(acceptedNow()) >= 100 }, "100 accepted webhooks")

	before := acceptedNow()
	file := filepath.Join(t.TempDir(), "snapshot.db")
	code, out, errOut := runOnce(t, "backup", "--url", inst.cur().URL(), "--token", inst.token, "-o", file)
	if code != 0 {
		t.Fatalf("handoff backup under load: exit %d\n%s%s", code, out, errOut)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return len(acceptedNow()) >= len(before)+50 }, "more webhooks after the backup")
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d webhooks failed while the backup ran; first: %s", len(failures), failures[0])
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if !strings.Contains(out, "verified (sha256 "+hex.EncodeToString(sum[:])+")") {
		t.Errorf("handoff backup said %q; want it verified with the file's sha256", out)
	}
	if code, out, errOut := runOnce(t, "verify", file); code != 0 || !strings.Contains(out, ": ok (schema ") {
		t.Errorf("handoff verify of the backup: exit %d\n%s%s", code, out, errOut)
	}

	// The schedule runs every second: wait until both backups kept are
	// newer than every one seen first, so keep has deleted some.
	var first []string
	testkit.Eventually(t, 20*time.Second, func() bool { first = scheduledBackups(t, inst.dataDir); return len(first) > 0 }, "a scheduled backup")
	testkit.Eventually(t, 20*time.Second, func() bool {
		now := scheduledBackups(t, inst.dataDir)
		return len(now) == 2 && now[0] > first[len(first)-1]
	}, "two scheduled backups newer than the first seen")
	inst.stopCleanly()
	kept := scheduledBackups(t, inst.dataDir)
	if len(kept) != 2 {
		t.Errorf("after the server stopped the backups folder holds %v; want keep: 2", kept)
	}
	if tmp, _ := filepath.Glob(filepath.Join(inst.dataDir, "backups", ".*")); len(tmp) != 0 {
		t.Errorf("temporary files left in the backups folder: %v", tmp)
	}
	for _, name := range kept {
		if code, out, errOut := runOnce(t, "verify", filepath.Join(inst.dataDir, "backups", name)); code != 0 {
			t.Errorf("handoff verify %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}

	// Restore into a second installation: refused while it runs.
	inst2 := startInstance(t, "")
	code, out, errOut = runOnce(t, "restore", "--data", inst2.dataDir, file)
	if code != 1 || !strings.Contains(errOut, "stop the server") {
		t.Errorf("handoff restore into a running server's folder: exit %d, %q%q; want exit 1 saying to stop the server", code, out, errOut)
	}
	inst2.stopCleanly()
	code, out, errOut = runOnce(t, "restore", "--data", inst2.dataDir, file)
	if code != 0 || !strings.Contains(out, "the previous database is kept as") {
		t.Fatalf("handoff restore with the server stopped: exit %d\n%s%s", code, out, errOut)
	}
	inst2.restart()
	views, err := inst2.events(keysOf(before))
	if err != nil {
		t.Fatalf("events acknowledged before the backup, after restoring it: %v", err)
	}
	if len(views) != len(before) {
		t.Errorf("%d of %d events acknowledged before the backup came back", len(views), len(before))
	}
	inst2.stopCleanly()
}
