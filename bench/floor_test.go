package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	bolt "go.etcd.io/bbolt"
)

// startFloor runs the floor target in-process and returns its base URL and
// a stop function that waits for serveFloor to return.
func startFloor(t *testing.T, dataDir string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrFile := filepath.Join(t.TempDir(), "addr")
	errc := make(chan error, 1)
	go func() { errc <- serveFloor(ctx, addrFile, dataDir, io.Discard) }()
	var base string
	err := proc.Eventually(ctx, 10*time.Second, func() (bool, error) {
		select {
		case err := <-errc:
			return false, fmt.Errorf("stopped before listening: %v", err)
		default:
		}
		b, err := os.ReadFile(addrFile)
		base = "http://" + strings.TrimSpace(string(b))
		return err == nil, nil
	})
	if err != nil {
		cancel()
		t.Fatalf("floor target: %v", err)
	}
	return base, func() error { cancel(); return <-errc }
}

// The floor is a baseline only if it keeps the same promise as handoff: a
// duplicate storm stores each id once, answers 202 once and 200 with the
// first correlation id otherwise, and every 202 is in the file afterwards.
func TestFloorRecordsEachEventOnce(t *testing.T) {
	dataDir := t.TempDir()
	base, stop := startFloor(t, dataDir)
	tpl, err := newBodyTemplate(512)
	if err != nil {
		t.Fatal(err)
	}
	client := newClient(64)
	defer client.CloseIdleConnections()

	const ids, copies = 50, 8
	type answer struct {
		status int
		reply  hookReply
	}
	answers := make([][]answer, ids)
	for i := range answers {
		answers[i] = make([]answer, copies)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := range copies {
		for i := range ids {
			wg.Go(func() {
				<-start
				var a answer
				var err error
				a.reply, a.status, _, err = postHook(context.Background(), client, base+"/hooks/demo", tpl.body(eventID('s', 1, i)))
				if err != nil {
					t.Error(err)
				}
				answers[i][c] = a
			})
		}
	}
	close(start)
	wg.Wait()

	for i, as := range answers {
		key := "demo:" + eventID('s', 1, i)
		first := ""
		accepted := 0
		for _, a := range as {
			if a.status == http.StatusAccepted {
				accepted++
				first = a.reply.CorrelationID
			}
		}
		if accepted != 1 || first == "" {
			t.Fatalf("%s: %d accepted answers, want exactly 1: %+v", key, accepted, as)
		}
		for _, a := range as {
			if a.reply.EventKey != key || a.reply.CorrelationID != first {
				t.Errorf("%s: answer %+v, want event key %s and correlation id %s", key, a, key, first)
			}
			if a.status == http.StatusOK && a.reply.Status != "duplicate" {
				t.Errorf("%s: 200 with status %q, want duplicate", key, a.reply.Status)
			}
		}
	}

	// A body without an id is refused and stores nothing.
	if _, status, _, err := postHook(context.Background(), client, base+"/hooks/demo", []byte(`{"text":"no id"}`)); err != nil || status != http.StatusBadRequest {
		t.Errorf("body without an id: status %d, err %v; want 400", status, err)
	}

	if err := stop(); err != nil {
		t.Fatalf("floor target stopped with %v", err)
	}
	db, err := bolt.Open(filepath.Join(dataDir, floorFile), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		keys, events := tx.Bucket(floorKeys), tx.Bucket(floorEvents)
		if n := keys.Stats().KeyN; n != ids {
			t.Errorf("%d keys stored, want %d", n, ids)
		}
		if n := events.Stats().KeyN; n != ids {
			t.Errorf("%d events stored, want %d", n, ids)
		}
		for i := range ids {
			id := eventID('s', 1, i)
			ev := keys.Get([]byte("demo:" + id))
			if ev == nil {
				t.Errorf("demo:%s is not indexed", id)
				continue
			}
			if body := events.Get(ev); !bytes.Contains(body, []byte(`"id":"`+id+`"`)) {
				t.Errorf("demo:%s points at %q", id, body)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
