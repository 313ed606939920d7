package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	hconfig "github.com/handoff/handoff/config"
	"github.com/handoff/handoff/intake"
	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/store/engine/pgengine/pgserver"
	"github.com/handoff/handoff/store/engine/pgengine/pgtest"
	"github.com/handoff/handoff/testkit/corpus"
)

func TestParsePGFlags(t *testing.T) {
	cfg, err := parsePGFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.c != 64 || cfg.n != 20000 || cfg.rounds != 3 || fmt.Sprint(cfg.procs) != "[1 3]" || !cfg.river || !cfg.failover || cfg.sharedBuffers != "128MB" {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, err = parsePGFlags([]string{"-procs", "3, 1,3", "-river=false"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.procs) != "[1 3]" || cfg.river {
		t.Errorf("-procs 3,1,3 -river=false: procs %v, river %v; want [1 3] (sorted, each once), false", cfg.procs, cfg.river)
	}
	for _, bad := range [][]string{{"-procs", "0"}, {"-procs", "1,x"}, {"-c", "151"}, {"-n", "0"}, {"extra"}} {
		if _, err := parsePGFlags(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// The proxy in front of several processes sends the requests to each in
// turn, bodies and answers intact.
func TestProxyRoundRobin(t *testing.T) {
	var mu sync.Mutex
	hits := map[int]int{}
	var children []*child
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			hits[i]++
			mu.Unlock()
			fmt.Fprintf(w, "%d:%s", i, b)
		}))
		defer srv.Close()
		children = append(children, &child{addr: strings.TrimPrefix(srv.URL, "http://")})
	}
	p, err := startProxy(children, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := newClient(4)
	defer client.CloseIdleConnections()
	for k := range 30 {
		body := testCorpusBody(k)
		resp, err := client.Post("http://"+p.Addr().String()+"/hooks/demo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("%d:%s", k%3, body); string(got) != want {
			t.Fatalf("request %d: got %q, want %q", k, got, want)
		}
	}
	if hits[0] != 10 || hits[1] != 10 || hits[2] != 10 {
		t.Errorf("hits %v, want 10 each", hits)
	}
}

// testCorpusBody is a webhook body with one of the shared corpus's texts.
func testCorpusBody(k int) string {
	texts := corpus.Texts()
	b, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("x%d", k), "from": texts[k%len(texts)].From, "text": texts[k%len(texts)].Body})
	return string(b)
}

// A tiny run of the mode on a real cluster: handoff on one process and
// on three behind the proxy, every event counted once, the leader of the
// three SIGKILLed after the run and another leading after it, the summary
// with the targets' lines (met or missed: never a timed test). River is
// left to the manual run: building it needs River's modules from the
// module proxy.
func TestPGMode(t *testing.T) {
	if _, err := pgserver.BinDir(); errors.Is(err, pgserver.ErrNotInstalled) {
		t.Skip(err)
	}
	bin, err := proc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.RemoveBinary)
	var out bytes.Buffer
	err = pgBench(context.Background(), []string{"-n", "200", "-rounds", "1", "-warmup", "20", "-c", "8",
		"-procs", "1,3", "-river=false", "-bin", bin}, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !regexp.MustCompile(`(?m)^  handoff +[0-9,]+/s \([0-9.]+s\) .*\(221 events stored once each\)$`).MatchString(s) {
		t.Error("no handoff row with its 221 events (20 warm-up, 1 dedup check, 200) counted once each")
	}
	if !regexp.MustCompile(`(?m)^  handoff-3p +[0-9,]+/s \([0-9.]+s\) .*\(221 events stored once each; leader SIGKILLed after it, another led [0-9.]+s later \(lease 4s\)\)$`).MatchString(s) {
		t.Error("no handoff-3p row with its 221 events counted once each and the leader's failover")
	}
	for _, re := range []string{`3 processes >= 1 process: [0-9.]+ x, (met|MISSED)`, `leader failover within 2 x lease \(8s\), 3 processes: [0-9.]+ s, (met|MISSED)`} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("the summary lacks %s", re)
		}
	}
	for _, want := range []string{"handoff p99 < 100ms: ", "handoff >= 1.5 x River events/s: not measured (no River run)", "(measured at 8 connections; the target is at 64)"} {
		if !strings.Contains(s, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
}

// -drafting=false's config is the built-in demo channel with an hour's
// quiet period: the same fields, so the same bodies work.
func TestPGConfigFileParses(t *testing.T) {
	c, err := hconfig.Parse([]byte(pgConfigFile()), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	demo, ok := c.Channel(demoChannel)
	want := hconfig.Default().Channels[0]
	if !ok || len(c.Channels) != 1 || demo.Coalesce != time.Hour || demo.AutoApprove {
		t.Fatalf("channels %+v; want only demo, coalesce 1h, no auto_approve", c.Channels)
	}
	if strings.Join(demo.Fields.MessageID, ",") != strings.Join(want.Fields.MessageID, ",") || demo.Fields.ConversationID != want.Fields.ConversationID || demo.Provider != want.Provider {
		t.Errorf("demo fields %+v provider %q, want the built-in %+v %q", demo.Fields, demo.Provider, want.Fields, want.Provider)
	}
	if c.Workers != hconfig.Default().Workers || c.DraftConcurrency() != hconfig.Default().DraftConcurrency() {
		t.Errorf("workers %d, draft pool %d; want the defaults", c.Workers, c.DraftConcurrency())
	}
}

// The count after a run finds an acknowledged event that is missing, and
// an event that was never acknowledged: it reads the tables handoff
// really writes (recorded here through the store's own ingest, on a
// database of the test server).
func TestCountStoredFindsLossAndStrays(t *testing.T) {
	pgtest.URL(t)
	db := fmt.Sprintf("count_%d", os.Getpid())
	pgtest.Exec(t, "create database "+db)
	t.Cleanup(func() { pgtest.Exec(t, "drop database "+db+" with (force)") })
	url := withDatabase(t, pgtest.URL(t), db)
	ctx := context.Background()
	st, err := store.OpenURL(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pgConfig{warmup: 3}
	tpl, err := newBodyTemplate(minBodySize + 40)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range cfg.warmup {
		ids = append(ids, eventID('w', 1, i))
	}
	ids = append(ids, eventID('d', 1, 0))
	for i := range 5 {
		ids = append(ids, eventID('m', 1, i))
	}
	record := func(id string) {
		t.Helper()
		var v struct{ From, Name, Text string }
		body := tpl.body(id)
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		m := intake.Message{Channel: demoChannel, MessageID: id, ConversationID: v.From, Contact: v.From, Name: v.Name, Text: v.Text,
			ContentType: "application/json", Body: body, JSON: true, ReceivedAt: time.Now().UTC()}
		if _, err := intake.RecordBatch(ctx, st, []intake.Message{m}, nil, growMaxAttempts); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		record(id)
	}
	if err := countStored(ctx, url, targetHandoff, tpl, cfg, 1, 5); err != nil {
		t.Fatalf("every event there once: %v", err)
	}
	if err := countStored(ctx, url, targetHandoff, tpl, cfg, 1, 6); err == nil || !strings.Contains(err.Error(), "9 of the 10 acknowledged ones found") {
		t.Errorf("an acknowledged event missing: err = %v", err)
	}
	record(eventID('x', 1, 0))
	if err := countStored(ctx, url, targetHandoff, tpl, cfg, 1, 5); err == nil || !strings.Contains(err.Error(), "holds 10 events") {
		t.Errorf("an event never acknowledged: err = %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// withDatabase is the connection string base naming database db instead.
func withDatabase(t *testing.T, base, db string) string {
	if !strings.Contains(base, "://") {
		return base + " dbname=" + db // key=value: the last one counts
	}
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}
