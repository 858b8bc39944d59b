package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/placement"
)

// jobMetrics are the job and estimate metrics: histograms and counters fed
// by RunMetrics from the job manager's and the engine's events, and the
// jobs by state, counted at scrape time.
type jobMetrics struct {
	jobs     Jobs
	byState  *prometheus.Desc
	attempts *prometheus.CounterVec
	ooms     *prometheus.CounterVec
	wait     *prometheus.HistogramVec
	process  *prometheus.HistogramVec
	rtf      *prometheus.HistogramVec
	estimate *prometheus.HistogramVec
}

func newJobMetrics(j Jobs) *jobMetrics {
	labels := []string{"model", "backend"}
	return &jobMetrics{
		jobs:    j,
		byState: prometheus.NewDesc("wsched_jobs", "Jobs kept by the daemon, by state.", []string{"state"}, nil),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wsched_job_attempts_total",
			Help: "Job attempts that ended, by outcome (completed, failed, cancelled, retried, oom_retried)."}, []string{"model", "backend", "outcome"}),
		ooms: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wsched_job_oom_retries_total",
			Help: "Job attempts retried with more memory after a CUDA out-of-memory error."}, labels),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wsched_job_queue_wait_seconds",
			Help: "Time a job attempt waited (job queue and memory) before its backend started loading.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 16)}, labels),
		process: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wsched_job_processing_seconds",
			Help: "Time a completed job spent transcribing.", Buckets: prometheus.ExponentialBuckets(0.25, 2, 15)}, labels),
		rtf: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wsched_job_real_time_factor_ratio",
			Help:    "Processing time divided by audio duration of completed jobs (below 1: faster than real time).",
			Buckets: []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 5}}, labels),
		estimate: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wsched_estimate_measured_ratio",
			Help:    "Measured peak GPU memory divided by the estimate, for ended leases the estimator sized (above 1: underestimated).",
			Buckets: []float64{0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1, 1.05, 1.1, 1.25, 1.5, 2}}, []string{"backend", "model"}),
	}
}

func (m *jobMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m, m.attempts, m.ooms, m.wait, m.process, m.rtf, m.estimate}
}

// Describe implements prometheus.Collector (jobs by state).
func (m *jobMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.byState }

// Collect implements prometheus.Collector: jobs by state, from the job
// manager at scrape time (every state, zero included).
func (m *jobMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	all, err := m.jobs.List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(m.byState, fmt.Errorf("list jobs: %w", err))
		return
	}
	n := map[jobs.State]int{}
	for _, j := range all {
		n[j.State]++
	}
	for _, s := range []jobs.State{jobs.Pending, jobs.Loading, jobs.Processing, jobs.Completed, jobs.Failed, jobs.Cancelled} {
		ch <- prometheus.MustNewConstMetric(m.byState, prometheus.GaugeValue, float64(n[s]), string(s))
	}
}

// job records one job event.
func (m *jobMetrics) job(ev jobs.Event) {
	j := ev.Job
	model, backend := j.Spec.Model, j.Backend
	if ev.Outcome != "" {
		m.attempts.WithLabelValues(model, backend, ev.Outcome).Inc()
		if ev.Outcome == jobs.OutcomeOOMRetried {
			m.ooms.WithLabelValues(model, backend).Inc()
		}
	}
	if ev.Type != jobs.EventState {
		return
	}
	switch ev.State {
	case jobs.Loading:
		if t, ok := j.Timings[jobs.Pending]; ok {
			m.wait.WithLabelValues(model, backend).Observe(ev.Time.Sub(t.Entered).Seconds())
		}
	case jobs.Completed:
		t, ok := j.Timings[jobs.Processing]
		if !ok {
			return
		}
		took := ev.Time.Sub(t.Entered)
		m.process.WithLabelValues(model, backend).Observe(took.Seconds())
		if j.Result != nil && j.Result.Duration > 0 {
			m.rtf.WithLabelValues(model, backend).Observe(took.Seconds() / j.Result.Duration.Seconds())
		}
	}
}

// lease records an ended lease the estimator sized: measured peak over
// estimate.
func (m *jobMetrics) lease(ev placement.Event) {
	l := ev.Lease
	if (ev.Type != placement.EventReleased && ev.Type != placement.EventExpired) || l.EstimateKey == nil || l.PeakBytes <= 0 || l.Bytes <= 0 {
		return
	}
	m.estimate.WithLabelValues(string(l.EstimateKey.Backend), l.EstimateKey.Model).Observe(float64(l.PeakBytes) / float64(l.Bytes))
}

// RunMetrics feeds the job and estimate metrics from the job manager's and
// the engine's events until ctx ends; a subscription dropped for falling
// behind is renewed (what it missed is not counted).
func (s *Server) RunMetrics(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := s.followEvents(ctx); err != nil && !errors.Is(err, errLagged) && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

func (s *Server) followEvents(ctx context.Context) error {
	placed, stopPlaced, err := s.eng.Subscribe(ctx, placement.EventReleased, placement.EventExpired) // what jobMetrics.lease counts
	if err != nil {
		return fmt.Errorf("metrics: subscribe to placement events: %w", err)
	}
	defer stopPlaced()
	jobEvents, stopJobs, err := s.jobs.Watch(ctx)
	if err != nil {
		return fmt.Errorf("metrics: watch jobs: %w", err)
	}
	defer stopJobs()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-placed:
			if !ok {
				return errLagged
			}
			s.metrics.jobs.lease(ev)
		case ev, ok := <-jobEvents:
			if !ok {
				return errLagged
			}
			s.metrics.jobs.job(ev)
		}
	}
}

// errLagged ends one round of following events; RunMetrics starts another.
var errLagged = errors.New("event subscription dropped")
