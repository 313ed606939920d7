package main

import (
	"strings"
	"testing"
)

const metricsText = `# HELP handoff_jobs Jobs waiting, running or discarded, by kind and state.
# TYPE handoff_jobs gauge
handoff_jobs{kind="draft",state="available"} 1740
handoff_jobs{kind="draft",state="running"} 3
handoff_jobs{kind="deliver",state="available"} 7
handoff_drafts_waiting 250
handoff_job_attempts_total{kind="draft",state="completed"} 251 1712345678000
handoff_job_duration_seconds_bucket{kind="draft",le="+Inf"} 251
handoff_job_duration_seconds_sum{kind="draft"} 2.5e+00
handoff_webhooks_total{channel="demo",outcome="accepted"} 1990
handoff_webhooks_total{channel="(unknown)",outcome="rejected_channel"} 2
weird{a="q\"uote",b="back\\slash",c="new\nline", d="x"} NaN
`

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
		wantOK bool
	}{
		{"handoff_jobs", map[string]string{"kind": "draft", "state": "available"}, 1740, true},
		{"handoff_jobs", map[string]string{"kind": "draft"}, 1743, true}, // a subset of labels sums
		{"handoff_jobs", nil, 1750, true},
		{"handoff_jobs", map[string]string{"kind": "draft", "state": "retryable"}, 0, false},
		{"handoff_drafts_waiting", nil, 250, true},
		{"handoff_job_attempts_total", map[string]string{"kind": "draft", "state": "completed"}, 251, true}, // the timestamp is ignored
		{"handoff_job_duration_seconds_sum", map[string]string{"kind": "draft"}, 2.5, true},
		{"handoff_job_duration_seconds", map[string]string{"kind": "draft"}, 0, false}, // names match whole
		{"handoff_webhooks_total", map[string]string{"channel": "demo", "outcome": "accepted"}, 1990, true},
		{"missing", nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := m.sum(tt.name, tt.labels)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("sum(%s, %v) = %v, %v; want %v, %v", tt.name, tt.labels, got, ok, tt.want, tt.wantOK)
		}
	}
	if _, ok := m.sum("weird", map[string]string{"a": `q"uote`, "b": `back\slash`, "c": "new\nline", "d": "x"}); !ok {
		t.Errorf("escaped label values were not unescaped: %+v", m[len(m)-1].labels)
	}
	if !m.has("handoff_drafts_waiting") || m.has("handoff_drafts") {
		t.Error("has: want an exact name match")
	}
}

func TestParseMetricsRejectsGarbage(t *testing.T) {
	for _, bad := range []string{
		"novalue\n",
		"x{a=\"1\" 3\n",
		"x{a=1} 3\n",
		"x{a=\"1} 3\n",
		"x 3 4 5\n",
		"x three\n",
	} {
		if _, err := parseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("parseMetrics(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseProcStatus(t *testing.T) {
	status := "Name:\thandoff\nVmPeak:\t 1300000 kB\nVmHWM:\t   80000 kB\nVmRSS:\t   61640 kB\nRssAnon:\t   21640 kB\nRssFile:\t   40000 kB\nThreads:\t9\n"
	m, err := parseProcStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	if want := (memory{rss: 61640 << 10, hwm: 80000 << 10, anon: 21640 << 10, file: 40000 << 10}); m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	if m, err := parseProcStatus("VmRSS:\t 100 kB\nVmHWM:\t 200 kB\n"); err != nil || m.anon != 0 {
		t.Errorf("an old kernel without RssAnon: %+v, %v; want no error and 0", m, err)
	}
	for _, bad := range []string{
		"Name:\thandoff\nVmRSS:\t 100 kB\n", // no VmHWM (a kernel thread has neither)
		"VmRSS:\t 100 MB\nVmHWM:\t 100 kB\n",
		"VmRSS:\t lots kB\nVmHWM:\t 100 kB\n",
	} {
		if _, err := parseProcStatus(bad); err == nil {
			t.Errorf("parseProcStatus(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseFootprintFlags(t *testing.T) {
	cfg, err := parseFootprintFlags([]string{"-events", "200000", "-pending", "100000"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.events != 200000 || cfg.pending != 100000 || cfg.requests != 50 {
		t.Errorf("got %+v", cfg)
	}
	for _, bad := range [][]string{
		{"-events", "0"},
		{"-events", "10", "-pending", "11"},
		{"-fill-workers", "0"},
		{"-requests", "0"},
		{"extra"},
	} {
		if _, err := parseFootprintFlags(bad); err == nil {
			t.Errorf("parseFootprintFlags(%q) succeeded, want an error", bad)
		}
	}
}

func TestCheckDraftPage(t *testing.T) {
	check := checkDraftPage(2)
	if err := check([]byte(`{"drafts":[{"status":"pending_approval"},{"status":"pending_approval"}]}`)); err != nil {
		t.Errorf("a full page: %v", err)
	}
	if err := check([]byte(`{"drafts":[]}`)); err == nil {
		t.Error("an empty page passed")
	}
	if err := check([]byte(`<html>`)); err == nil {
		t.Error("a page that is not JSON passed")
	}
}

// TestOpenJobs: the jobs still to run are the available, retryable and
// running ones of the kinds asked, not the finished ones nor other kinds.
func TestOpenJobs(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# TYPE handoff_jobs gauge
handoff_jobs{kind="draft",state="available"} 3
handoff_jobs{kind="draft",state="retryable"} 1
handoff_jobs{kind="draft",state="running"} 2
handoff_jobs{kind="draft",state="discarded"} 7
handoff_jobs{kind="deliver",state="running"} 5
handoff_jobs{kind="digest",state="available"} 11
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.openJobs("draft"); got != 6 {
		t.Errorf("open draft jobs = %v, want 6", got)
	}
	if got := m.openJobs("draft", "deliver"); got != 11 {
		t.Errorf("open draft and deliver jobs = %v, want 11", got)
	}
}
