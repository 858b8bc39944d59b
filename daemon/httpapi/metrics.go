package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wsched/wsched/placement"
)

// viewer gives the engine's published view.
// viewer is what a scrape reads: per-GPU accounts and counts, O(GPUs), no
// lease copied.
type viewer interface {
	Accounts() ([]placement.Account, string)
	Summary() placement.Summary
}

// metrics is the daemon's Prometheus registry: the placement state, read
// from the engine's view at scrape time, and request latency.
type metrics struct {
	eng     viewer
	reg     *prometheus.Registry
	latency *prometheus.HistogramVec

	gpuBytes *prometheus.Desc
	gpuOK    *prometheus.Desc
	leases   *prometheus.Desc
	queue    *prometheus.Desc
	counters map[string]*prometheus.Desc
	jobs     *jobMetrics
}

func newMetrics(eng viewer, j Jobs) *metrics {
	m := &metrics{
		eng: eng, jobs: newJobMetrics(j),
		reg: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wsched_http_request_duration_seconds",
			Help:    "API request latency by route and status (long polls included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"route", "code"}),
		gpuBytes: prometheus.NewDesc("wsched_gpu_memory_bytes",
			"GPU memory by the accounting formula: kind is total, used, free, reserved, usable, foreign, leased or available.",
			[]string{"gpu", "uuid", "name", "kind"}, nil),
		gpuOK: prometheus.NewDesc("wsched_gpu_placeable",
			"1 when the GPU takes leases, 0 when it is unhealthy or MIG-enabled (reason says why).",
			[]string{"gpu", "uuid", "name", "reason"}, nil),
		leases: prometheus.NewDesc("wsched_leases", "Leases by state (granted on GPUs or CPU).", []string{"state", "device"}, nil),
		queue:  prometheus.NewDesc("wsched_queue_length", "Requests waiting for memory, by priority.", []string{"priority"}, nil),
		counters: map[string]*prometheus.Desc{
			"requests":   prometheus.NewDesc("wsched_requests_total", "Lease requests received.", nil, nil),
			"grants":     prometheus.NewDesc("wsched_grants_total", "Leases granted.", nil, nil),
			"rejections": prometheus.NewDesc("wsched_rejections_total", "Requests rejected (no fit, queue full, timeout, cancelled, invalid).", nil, nil),
			"releases":   prometheus.NewDesc("wsched_releases_total", "Leases released.", nil, nil),
			"expiries":   prometheus.NewDesc("wsched_expiries_total", "Leases expired without renewal.", nil, nil),
			"overruns":   prometheus.NewDesc("wsched_overruns_total", "Holders seen using more than their lease.", nil, nil),
			"renewals":   prometheus.NewDesc("wsched_renewals_total", "Lease renewals.", nil, nil),
			"commits":    prometheus.NewDesc("wsched_journal_commits_total", "Durable commits (fdatasync) of the lease journal.", nil, nil),
			"changes":    prometheus.NewDesc("wsched_journal_changes_total", "Lease changes made durable by those commits (group commit).", nil, nil),
		},
	}
	m.reg.MustRegister(m, m.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.jobs.collectors()...)
	return m
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.gpuBytes
	ch <- m.gpuOK
	ch <- m.leases
	ch <- m.queue
	for _, d := range m.counters {
		ch <- d
	}
}

// Collect implements prometheus.Collector from the engine's published
// accounts and summary.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	accts, _ := m.eng.Accounts()
	sum := m.eng.Summary()
	gauge := func(d *prometheus.Desc, val float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, labels...)
	}
	for _, g := range accts {
		idx := strconv.Itoa(g.Index)
		for kind, val := range map[string]int64{
			"total": g.TotalBytes, "used": g.UsedBytes, "free": g.FreeBytes, "reserved": g.ReservedBytes,
			"usable": g.UsableBytes, "foreign": g.ForeignBytes, "leased": g.LeasedBytes, "available": g.AvailableOrZero(),
		} {
			gauge(m.gpuBytes, float64(val), idx, g.UUID, g.Name, kind)
		}
		ok := 0.0
		if g.Placeable {
			ok = 1
		}
		gauge(m.gpuOK, ok, idx, g.UUID, g.Name, g.Reason)
	}
	gauge(m.leases, float64(sum.Leases-sum.CPULeases), "granted", "gpu")
	gauge(m.leases, float64(sum.CPULeases), "granted", "cpu")
	gauge(m.leases, float64(sum.Queued), "queued", "")
	for p, n := range sum.QueuedBy {
		gauge(m.queue, float64(n), p)
	}
	st := sum.Stats
	for name, val := range map[string]uint64{
		"requests": st.Requests, "grants": st.Grants, "rejections": st.Rejections, "releases": st.Releases,
		"expiries": st.Expiries, "overruns": st.Overruns, "renewals": st.Renewals,
		"commits": st.Commits, "changes": st.CommittedChanges,
	} {
		ch <- prometheus.MustNewConstMetric(m.counters[name], prometheus.CounterValue, float64(val))
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// instrument records each request's latency under its route pattern.
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.latency.WithLabelValues(route, strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status code; Unwrap keeps flushing (SSE)
// working through http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
