package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	hconfig "github.com/handoff/handoff/config"
)

func TestArrivalsDueAndDueByAgree(t *testing.T) {
	for _, a := range []arrivals{{rate: 1, n: 5}, {rate: 3, n: 10}, {rate: 2000, n: 4000}, {rate: 7, n: 50}, {rate: maxRate, n: 300}} {
		// Every request is due exactly once: dueBy counts those with
		// due(i) <= e, at every instant around each due time.
		for i := range a.n {
			d := a.due(i)
			if got := a.dueBy(d); got < i+1 {
				t.Fatalf("rate %d: dueBy(due(%d)=%v) = %d, want at least %d", a.rate, i, d, got, i+1)
			}
			if d > 0 {
				if got := a.dueBy(d - 1); got != i && a.due(i-1) != d {
					t.Fatalf("rate %d: dueBy(due(%d)-1ns) = %d, want %d", a.rate, i, got, i)
				}
			}
		}
		if got := a.dueBy(time.Hour); got != a.n {
			t.Errorf("rate %d: dueBy(1h) = %d, want all %d", a.rate, got, a.n)
		}
		if got := a.dueBy(-time.Millisecond); got != 0 {
			t.Errorf("rate %d: dueBy(-1ms) = %d, want 0", a.rate, got)
		}
	}
}

func TestArrivalsRate(t *testing.T) {
	tests := []struct {
		a       arrivals
		elapsed time.Duration
		want    int
	}{
		{arrivals{rate: 2000, n: 120000}, 0, 1}, // the first is due at once
		{arrivals{rate: 2000, n: 120000}, 499 * time.Microsecond, 1},
		{arrivals{rate: 2000, n: 120000}, 500 * time.Microsecond, 2},
		{arrivals{rate: 2000, n: 120000}, time.Second - 1, 2000},
		{arrivals{rate: 2000, n: 120000}, time.Second, 2001},
		{arrivals{rate: 3, n: 100}, time.Second, 4}, // 0, 333ms, 666ms, 1s
		{arrivals{rate: 2000, n: 10}, time.Second, 10},
	}
	for _, tt := range tests {
		if got := tt.a.dueBy(tt.elapsed); got != tt.want {
			t.Errorf("%+v.dueBy(%v) = %d, want %d", tt.a, tt.elapsed, got, tt.want)
		}
	}
	if got, want := (arrivals{rate: 3, n: 10}).due(2), 666666666*time.Nanosecond; got != want {
		t.Errorf("due(2) at 3/s = %v, want %v", got, want)
	}
}

func TestGrowth(t *testing.T) {
	secs := func(n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(i)
		}
		return out
	}
	linear := func(n int, perSec float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = perSec * float64(i)
		}
		return out
	}
	tests := []struct {
		name   string
		at     []float64
		depth  []float64
		want   float64
		wantOK bool
	}{
		{"flat", secs(20), make([]float64, 20), 0, true},
		{"linear growth is its slope", secs(20), linear(20, 1500), 1500, true},
		{"draining is negative", secs(8), linear(8, -10), -10, true},
		{"too few samples", secs(3), linear(3, 5), 0, false},
		{"mismatched lengths", secs(5), linear(4, 5), 0, false},
		{"a spike early does not count", secs(8), []float64{0, 9000, 100, 100, 100, 100, 100, 100}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := growth(tt.at, tt.depth)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("growth = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestQueueBounded(t *testing.T) {
	tests := []struct {
		name      string
		growth    float64
		ok        bool
		end, rate float64
		want      bool
	}{
		{"small queue at the end", 500, true, 1999, 2000, true},
		{"growing by more than 5% of arrivals", 101, true, 50000, 2000, false},
		{"growing by 5% of arrivals", 100, true, 50000, 2000, true},
		{"big but shrinking", -300, true, 50000, 2000, true},
		{"big and unknown growth", 0, false, 50000, 2000, false},
	}
	for _, tt := range tests {
		if got := queueBounded(tt.growth, tt.ok, tt.end, tt.rate); got != tt.want {
			t.Errorf("%s: queueBounded = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestWindows(t *testing.T) {
	s := time.Second
	points := []point{{at: 0}, {at: s}, {at: 2 * s}, {at: 2*s + s/2}}
	done := []completion{
		{at: s / 2, latency: 3, status: http.StatusAccepted},
		{at: s, latency: 1, status: http.StatusAccepted}, // on a boundary: the next window
		{at: s + 1, latency: 2, status: http.StatusAccepted},
		{at: s + 2, latency: 9, status: http.StatusInternalServerError}, // not a 202: not counted
		{at: 3 * s, latency: 4, status: http.StatusAccepted},            // after the last point: the last window
	}
	w := windows(points, done)
	if len(w) != 3 {
		t.Fatalf("got %d windows, want 3", len(w))
	}
	for i, want := range []struct {
		accepted  int
		latencies []time.Duration
	}{{1, []time.Duration{3}}, {2, []time.Duration{1, 2}}, {1, []time.Duration{4}}} {
		if w[i].accepted != want.accepted || len(w[i].latencies) != len(want.latencies) {
			t.Fatalf("window %d: accepted %d, latencies %v; want %d, %v", i, w[i].accepted, w[i].latencies, want.accepted, want.latencies)
		}
		for j := range want.latencies {
			if w[i].latencies[j] != want.latencies[j] {
				t.Errorf("window %d: latencies %v, want %v (sorted)", i, w[i].latencies, want.latencies)
			}
		}
	}
	if windows(points[:1], done) != nil {
		t.Error("one point makes no window")
	}
}

func TestParseSustainedFlags(t *testing.T) {
	cfg, err := parseSustainedFlags([]string{"-rate", "500, 2000", "-workers", "0,16", "-duration", "20s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.rates) != 2 || cfg.rates[0] != 500 || cfg.rates[1] != 2000 {
		t.Errorf("rates = %v, want [500 2000]", cfg.rates)
	}
	if len(cfg.workerCounts) != 2 || cfg.workerCounts[1] != 16 {
		t.Errorf("workers = %v, want [0 16]", cfg.workerCounts)
	}
	for _, bad := range [][]string{
		{"-rate", "0"},
		{"-rate", "fast"},
		{"-rate", "200000"},
		{"-workers", "300"},
		{"-duration", "500ms"},
		{"-sample", "10ms"},
		{"-duration", "2h"},
		{"extra"},
	} {
		if _, err := parseSustainedFlags(bad); err == nil {
			t.Errorf("parseSustainedFlags(%q) succeeded, want an error", bad)
		}
	}
}

// The config files the modes write must be ones handoff accepts, and mean
// what the modes say they mean.
func TestModeConfigFilesParse(t *testing.T) {
	getenv := func(string) string { return "" }
	def, err := hconfig.Parse([]byte(sustainedConfigFile(0, 0, false, "127.0.0.1:9101")), getenv)
	if err != nil {
		t.Fatalf("default sustained config: %v", err)
	}
	if want := hconfig.Default(); def.Workers != want.Workers || def.DraftConcurrency() != want.DraftConcurrency() || len(def.Channels) != 1 || def.Channels[0].AutoApprove || def.MetricsAddr != "127.0.0.1:9101" {
		t.Errorf("the default sustained run must be the built-in demo (workers %d, draft pool %d) plus a metrics listener; got workers %d, draft pool %d, channels %+v, metrics_addr %q",
			want.Workers, want.DraftConcurrency(), def.Workers, def.DraftConcurrency(), def.Channels, def.MetricsAddr)
	}
	c, err := hconfig.Parse([]byte(sustainedConfigFile(16, 8, true, "127.0.0.1:9101")), getenv)
	if err != nil {
		t.Fatalf("sustained config: %v", err)
	}
	demo, ok := c.Channel(demoChannel)
	if c.Workers != 16 || c.DraftConcurrency() != 8 || !ok || !demo.AutoApprove {
		t.Errorf("sustained config: workers %d, draft pool %d, demo channel %v (auto_approve %v); want 16, 8, true, true", c.Workers, c.DraftConcurrency(), ok, ok && demo.AutoApprove)
	}
	// The demo channel keeps the built-in one's fields, so the same bodies work.
	if want := hconfig.Default().Channels[0].Fields; !ok || strings.Join(demo.Fields.MessageID, ",") != strings.Join(want.MessageID, ",") || demo.Fields.ConversationID != want.ConversationID {
		t.Errorf("sustained config: demo fields %+v, want the built-in %+v", demo.Fields, want)
	}

	for _, workers := range []int{0, 64} {
		c, err := hconfig.Parse([]byte(footprintConfigFile(workers)), getenv)
		if err != nil {
			t.Fatalf("footprint config (workers %d): %v", workers, err)
		}
		bulk, okB := c.Channel(bulkChannel)
		demo, okD := c.Channel(demoChannel)
		if !okB || !okD || !bulk.AutoApprove || demo.AutoApprove {
			t.Errorf("footprint config: want %s auto-approving and %s not", bulkChannel, demoChannel)
		}
		if workers > 0 && (c.Workers != workers || c.Stuck.Received < 24*time.Hour) {
			t.Errorf("footprint fill config: workers %d, stuck.received %v; want %d and a day or more", c.Workers, c.Stuck.Received, workers)
		}
		if workers == 0 && c.Stuck != hconfig.Default().Stuck {
			t.Errorf("footprint measure config: stuck %+v, want the defaults %+v", c.Stuck, hconfig.Default().Stuck)
		}
		if workers == 0 && c.Workers != hconfig.Default().Workers {
			t.Errorf("footprint measure config: workers %d, want the default %d", c.Workers, hconfig.Default().Workers)
		}
	}
}

func TestTotals(t *testing.T) {
	s := time.Second
	r := &sustainedRun{rate: 100, n: 400, elapsed: 4 * s, loadEnd: 4}
	for i := range 400 {
		r.done = append(r.done, completion{at: time.Duration(i) * 10 * time.Millisecond, latency: time.Duration(i%10+1) * time.Millisecond, status: http.StatusAccepted})
	}
	// 10 drafts before the start, then 90 a second; the queue grows 10 a
	// second; a drain point after the load must not count.
	for i := range 5 {
		r.points = append(r.points, point{at: time.Duration(i) * s, drafted: 10 + 90*float64(i), queued: 10 * float64(i), attempts: 90 * float64(i), attemptSecs: 0.9 * float64(i)})
	}
	r.points = append(r.points, point{at: 9 * s, drafted: 1000, queued: 0})
	got := totals(r)
	if got.accepted != 100 || got.drafted != 90 || got.ratio != 0.9 {
		t.Errorf("accepted %v/s, drafted %v/s, ratio %v; want 100, 90, 0.9", got.accepted, got.drafted, got.ratio)
	}
	if got.queueEnd != 40 || got.maxQ != 40 || !got.growthOK || got.growth != 10 || !got.bounded {
		t.Errorf("queue end %v max %v growth %v (%v) bounded %v; want 40, 40, 10/s, bounded (below a second of arrivals)", got.queueEnd, got.maxQ, got.growth, got.growthOK, got.bounded)
	}
	if got.attempt != 10*time.Millisecond {
		t.Errorf("attempt %v, want 10ms", got.attempt)
	}
	if got.p50 != 5*time.Millisecond || got.p99 != 10*time.Millisecond || got.max != 10*time.Millisecond {
		t.Errorf("p50 %v p99 %v max %v; want 5ms, 10ms, 10ms", got.p50, got.p99, got.max)
	}
}
