package testkit

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// VersityGWModule is the S3-compatible server the offsite tests run:
// versitygw, a real S3 gateway (Apache-2.0) over a plain folder. The test
// command installs this exact version when it is missing.
const VersityGWModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// S3 is a running S3-compatible server with one empty bucket.
type S3 struct {
	Endpoint  string // http://127.0.0.1:port
	Bucket    string
	AccessKey string
	SecretKey string
	Root      string // the folder that holds the buckets: Root/Bucket/key is an object's bytes

	kill func() // kills this server's process and waits for it
}

// Kill kills the server at once (SIGKILL), as a store that dies mid-call
// does; the objects it wrote stay in Root. RestartS3 brings it back.
func (s S3) Kill() { s.kill() }

// RestartS3 starts a new server over the folder of s (killed or not), on
// a new port, with the same bucket and keys: the store back after an
// outage, holding what it held.
func RestartS3(t testing.TB, s S3) S3 {
	t.Helper()
	return startS3(t, s.Root)
}

// StartS3 starts versitygw on a free loopback port over a new folder with
// the bucket "handoff-test", and stops it when the test ends. Without the
// binary the test fails under CI (whose test command installs it) and is
// skipped elsewhere, saying how to install it.
func StartS3(t testing.TB) S3 {
	t.Helper()
	root := t.TempDir()
	// The posix backend treats every folder under its root as a bucket.
	if err := os.Mkdir(filepath.Join(root, "handoff-test"), 0o755); err != nil {
		t.Fatal(err)
	}
	return startS3(t, root)
}

// startS3 starts versitygw over root, whose folder handoff-test is the bucket.
func startS3(t testing.TB, root string) S3 {
	t.Helper()
	bin := toolBinary("HANDOFF_VERSITYGW", "versitygw")
	if bin == "" {
		msg := "versitygw is not installed; .ci/test.sh installs it, or run: go install " + VersityGWModule
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	addr := freeAddr(t)
	s := S3{Endpoint: "http://" + addr, Bucket: "handoff-test", AccessKey: "handoff-test-access", SecretKey: "handoff-test-secret-key", Root: root}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "--quiet", "posix", s.Root)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.kill = func() {
		cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(func() {
		s.kill()
		logFile.Close()
	})
	// Any HTTP answer (403 to an unsigned request) means it is serving.
	Eventually(t, 10*time.Second, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("versitygw exited at start: %s", log)
		default:
		}
		resp, err := http.Get(s.Endpoint + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}, "versitygw to serve on "+addr)
	return s
}
