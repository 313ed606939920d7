package testkit

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MailpitModule is what .ci/test.sh installs for the SMTP tests.
const MailpitModule = "github.com/axllent/mailpit@v1.33.1"

// Mailpit is a running Mailpit: a real SMTP server with an HTTP API.
type Mailpit struct {
	SMTP string // host:port
	API  string // http://host:port
}

// toolBinary finds a test tool: $env, the PATH, or GOPATH/bin.
func toolBinary(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", name)
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return ""
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// StartMailpit starts Mailpit on free loopback ports with its own
// database and stops it when the test ends. Extra flags go to it as they
// are (e.g. --smtp-allowed-recipients). Without the binary the test fails
// under CI (whose test command installs it) and is skipped elsewhere.
func StartMailpit(t testing.TB, flags ...string) Mailpit {
	t.Helper()
	bin := toolBinary("HANDOFF_MAILPIT", "mailpit")
	if bin == "" {
		msg := "mailpit is not installed; .ci/test.sh installs it, or run: go install " + MailpitModule
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	m := Mailpit{SMTP: freeAddr(t), API: "http://" + freeAddr(t)}
	logFile, err := os.Create(filepath.Join(dir, "mailpit.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--smtp", m.SMTP, "--listen", strings.TrimPrefix(m.API, "http://"),
		"--database", filepath.Join(dir, "mailpit.db"), "--smtp-auth-accept-any", "--smtp-auth-allow-insecure",
		"--disable-version-check", "--quiet"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mailpit: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
	})
	Eventually(t, 10*time.Second, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("mailpit exited at start: %s", log)
		default:
		}
		resp, err := http.Get(m.API + "/api/v1/info")
		if err != nil {
			return false
		}
		resp.Body.Close()
		c, err := net.Dial("tcp", m.SMTP)
		if err != nil {
			return false
		}
		c.Close()
		return resp.StatusCode == http.StatusOK
	}, "mailpit to serve on "+m.API)
	return m
}

// MailpitMessage is one message as Mailpit's search lists it.
type MailpitMessage struct {
	ID        string `json:"ID"`
	MessageID string `json:"MessageID"`
	Subject   string `json:"Subject"`
	From      struct {
		Address string `json:"Address"`
	} `json:"From"`
	To []struct {
		Address string `json:"Address"`
	} `json:"To"`
}

// Messages lists every message Mailpit holds.
func (m Mailpit) Messages(t testing.TB) []MailpitMessage {
	t.Helper()
	resp, err := http.Get(m.API + "/api/v1/messages?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Messages []MailpitMessage `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Messages
}

// LookupURL is the lookup_url of an smtp provider that searches this
// Mailpit by Message-ID.
func (m Mailpit) LookupURL() string {
	return m.API + "/api/v1/search?query=message-id:{ref}"
}

// Search runs a Mailpit search query.
func (m Mailpit) Search(t testing.TB, query string) []MailpitMessage {
	t.Helper()
	resp, err := http.Get(m.API + "/api/v1/search?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Messages []MailpitMessage `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(fmt.Errorf("mailpit search %q: %w", query, err))
	}
	return v.Messages
}

// Headers reads the headers of the message Mailpit lists as id.
func (m Mailpit) Headers(t testing.TB, id string) map[string][]string {
	t.Helper()
	resp, err := http.Get(m.API + "/api/v1/message/" + url.PathEscape(id) + "/headers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mailpit headers of %s: %s", id, resp.Status)
	}
	var h map[string][]string
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("mailpit headers of %s: %v", id, err)
	}
	return h
}
