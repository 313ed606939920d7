package testkit

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
}

// s3Binary finds versitygw: $HANDOFF_VERSITYGW, the PATH, or GOPATH/bin.
func s3Binary() string {
	if p := os.Getenv("HANDOFF_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "versitygw")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return ""
}

// StartS3 starts versitygw on a free loopback port over a new folder with
// the bucket "handoff-test", and stops it when the test ends. Without the
// binary the test fails under CI (whose test command installs it) and is
// skipped elsewhere, saying how to install it.
func StartS3(t testing.TB) S3 {
	t.Helper()
	bin := s3Binary()
	if bin == "" {
		msg := "versitygw is not installed; .ci/test.sh installs it, or run: go install " + VersityGWModule
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := S3{Endpoint: "http://" + addr, Bucket: "handoff-test", AccessKey: "handoff-test-access", SecretKey: "handoff-test-secret-key", Root: t.TempDir()}
	// The posix backend treats every folder under its root as a bucket.
	if err := os.Mkdir(filepath.Join(s.Root, s.Bucket), 0o755); err != nil {
		t.Fatal(err)
	}
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
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		logFile.Close()
	})
	// Any HTTP answer (403 to an unsigned request) means it is serving.
	WaitFor(t, "versitygw to serve on "+addr, func() bool {
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
	})
	return s
}
