//go:build linux

package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// stallFill is how large the file is made before the stalled download
// starts: under bbolt's 16 MiB allocation step the file is as large as
// the map, a power of two, so 8 MiB means more than 4 MiB of pages in
// use, past what the loopback socket's buffers take (2.7 MiB measured
// with the client's 4 KiB receive buffer): the download's handler is
// still writing when the client stops reading.
const stallFill = 8 << 20

// padding is what each webhook carries besides the corpus message, in an
// extra field the demo channel stores with the raw body and otherwise
// ignores: 48 KiB of the corpus's long text, so a few hundred webhooks
// fill megabytes.
var padding = func() string {
	long := corpus.TextNamed("long").Body
	var b strings.Builder
	for b.Len() < 48<<10 {
		b.WriteString(long)
	}
	return b.String()
}()

// padded is the corpus's demo message n with the padding field first.
func padded(n int) corpus.Body {
	b := corpus.Message(n, fmt.Sprintf("stall-%d", n), "", fmt.Sprintf("+1555%07d", n))
	field, _ := json.Marshal(padding)
	i := bytes.IndexByte(b.Raw, '{') + 1
	b.Raw = slices.Concat(b.Raw[:i], []byte(`"attachment":`), field, []byte(","), b.Raw[i:])
	return b
}

// webhooks posts the corpus's demo messages from to to-1 from 32
// senders at once and returns the first answer that was not a 202 (each
// request has a deadline: a webhook held behind the writer fails it).
func webhooks(t *testing.T, base string, from, to int) error {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = from
	)
	for range 32 {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= to || first != nil
				mu.Unlock()
				if stop {
					return
				}
				b := padded(i)
				err := func() error {
					resp, err := client.Post(base+"/hooks/demo", b.ContentType, bytes.NewReader(b.Raw))
					if err != nil {
						return fmt.Errorf("webhook %d: %w", i, err)
					}
					defer resp.Body.Close()
					io.Copy(io.Discard, resp.Body)
					if resp.StatusCode != http.StatusAccepted {
						return fmt.Errorf("webhook %d: %d, want 202", i, resp.StatusCode)
					}
					return nil
				}()
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// snapshots lists the downloads' copies in the data folder.
func snapshots(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, ".handoff-snapshot-*.tmp"))
	return m
}

// TestStalledBackupReaderHoldsNoWriter: a client that asks for a backup,
// reads a few bytes and stops reading holds no transaction: while it
// still holds its connection and the server is still sending it the
// snapshot, webhooks go on being acknowledged, and the file grows past
// bbolt's map (made small here, so a few MiB of webhooks outgrow it) —
// the remap that waited for the download's read transaction before. Once
// the client hangs up, the download's copy is removed.
func TestStalledBackupReaderHoldsNoWriter(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	a := apptest.Start(t, cfg, app.Deps{APIToken: token, MmapSize: 1 << 20})
	base := apptest.URL(a)
	live := filepath.Join(cfg.DataDir, store.FileName)
	ctx := context.Background()

	n := 0
	for fileSize(t, live) < stallFill {
		if err := webhooks(t, base, n, n+32); err != nil {
			t.Fatalf("filling the file: %v", err)
		}
		n += 32
	}

	// The stalled reader: a receive buffer of 4 KiB, a few bytes read.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.DialContext(ctx, "tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/v1/backup HTTP/1.1\r\nHost: handoff\r\nAuthorization: Bearer %s\r\n\r\n", token)
	status, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil || status != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("the backup download began with %q, %v; want a 200", status, err)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return len(snapshots(cfg.DataDir)) == 1 }, "the download's copy to appear in the data folder")
	before := fileSize(t, live)

	// Webhooks until bbolt had to grow its map: the file's size is the
	// map's while it is under bbolt's 16 MiB allocation step.
	rounds := 0
	for fileSize(t, live) <= before {
		if rounds++; rounds > 100 {
			t.Fatalf("the file stayed at %d bytes after %d more webhooks", before, n)
		}
		if err := webhooks(t, base, n, n+32); err != nil {
			t.Fatalf("a webhook failed while a backup reader stalled: %v", err)
		}
		n += 32
	}
	after := fileSize(t, live)
	// The stalled download was still being sent throughout: its copy is
	// still there, and the connection still open (nothing read since).
	if left := snapshots(cfg.DataDir); len(left) != 1 {
		t.Fatalf("the download's copy is gone (%v) before the client hung up: the download was not stalled", left)
	}
	t.Logf("%d webhooks acknowledged; the file grew from %d to %d bytes while the backup reader stalled", n, before, after)

	conn.Close()
	testkit.Eventually(t, 30*time.Second, func() bool { return len(snapshots(cfg.DataDir)) == 0 }, "the download's copy to go with its client")
}
