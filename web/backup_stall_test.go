//go:build linux

package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// paddedMessage is the corpus's demo message n with an extra field of
// size bytes of the corpus's long text, which the demo channel stores
// with the raw body and otherwise ignores: a few webhooks fill megabytes.
func paddedMessage(n, size int) corpus.Body {
	b := corpus.Message(n, fmt.Sprintf("pad-%d", n), "", fmt.Sprintf("+1555%07d", n))
	var pad strings.Builder
	for pad.Len() < size {
		pad.WriteString(corpus.TextNamed("long").Body)
	}
	field, _ := json.Marshal(pad.String())
	i := bytes.IndexByte(b.Raw, '{') + 1
	b.Raw = slices.Concat(b.Raw[:i], []byte(`"attachment":`), field, []byte(","), b.Raw[i:])
	return b
}

// stalledDownload asks base for a backup on a connection with a 4 KiB
// receive buffer, reads the status line and stops reading.
func stalledDownload(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /api/v1/backup HTTP/1.1\r\nHost: handoff\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	status, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil || status != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("the backup download began with %q, %v; want a 200", status, err)
	}
	return conn
}

// TestStalledDownloadIsCutOff: two downloads run at once and a third is
// told to try again; a download whose client hangs up ends; a client that
// stops reading is cut off once the idle bound passes with nothing taken,
// the download's copy is removed from the data folder and the failure
// counted; a client that goes on reading gets the whole snapshot.
func TestStalledDownloadIsCutOff(t *testing.T) {
	e := newTestEnv(t, nil)
	// 3.5 MiB in use: more than the loopback socket's buffers take (2.7
	// MiB measured with the client's 4 KiB receive buffer).
	for n := 0; ; n += 16 {
		sz, err := e.st.Size()
		if err != nil {
			t.Fatal(err)
		}
		if sz.Bytes > 7<<19 {
			break
		}
		var wg sync.WaitGroup
		codes := make([]int, 16)
		for i := range codes {
			wg.Go(func() {
				b := paddedMessage(n+i, 48<<10)
				resp, err := http.Post(e.url+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					codes[i] = resp.StatusCode
				}
			})
		}
		wg.Wait()
		for i, code := range codes {
			if code != http.StatusAccepted {
				t.Fatalf("webhook %d: %d, want 202", n+i, code)
			}
		}
	}
	size, err := e.st.Size() // the snapshot's size: the pages in use
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(e.url, "http://")
	failed := func() float64 { return counterValue(t, e.metrics.downloads.WithLabelValues("failed")) }

	// Two downloads at once, each with its copy on disk; a third waits
	// for one of them to end.
	first, second := stalledDownload(t, addr), stalledDownload(t, addr)
	if code, body := e.do(t, http.MethodGet, "/api/v1/backup", "", nil, http.Header{"Authorization": {"Bearer " + testToken}}); code != http.StatusTooManyRequests || !strings.Contains(fmt.Sprint(body), "try again when one has finished") {
		t.Errorf("a third download at once: %d %v, want 429 saying to try again", code, body)
	}
	first.Close()
	second.Close()
	testkit.Eventually(t, 30*time.Second, func() bool { return failed() == 2 }, "the downloads whose clients hung up to end")

	e.srv.downloads.setIdle(300 * time.Millisecond)
	conn := stalledDownload(t, addr)
	testkit.Eventually(t, 30*time.Second, func() bool { return failed() == 3 }, "the stalled download to be cut off")
	testkit.Eventually(t, 10*time.Second, func() bool {
		left, err := filepath.Glob(filepath.Join(e.cfg.DataDir, ".handoff-snapshot-*"))
		if err != nil {
			t.Fatal(err)
		}
		return len(left) == 0
	}, "the cut-off download's copy to leave the data folder")
	// What the client can still read ends short of the snapshot, broken.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the stalled connection open after cutting the download off (%d bytes read)", n)
	}
	if n >= size.Bytes {
		t.Errorf("the stalled client still read %d bytes of a %d-byte snapshot; want it cut off short", n, size.Bytes)
	}

	// A reader that keeps reading is never cut off by the bound.
	resp, body := apiBackup(t, e)
	checkSnapshot(t, resp, body)
	if resp.Header.Get("X-Backup-SHA256") != sha(body) {
		t.Errorf("X-Backup-SHA256 header %q; the body hashes to %s", resp.Header.Get("X-Backup-SHA256"), sha(body))
	}
	if ok := counterValue(t, e.metrics.downloads.WithLabelValues("ok")); ok != 1 || failed() != 3 {
		t.Errorf("downloads counted: ok %v, failed %v; want 1 and 3", ok, failed())
	}
}
