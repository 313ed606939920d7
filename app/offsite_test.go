package app_test

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/app"
	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/testkit"
)

// TestStopWaitsForTheOffsiteListing: Start lists the bucket in the
// background to set the offsite gauges; against a bucket that never
// answers, Stop cuts the listing short and returns only after it ended
// (its failure is logged before Stop returns).
func TestStopWaitsForTheOffsiteListing(t *testing.T) {
	// A "bucket" that takes connections and never answers.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	accepted := make(chan struct{}, 1)
	done := make(chan struct{})
	conns.Go(func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- struct{}{}:
			default:
			}
			conns.Go(func() {
				<-done
				c.Close()
			})
		}
	})
	t.Cleanup(func() { close(done); hang.Close(); conns.Wait() })

	cfg := draftAtOnce()
	cfg.DataDir = t.TempDir()
	cfg.Backups.Target = &config.Target{
		Bucket: "handoff-test", Endpoint: "http://" + hang.Addr().String(), Region: "us-east-1", Keep: 3,
		AccessKey: "access", SecretKey: "secret-key", Timeout: time.Minute,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Log
	a, err := app.New(cfg, app.Deps{Listener: ln, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-accepted: // the listing is under way, held by the bucket
	case <-time.After(10 * time.Second):
		t.Fatalf("the app never listed the bucket; the log:\n%s", logs.String())
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "list the offsite copies") {
		t.Errorf("Stop returned before the offsite listing ended; the log:\n%s", got)
	}
}
