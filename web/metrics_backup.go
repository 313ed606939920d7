package web

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// offsiteMetrics are the offsite copies' metrics: a counter by result and,
// once a copy has been verified, the time and size of the last good one.
// They live apart from the rest of Metrics so that each half can change
// without the other.
type offsiteMetrics struct {
	total *prometheus.CounterVec
	// pruneFailed counts the prunes after a verified copy that failed:
	// the copy counts as ok, the old copies past keep are still there.
	pruneFailed prometheus.Counter

	mu       sync.Mutex
	lastOK   time.Time // zero: none since the start
	lastSize int64
	lastName string
	last     float64 // 1 ok, 0 failed, -1 none yet
	lastErr  string
	pruneErr string // the last prune's failure; "" after a good one
	now      func() time.Time
}

var (
	descOffsiteTime = prometheus.NewDesc("handoff_offsite_backup_last_success_timestamp_seconds",
		"Unix time of the newest offsite copy that was uploaded and verified (absent before the first); after a restart, the newest copy the bucket holds a verification record for.", nil, nil)
	descOffsiteAge = prometheus.NewDesc("handoff_offsite_backup_age_seconds",
		"Seconds since the newest offsite copy that was uploaded and verified (absent before the first).", nil, nil)
	descOffsiteSize = prometheus.NewDesc("handoff_offsite_backup_last_success_bytes",
		"Size of the last offsite copy that was uploaded and verified (absent before the first).", nil, nil)
	descOffsiteLast = prometheus.NewDesc("handoff_offsite_backup_last_result",
		"Result of the last offsite copy: 1 ok, 0 failed, -1 none yet.", nil, nil)
)

func newOffsiteMetrics(reg *prometheus.Registry, now func() time.Time) *offsiteMetrics {
	if now == nil {
		now = time.Now
	}
	o := &offsiteMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_offsite_backups_total", Help: "Offsite copies of backups by result (ok: uploaded and verified).",
		}, []string{"result"}),
		pruneFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "handoff_offsite_prune_failures_total", Help: "Prunes of the old offsite copies (past backups.target keep) that failed after a verified copy.",
		}),
		last: -1,
		now:  now,
	}
	reg.MustRegister(o.total, o.pruneFailed, o)
	return o
}

// Describe implements prometheus.Collector.
func (o *offsiteMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOffsiteTime
	ch <- descOffsiteAge
	ch <- descOffsiteSize
	ch <- descOffsiteLast
}

// Collect implements prometheus.Collector.
func (o *offsiteMetrics) Collect(ch chan<- prometheus.Metric) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.lastOK.IsZero() {
		ch <- prometheus.MustNewConstMetric(descOffsiteTime, prometheus.GaugeValue, float64(o.lastOK.UnixMilli())/1000)
		ch <- prometheus.MustNewConstMetric(descOffsiteAge, prometheus.GaugeValue, o.now().Sub(o.lastOK).Seconds())
		ch <- prometheus.MustNewConstMetric(descOffsiteSize, prometheus.GaugeValue, float64(o.lastSize))
	}
	ch <- prometheus.MustNewConstMetric(descOffsiteLast, prometheus.GaugeValue, o.last)
}

// OffsiteStatus is how the offsite copies went since the start.
type OffsiteStatus struct {
	LastOK   time.Time // zero: none yet
	LastSize int64
	LastName string
	Result   float64 // 1 ok, 0 failed, -1 none yet
	Err      string  // the last failure, when Result is 0
	PruneErr string  // why the last prune of the old copies failed; "" when it did not
}

// Offsite records one offsite copy: ok with the copy's name, size and
// time, or failed with its error.
func (m *Metrics) Offsite(ok bool, name string, size int64, at time.Time, err error) {
	if m == nil {
		return
	}
	o := m.offsite
	o.mu.Lock()
	defer o.mu.Unlock()
	if ok {
		o.total.WithLabelValues("ok").Inc()
		o.lastOK, o.lastSize, o.lastName, o.last, o.lastErr = at, size, name, 1, ""
		return
	}
	o.total.WithLabelValues("failed").Inc()
	o.last = 0
	if err != nil {
		o.lastErr = err.Error()
	}
}

// OffsitePrune records the prune that follows a verified copy: nil clears
// the last prune failure, an error counts one and is shown until the next
// good prune. The copy itself was recorded by Offsite.
func (m *Metrics) OffsitePrune(err error) {
	if m == nil {
		return
	}
	o := m.offsite
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.pruneErr = ""
		return
	}
	o.pruneFailed.Inc()
	o.pruneErr = err.Error()
}

// RestoreLastOffsite sets the last good offsite copy found in the bucket
// at start (the newest with a verification record, never merely the
// newest listed), without counting a copy.
func (m *Metrics) RestoreLastOffsite(name string, size int64, at time.Time) {
	o := m.offsite
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastOK, o.lastSize, o.lastName, o.last = at, size, name, 1
}

// OffsiteStatus is the offsite copies' state for the backups page.
func (m *Metrics) OffsiteStatus() OffsiteStatus {
	o := m.offsite
	o.mu.Lock()
	defer o.mu.Unlock()
	return OffsiteStatus{LastOK: o.lastOK, LastSize: o.lastSize, LastName: o.lastName, Result: o.last, Err: o.lastErr, PruneErr: o.pruneErr}
}
