// Package metrics holds the process's Prometheus collectors on a private
// registry served at /metrics.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the server's collectors.
type Metrics struct {
	Registry     *prometheus.Registry
	HTTPRequests *prometheus.CounterVec
	HTTPDuration *prometheus.HistogramVec
	RunsStarted  prometheus.Counter
	RunsFinished *prometheus.CounterVec
	WakeToStart  prometheus.Histogram
	RunDuration  prometheus.Histogram
}

// New registers and returns the collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paperclip_http_requests_total", Help: "API requests by route pattern, method, status code and via (http: from the network; in_process: the web UI's own calls).",
		}, []string{"route", "method", "code", "via"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "paperclip_http_request_duration_seconds", Help: "API request latency by route pattern and via.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "via"}),
		RunsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paperclip_heartbeat_runs_started_total", Help: "Heartbeat runs started by this process.",
		}),
		RunsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paperclip_heartbeat_runs_finished_total", Help: "Heartbeat runs finished by this process, by status.",
		}, []string{"status"}),
		WakeToStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paperclip_heartbeat_wake_to_start_seconds", Help: "Time from a run being queued to it starting.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}),
		RunDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paperclip_heartbeat_run_duration_seconds", Help: "Run execution time.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 18),
		}),
	}
	r.MustRegister(m.HTTPRequests, m.HTTPDuration, m.RunsStarted, m.RunsFinished, m.WakeToStart, m.RunDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}
