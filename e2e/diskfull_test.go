package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/smalldisk"
)

// readyAnswer is GET /readyz: its status and its sentence.
func (i *instance) readyAnswer() (int, string, error) {
	resp, err := i.client.Get(i.cur().URL() + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &ans); err != nil {
		return resp.StatusCode, "", fmt.Errorf("GET /readyz: %d %q: %w", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, ans.Status + ans.Error, nil
}

// health runs `handoff health` against the current process.
func (i *instance) health() (string, error) {
	cmd := exec.Command(i.files.Binary, "health", "--addr", i.cur().Addr())
	cmd.Env = proc.Environ()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestDiskFull fills the real disk under a running handoff: webhooks get
// 503 and nothing they were told is lost; /readyz and `handoff health` say
// not ready, naming where to free space, although the old probe's few
// bytes would still fit; once space is freed the refused webhook is
// accepted and /readyz answers 200 again.
func TestDiskFull(t *testing.T) {
	requireBinary(t)
	disk := smalldisk.Mount(t, 24<<20)
	inst := startInstanceIn(t, disk.Dir, "")
	accepted := []string{inst.mustPostBody(demoBody("before-full")).reply.EventKey}
	if out, err := inst.health(); err != nil {
		t.Fatalf("handoff health before the disk is full: %v: %s", err, out)
	}
	disk.Fill()

	// Webhooks until one is refused: the file's free pages take a few.
	refused := ""
	for n := range 2000 {
		id := fmt.Sprintf("full-%d", n)
		res, err := inst.postHook(id)
		if err != nil {
			t.Fatalf("POST %s on a full disk: %v", id, err)
		}
		if res.code == http.StatusAccepted {
			accepted = append(accepted, res.reply.EventKey)
			continue
		}
		if res.code != http.StatusServiceUnavailable || !strings.Contains(res.reply.Error, "nothing was recorded, retry later") {
			t.Fatalf("POST %s on a full disk: %s; want 202 or 503 with a sentence", id, res)
		}
		refused = id
		break
	}
	if refused == "" {
		t.Fatal("2000 webhooks on a full disk were all accepted; the disk was never full")
	}
	code, sentence, err := inst.readyAnswer()
	if err != nil {
		t.Fatal(err)
	}
	data := inst.dataDir
	if code != http.StatusServiceUnavailable || !strings.Contains(sentence, "for lack of disk space") || !strings.Contains(sentence, "free space on the disk holding "+data) {
		t.Errorf("GET /readyz after a webhook failed for lack of space = %d %q; want 503 naming the disk of %s", code, sentence, data)
	}
	out, err := inst.health()
	if err == nil || !strings.Contains(out, "not ready") || !strings.Contains(out, "free space on the disk holding "+data) {
		t.Errorf("handoff health on a full disk = %v, %q; want a failure that says where to free space", err, out)
	}

	disk.Free()
	res, err := inst.postHook(refused)
	if err != nil || res.code != http.StatusAccepted {
		t.Fatalf("the refused webhook %s sent again once space is freed: %s, %v; want 202 (nothing of it was recorded)", refused, res, err)
	}
	accepted = append(accepted, res.reply.EventKey)
	testkit.Eventually(t, 30*time.Second, func() bool {
		code, _, err := inst.readyAnswer()
		return err == nil && code == http.StatusOK
	}, "/readyz 200 once space is freed")
	if out, err := inst.health(); err != nil || out != "ready" {
		t.Errorf("handoff health once space is freed = %v, %q; want ready", err, out)
	}
	// Nothing acknowledged was lost.
	if _, err := inst.events(accepted); err != nil {
		t.Errorf("the %d webhooks answered 202: %v", len(accepted), err)
	}
	inst.stopCleanly()
}

// TestFirstStartOnFullDisk: the first start on a full disk fails with a
// sentence saying to free space and leaves no handoff.db (a 0-byte one
// refused every later start as empty); once there is space it starts.
func TestFirstStartOnFullDisk(t *testing.T) {
	bin := requireBinary(t)
	disk := smalldisk.Mount(t, 1<<20)
	data := filepath.Join(disk.Dir, "data")
	disk.Fill()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--data", data, "--addr", "127.0.0.1:0")
	cmd.Env = proc.Environ()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("handoff serve on a full disk: %v, want it to exit with an error; output:\n%s", err, out)
	}
	db := filepath.Join(data, "handoff.db")
	want := "handoff: store: cannot create " + db + ": no space left on device, and nothing was left behind: free space on the disk holding " + data + ", then start again"
	if !strings.Contains(string(out), want) {
		t.Errorf("handoff serve on a full disk said:\n%s\nwant the line %q", out, want)
	}
	if _, err := os.Lstat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after the failed first start, %s: %v; want no file", db, err)
	}

	disk.Free()
	inst := startInstanceIn(t, disk.Dir, "")
	inst.mustPostBody(demoBody("after-space"))
	inst.stopCleanly()
}
