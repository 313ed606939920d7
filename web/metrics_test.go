package web

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/testkit"
	"github.com/handoff/handoff/testkit/corpus"
)

// scrape reads /metrics through the router and parses it with
// Prometheus's own text parser.
func scrape(t *testing.T, e *testEnv) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken) // an admin token may read them
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /metrics Content-Type %q; want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// series returns every series of a family as "label=value,..." -> value.
func series(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f := fams[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(labels)
		v := 0.0
		switch {
		case m.Counter != nil:
			v = m.GetCounter().GetValue()
		case m.Gauge != nil:
			v = m.GetGauge().GetValue()
		case m.Untyped != nil:
			v = m.GetUntyped().GetValue()
		case m.Histogram != nil:
			v = float64(m.GetHistogram().GetSampleCount())
		}
		out[strings.Join(labels, ",")] = v
	}
	return out
}

// wantSeries fails unless the family holds exactly want.
func wantSeries(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]float64) {
	t.Helper()
	got := series(fams, name)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got  %v\n want %v", name, got, want)
	}
}

// gauge is the value of a family's only series.
func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	t.Helper()
	s := series(fams, name)
	if len(s) > 1 {
		t.Fatalf("%s has %d series, want at most 1", name, len(s))
	}
	v, ok := s[""]
	return v, ok
}

// counterValue reads a counter directly, for a server whose /metrics
// cannot be scraped (its store is closed).
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMetricsAfterAKnownWorkload runs webhooks of every outcome, drafts and
// two approved replies through the real router and runner, then scrapes
// /metrics and checks every count exactly.
func TestMetricsAfterAKnownWorkload(t *testing.T) {
	cfg := config.Default()
	signed := cfg.Channels[0]
	signed.Name = "signed"
	signed.Signature = &config.Signature{Scheme: "hmac-sha256", Secret: "s3cret", Header: "X-Signature"}
	cfg.Channels = append(cfg.Channels, signed)
	// The gauges' clock runs five hours ahead: the drafted leads (owned,
	// stuck after 4h) are stuck by then, the replied ones never.
	const ahead = 5 * time.Hour
	e, _ := newEnv(t, cfg, envOptions{metricsNow: func() time.Time { return time.Now().Add(ahead) }})

	fams := scrape(t, e)
	if v, ok := gauge(t, fams, "handoff_backup_last_result"); !ok || v != -1 {
		t.Errorf("before any backup: handoff_backup_last_result = %v (present %v), want -1", v, ok)
	}
	if _, ok := gauge(t, fams, "handoff_backup_age_seconds"); ok {
		t.Errorf("before any backup: handoff_backup_age_seconds is present")
	}

	const accepted = 5
	post := func(path, ct, body string, header http.Header, want int) {
		t.Helper()
		if code, ans := e.do(t, http.MethodPost, path, ct, []byte(body), header); code != want {
			t.Fatalf("POST %s %.40q: got %d %v, want %d", path, body, code, ans, want)
		}
	}
	// The messages are corpus bodies (layouts and texts mixed), the
	// duplicates too: a retry byte for byte, and the same ids re-serialized.
	for i := range accepted {
		lead := fmt.Sprintf("lead%d@example.com", i)
		b := corpus.Message(i, fmt.Sprintf("m-%d", i), lead, lead)
		post("/hooks/demo", b.ContentType, string(b.Raw), nil, http.StatusAccepted)
		if i == 0 {
			post("/hooks/demo", b.ContentType, string(b.Raw), nil, http.StatusOK)
		}
	}
	for _, b := range []corpus.Body{
		corpus.MessageAs("fish", "pretty2", "m-0", "lead0@example.com", "lead0@example.com"),
		corpus.MessageAs("emoji", "python", "m-1", "lead1@example.com", "lead1@example.com"),
	} {
		post("/hooks/demo", b.ContentType, string(b.Raw), nil, http.StatusOK)
	}
	// The refused ones are exact on purpose: each the one fault it is counted by.
	post("/hooks/demo", "application/json", `{not json`, nil, http.StatusBadRequest)
	post("/hooks/demo", "image/png", "\x89PNG", nil, http.StatusBadRequest)
	post("/hooks/demo", "application/json", `{"text":"no id"}`, nil, http.StatusBadRequest)
	post("/hooks/demo", "application/json", `{"id":"big","text":"`+strings.Repeat("x", 1<<20)+`"}`, nil, http.StatusRequestEntityTooLarge)
	post("/hooks/nope", "application/json", `{"id":"x"}`, nil, http.StatusNotFound)
	post("/hooks/no-such-"+strings.Repeat("z", 40), "application/json", `{"id":"x"}`, nil, http.StatusNotFound)
	forged := string(corpus.MessageAs("hebrew", "crlf", "s1", "", "").Raw)
	post("/hooks/signed", "application/json", forged, http.Header{"X-Signature": {hmacHex("wrong", forged)}}, http.StatusUnauthorized)

	// Every event drafted; two replies approved and sent.
	var drafts []store.Draft
	testkit.Eventually(t, 10*time.Second, func() bool {
		drafts = drafts[:0]
		for i := range accepted {
			d, err := e.st.DraftByEvent(fmt.Sprintf("demo:m-%d", i))
			if err != nil {
				return false
			}
			drafts = append(drafts, d)
		}
		return true
	}, "five drafts")
	for _, d := range drafts[:2] {
		if code, ans := apiPost(t, e, "/api/v1/drafts/"+d.ID+"/approve", ""); code != http.StatusOK && code != http.StatusCreated {
			t.Fatalf("approve %s: %d %v", d.ID, code, ans)
		}
	}
	// The store settles first; then the runner's counters catch up (they
	// are bumped just after each job's final commit).
	testkit.Eventually(t, 10*time.Second, func() bool {
		rows, err := e.st.OutboxCounts()
		if err != nil || rows[store.OutboxSent] != 2 {
			return false
		}
		live, err := e.st.JobCounts()
		return err == nil && len(live) == 0
	}, "two replies sent and every job finished")
	testkit.Eventually(t, 10*time.Second, func() bool {
		total := 0.0
		for _, v := range series(scrape(t, e), "handoff_job_attempts_total") {
			total += v
		}
		return total >= accepted+2
	}, "the job counters to count 7 attempts")

	fams = scrape(t, e)
	wantSeries(t, fams, "handoff_webhooks_total", map[string]float64{
		"channel=demo,client=default,outcome=accepted":                        accepted,
		"channel=demo,client=default,outcome=duplicate":                       3,
		"channel=demo,client=default,outcome=rejected_body":                   2,
		"channel=demo,client=default,outcome=rejected_message_id":             1,
		"channel=demo,client=default,outcome=rejected_too_large":              1,
		"channel=signed,client=default,outcome=rejected_signature":            1,
		"channel=(unknown),client=(unknown),outcome=rejected_unknown_channel": 2,
	})
	wantSeries(t, fams, "handoff_job_attempts_total", map[string]float64{
		"kind=draft,state=completed":   accepted,
		"kind=deliver,state=completed": 2,
	})
	wantSeries(t, fams, "handoff_job_duration_seconds", map[string]float64{"kind=draft": accepted, "kind=deliver": 2})
	wantSeries(t, fams, "handoff_model_calls_total", map[string]float64{"drafter=template,outcome=ok": accepted})
	wantSeries(t, fams, "handoff_jobs", map[string]float64{})
	wantSeries(t, fams, "handoff_outbox_rows", map[string]float64{
		"status=pending": 0, "status=effect_pending": 0, "status=sent": 2, "status=needs_reconciliation": 0, "status=failed": 0,
	})
	if v, _ := gauge(t, fams, "handoff_drafts_waiting"); v != accepted-2 {
		t.Errorf("handoff_drafts_waiting = %v, want %d", v, accepted-2)
	}
	if v, _ := gauge(t, fams, "handoff_stuck_leads"); v != accepted-2 {
		t.Errorf("handoff_stuck_leads %v ahead = %v, want the %d leads still owned", ahead, v, accepted-2)
	}
	sz, err := e.st.Size()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := gauge(t, fams, "handoff_db_size_bytes"); v <= 0 || v != float64(sz.Bytes) {
		t.Errorf("handoff_db_size_bytes = %v, want the store's size %d (> 0)", v, sz.Bytes)
	}
	wantSeries(t, fams, "handoff_backups_total", map[string]float64{})

	// A backup download is counted as a download; the scheduled backups'
	// last result and age do not move.
	resp, body := apiBackup(t, e)
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET /api/v1/backup: %d, %d bytes", resp.StatusCode, len(body))
	}
	fams = scrape(t, e)
	wantSeries(t, fams, "handoff_backup_downloads_total", map[string]float64{"result=ok": 1})
	wantSeries(t, fams, "handoff_backups_total", map[string]float64{})
	if v, ok := gauge(t, fams, "handoff_backup_last_result"); !ok || v != -1 {
		t.Errorf("after a download: handoff_backup_last_result = %v, want -1 (no scheduled backup yet)", v)
	}
	if _, ok := gauge(t, fams, "handoff_backup_age_seconds"); ok {
		t.Errorf("after a download: handoff_backup_age_seconds is present; want it absent until a scheduled backup")
	}
	// The webhook counters did not move.
	if got := series(fams, "handoff_webhooks_total")["channel=demo,client=default,outcome=accepted"]; got != accepted {
		t.Errorf("accepted webhooks after the backup: %v", got)
	}
}

// TestMetricsBackupFailure: a failed backup is counted and is the last result.
func TestMetricsBackupFailure(t *testing.T) {
	e, _ := newEnv(t, nil, envOptions{})
	m := e.metrics
	m.Backup(time.Now().Add(-time.Hour), nil, nil)
	m.Backup(time.Now(), nil, errors.New("the disk is full"))
	fams := scrape(t, e)
	wantSeries(t, fams, "handoff_backups_total", map[string]float64{"result=ok": 1, "result=failed": 1})
	if v, _ := gauge(t, fams, "handoff_backup_last_result"); v != 0 {
		t.Errorf("handoff_backup_last_result after a failure = %v, want 0", v)
	}
	if v, ok := gauge(t, fams, "handoff_backup_age_seconds"); !ok || v < 3500 || v > 3700 {
		t.Errorf("handoff_backup_age_seconds = %v (present %v); want the age of the last good one, about 3600", v, ok)
	}
}
