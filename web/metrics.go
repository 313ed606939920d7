package web

import (
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/leads"
	"github.com/handoff/handoff/store"
)

// Metrics are handoff's Prometheus metrics. Counters are bumped where things
// happen; the state of the database (queue, outbox, stuck leads, size) is
// read from the store at scrape time, so it cannot drift. The queue gauge
// reads the job counts the store keeps in each job write's own transaction
// (a few keys per kind, proven by store.Check), never the queued jobs, so a
// scrape costs the same with a million jobs waiting.
type Metrics struct {
	reg          *prometheus.Registry
	webhooks     *prometheus.CounterVec
	jobsFinished *prometheus.CounterVec
	jobDuration  *prometheus.HistogramVec
	modelCalls   *prometheus.CounterVec
	modelTokens  *prometheus.CounterVec
	draftCost    *prometheus.CounterVec
	backups      *prometheus.CounterVec
	downloads    *prometheus.CounterVec
	leadsClosed  prometheus.Counter
	closesUndone prometheus.Counter
	offsite      *offsiteMetrics // metrics_backup.go
	cfg          *config.Config

	mu           sync.Mutex
	lastBackupOK time.Time
	lastBackup   float64  // 1 ok, 0 failed, -1 none yet
	lastErr      string   // why the last backup failed; "" after a good one
	lastWarnings []string // the unreadable records of the last verified backup
}

// NewMetrics registers every metric; st and cfg feed the scrape-time gauges.
func NewMetrics(st *store.Store, cfg *config.Config, now func() time.Time) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_webhooks_total", Help: "Inbound webhooks by channel, its client and outcome (accepted, duplicate, rejected_<reason>).",
		}, []string{"channel", "client", "outcome"}),
		jobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_job_attempts_total", Help: "Finished job attempts by kind and the state they left the job in.",
		}, []string{"kind", "state"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "handoff_job_duration_seconds", Help: "Duration of job attempts by kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"kind"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_model_calls_total", Help: "Drafter calls by drafter and outcome (ok, invalid, refused, rate_limited, error).",
		}, []string{"drafter", "outcome"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_model_tokens_total", Help: "Tokens the model server reported, by direction (prompt, output).",
		}, []string{"direction"}),
		draftCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_draft_cost_total", Help: "What drafts cost (drafter.price × tokens) by client, channel, prompt version and currency; increase() over a day is the day's total.",
		}, []string{"client", "channel", "prompt_version", "currency"}),
		backups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_backups_total", Help: "Scheduled backups by result.",
		}, []string{"result"}),
		downloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_backup_downloads_total", Help: "Backups downloaded (dashboard, API, handoff backup) by result.",
		}, []string{"result"}),
		leadsClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "handoff_leads_closed_total", Help: "Leads a person closed without a reply.",
		}),
		closesUndone: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "handoff_lead_closes_undone_total", Help: "Closes of a lead a person took back inside the undo window (the lead reopened).",
		}),
		lastBackup: -1,
		cfg:        cfg,
	}
	m.reg.MustRegister(m.webhooks, m.jobsFinished, m.jobDuration, m.modelCalls, m.modelTokens, m.draftCost, m.backups, m.downloads, m.leadsClosed, m.closesUndone,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&storeCollector{st: st, cfg: cfg, now: now, m: m})
	m.offsite = newOffsiteMetrics(m.reg, now)
	return m
}

// metricsHandler answers GET /metrics in the Prometheus text format.
func (s *Server) metricsHandler(c *echo.Context) error {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(c.Response(), c.Request())
	return nil
}

// unknownChannel labels webhooks to a channel that is not configured: the
// name comes from the URL, and every name anyone tries must not become a
// time series of its own.
const unknownChannel = "(unknown)"

// Webhook counts one inbound webhook.
func (m *Metrics) Webhook(channel, outcome string) {
	if m != nil {
		client := m.cfg.ClientOf(channel)
		if client == "" {
			channel, client = unknownChannel, unknownChannel
		}
		m.webhooks.WithLabelValues(channel, client, outcome).Inc()
	}
}

// LeadClosed counts one lead closed without a reply.
func (m *Metrics) LeadClosed() {
	if m != nil {
		m.leadsClosed.Inc()
	}
}

// LeadCloseUndone counts one close of a lead undone (reopened).
func (m *Metrics) LeadCloseUndone() {
	if m != nil {
		m.closesUndone.Inc()
	}
}

// JobAttempt counts one finished attempt (the jobs runner calls it).
func (m *Metrics) JobAttempt(kind string, state store.JobState, d time.Duration) {
	if m != nil {
		m.jobsFinished.WithLabelValues(kind, string(state)).Inc()
		m.jobDuration.WithLabelValues(kind).Observe(d.Seconds())
	}
}

// ModelCall counts one drafter call and its tokens.
func (m *Metrics) ModelCall(drafter, outcome string, promptTokens, outputTokens int64) {
	if m != nil {
		m.modelCalls.WithLabelValues(drafter, outcome).Inc()
		m.modelTokens.WithLabelValues("prompt").Add(float64(promptTokens))
		m.modelTokens.WithLabelValues("output").Add(float64(outputTokens))
	}
}

// DraftCost adds a stored draft's cost.
func (m *Metrics) DraftCost(channel, promptVersion, currency string, cost float64) {
	if m != nil && cost > 0 {
		m.draftCost.WithLabelValues(m.cfg.ClientOf(channel), channel, promptVersion, currency).Add(cost)
	}
}

// Backup records a scheduled backup's result: err nil is a verified copy
// (with the unreadable records it carries as warnings), an error a backup
// that failed or whose copy failed verification.
func (m *Metrics) Backup(at time.Time, warnings []string, err error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.backups.WithLabelValues("ok").Inc()
		m.lastBackupOK, m.lastBackup, m.lastErr, m.lastWarnings = at, 1, "", warnings
	} else {
		m.backups.WithLabelValues("failed").Inc()
		m.lastBackup, m.lastErr = 0, err.Error()
	}
}

// Download counts a downloaded backup. It leaves the scheduled backups'
// last result alone: a client that hangs up mid-download says nothing about
// the schedule, and a good download must not hide a broken one.
func (m *Metrics) Download(ok bool) {
	if m == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.downloads.WithLabelValues(result).Inc()
}

// RestoreLastBackup sets the last good backup found on disk at start (the
// newest verified copy, with its warnings), without counting a backup.
func (m *Metrics) RestoreLastBackup(at time.Time, warnings []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastBackupOK, m.lastBackup, m.lastWarnings = at, 1, warnings
}

// LastBackup is the time of the last good backup and the last result (1, 0, or -1 for none).
func (m *Metrics) LastBackup() (time.Time, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastBackupOK, m.lastBackup
}

// BackupStatus is how the scheduled backups went, for the pages.
type BackupStatus struct {
	LastOK   time.Time // the newest verified backup; zero: none yet
	Result   float64   // 1 ok, 0 failed, -1 none yet
	Err      string    // why the last one failed, when Result is 0
	Warnings []string  // the unreadable records the newest verified one carries
}

// BackupStatus is the scheduled backups' state.
func (m *Metrics) BackupStatus() BackupStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return BackupStatus{LastOK: m.lastBackupOK, Result: m.lastBackup, Err: m.lastErr, Warnings: m.lastWarnings}
}

// storeCollector reads the database's state at scrape time.
type storeCollector struct {
	st  *store.Store
	cfg *config.Config
	now func() time.Time
	m   *Metrics
}

var (
	descJobs       = prometheus.NewDesc("handoff_jobs", "Jobs waiting, running or discarded, by kind and state.", []string{"kind", "state"}, nil)
	descOutbox     = prometheus.NewDesc("handoff_outbox_rows", "Outbox rows by status.", []string{"status"}, nil)
	descStuck      = prometheus.NewDesc("handoff_stuck_leads", "Leads longer than their status's stuck threshold.", nil, nil)
	descWaiting    = prometheus.NewDesc("handoff_drafts_waiting", "Drafts waiting for approval.", nil, nil)
	descDrafts     = prometheus.NewDesc("handoff_drafts", "Drafts by status (pending_approval, approved, rejected, superseded).", []string{"status"}, nil)
	descDBSize     = prometheus.NewDesc("handoff_db_size_bytes", "Size of the database file.", nil, nil)
	descBackupAge  = prometheus.NewDesc("handoff_backup_age_seconds", "Seconds since the last good backup (absent before the first).", nil, nil)
	descBackupLast = prometheus.NewDesc("handoff_backup_last_result", "Result of the last backup: 1 ok, 0 failed (its copy did not verify, or it could not be written), -1 none yet.", nil, nil)
	descBackupTime = prometheus.NewDesc("handoff_backup_last_success_timestamp_seconds", "Unix time of the newest verified backup (absent before the first).", nil, nil)
	descBackupWarn = prometheus.NewDesc("handoff_backup_last_success_warnings", "Unreadable records the newest verified backup carries, as the live database does (0: none).", nil, nil)
	descUnreadable = prometheus.NewDesc("handoff_unreadable_records", "Records known not to decode: found by the check at start or met by a read since (handoff verify names them).", nil, nil)
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descOutbox, descStuck, descWaiting, descDrafts, descDBSize, descBackupAge, descBackupLast, descBackupTime, descBackupWarn, descUnreadable} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if jobs, err := c.st.JobCounts(); err == nil {
		for _, j := range jobs {
			ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(j.N), j.Kind, string(j.State))
		}
	}
	if rows, err := c.st.OutboxCounts(); err == nil {
		for _, st := range []store.OutboxStatus{store.OutboxPending, store.OutboxEffectPending, store.OutboxSent, store.OutboxNeedsReconciliation, store.OutboxFailed} {
			ch <- prometheus.MustNewConstMetric(descOutbox, prometheus.GaugeValue, float64(rows[st]), string(st))
		}
	}
	now := c.now()
	if counts, err := c.st.Counts(stuckBefore(c.cfg, now)); err == nil {
		ch <- prometheus.MustNewConstMetric(descStuck, prometheus.GaugeValue, float64(counts.StuckLeads))
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(counts.DraftsWaiting))
	}
	if drafts, err := c.st.DraftCountsFor(store.Everything()); err == nil {
		for _, st := range store.DraftStatuses {
			ch <- prometheus.MustNewConstMetric(descDrafts, prometheus.GaugeValue, float64(drafts[st]), string(st))
		}
	}
	if sz, err := c.st.Size(); err == nil {
		ch <- prometheus.MustNewConstMetric(descDBSize, prometheus.GaugeValue, float64(sz.Bytes))
	}
	b := c.m.BackupStatus()
	if !b.LastOK.IsZero() {
		ch <- prometheus.MustNewConstMetric(descBackupAge, prometheus.GaugeValue, now.Sub(b.LastOK).Seconds())
		ch <- prometheus.MustNewConstMetric(descBackupTime, prometheus.GaugeValue, float64(b.LastOK.UnixMilli())/1000)
		ch <- prometheus.MustNewConstMetric(descBackupWarn, prometheus.GaugeValue, float64(len(b.Warnings)))
	}
	ch <- prometheus.MustNewConstMetric(descBackupLast, prometheus.GaugeValue, b.Result)
	ch <- prometheus.MustNewConstMetric(descUnreadable, prometheus.GaugeValue, float64(len(c.st.Unreadable())))
}

// stuckBefore turns the stuck thresholds into cut-off times at now.
func stuckBefore(cfg *config.Config, now time.Time) map[store.HandoffStatus]time.Time {
	out := map[store.HandoffStatus]time.Time{}
	for st, d := range leads.StuckAfter(cfg) {
		out[st] = now.Add(-d)
	}
	return out
}
