//go:build linux

package app_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/app/apptest"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store"
)

// BenchmarkWebhooksBesideStalledBackup measures webhook latency with and
// without a stalled backup reader beside them, in interleaved rounds on
// one real server whose map is small (1 MiB at open), so the file
// outgrows it again and again during the run: each iteration is one
// round alone and one round beside a client that asked for a backup,
// read its status line and stopped reading. It reports p50 and p99 of
// each and the rounds in which the file grew (bbolt remaps at each
// doubling past the 1 MiB it mapped at open; the file itself grows in
// 16 MiB steps once past 16 MiB). Run:
//
//	go test -run '^$' -bench WebhooksBesideStalledBackup -benchtime 4x ./app
func BenchmarkWebhooksBesideStalledBackup(b *testing.B) {
	cfg := config.Default()
	cfg.DataDir = b.TempDir()
	a := apptest.Start(b, cfg, app.Deps{APIToken: token, MmapSize: 1 << 20})
	base := apptest.URL(a)
	live := filepath.Join(cfg.DataDir, store.FileName)
	ctx := context.Background()
	size := func() int64 {
		fi, err := os.Stat(live)
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	n := 0
	for size() < stallFill {
		if _, err := timedWebhooks(base, n, n+32); err != nil {
			b.Fatal(err)
		}
		n += 32
	}
	var lat [2][]time.Duration
	var grew [2]int
	const perRound = 128
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for mode := range 2 {
			var conn net.Conn
			if mode == 1 {
				conn = stall(b, a.Addr().String(), cfg.DataDir)
			}
			before := size()
			d, err := timedWebhooks(base, n, n+perRound)
			if err != nil {
				b.Fatal(err)
			}
			n += perRound
			lat[mode] = append(lat[mode], d...)
			if size() > before {
				grew[mode]++
			}
			if conn != nil {
				if len(snapshots(cfg.DataDir)) != 1 {
					b.Fatal("the stalled download ended during its round")
				}
				conn.Close()
				if err := proc.Eventually(ctx, 30*time.Second, func() (bool, error) { return len(snapshots(cfg.DataDir)) == 0, nil }); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))]) / float64(time.Millisecond)
	}
	for mode, name := range []string{"alone", "stalled"} {
		b.ReportMetric(pct(lat[mode], 0.50), "p50-ms-"+name)
		b.ReportMetric(pct(lat[mode], 0.99), "p99-ms-"+name)
		b.ReportMetric(float64(grew[mode]), "rounds-grown-"+name)
	}
	b.Logf("webhooks (48 KiB bodies, 8 senders), %d rounds of %d each: alone p50 %.1f ms p99 %.1f ms (the file grew in %d rounds) | beside a stalled backup reader p50 %.1f ms p99 %.1f ms (the file grew in %d rounds); p99 ratio %.2f",
		b.N, perRound, pct(lat[0], .5), pct(lat[0], .99), grew[0], pct(lat[1], .5), pct(lat[1], .99), grew[1], pct(lat[1], .99)/pct(lat[0], .99))
}

// stall opens a backup download that reads its status line and stops,
// and waits until the server streams it from its copy.
func stall(b *testing.B, addr, dataDir string) net.Conn {
	b.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /api/v1/backup HTTP/1.1\r\nHost: handoff\r\nAuthorization: Bearer %s\r\n\r\n", token)
	if status, err := bufio.NewReaderSize(conn, 16).ReadString('\n'); err != nil || status != "HTTP/1.1 200 OK\r\n" {
		b.Fatalf("the backup download began with %q, %v", status, err)
	}
	if err := proc.Eventually(context.Background(), 30*time.Second, func() (bool, error) { return len(snapshots(dataDir)) == 1, nil }); err != nil {
		b.Fatal(err)
	}
	return conn
}

// timedWebhooks posts the padded corpus messages from to to-1 from eight
// senders and returns each one's latency.
func timedWebhooks(base string, from, to int) ([]time.Duration, error) {
	client := &http.Client{Timeout: 2 * time.Minute}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		lat   []time.Duration
		next  = from
	)
	for range 8 {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= to {
					return
				}
				body := padded(i)
				t0 := time.Now()
				resp, err := client.Post(base+"/hooks/demo", body.ContentType, bytes.NewReader(body.Raw))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("webhook %d: %d", i, resp.StatusCode)
					}
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, first
}
