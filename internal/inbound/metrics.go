package inbound

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the inbound pipeline's stage measurements. They keep the
// three stages apart so provider transit, our pipeline and model start-up
// can be told apart (docs/email-pipeline.md, "Provider errors and diagnostics"):
// admission is the durable insert, processing runs from admission to the
// committed retention, and wake runs from admission to the committed wake
// request (the same figure as a delivery's admission_to_wake_ms).
type Metrics struct {
	// Admission observes the time to durably admit one event, by source
	// (websocket, webhook, catchup).
	Admission *prometheus.HistogramVec
	// Processing observes admission → mail retained (the receiving
	// transaction committed).
	Processing prometheus.Histogram
	// Wake observes admission → wake request committed.
	Wake prometheus.Histogram
	// Deliveries counts finished deliveries by outcome (processed,
	// filtered, retry, duplicate).
	Deliveries *prometheus.CounterVec
	// Quarantined counts received mail quarantined, by reason.
	Quarantined *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg when reg is
// not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 20)
	m := &Metrics{
		Admission: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "paperclip_email_admission_seconds", Help: "Time to durably admit one inbound email event, by source.",
			Buckets: buckets,
		}, []string{"source"}),
		Processing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paperclip_email_processing_seconds", Help: "Time from admission (received_at) to the email being retained on its task.",
			Buckets: buckets,
		}),
		Wake: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paperclip_email_admission_to_wake_seconds", Help: "Time from admission (received_at) to the agent's wake request being recorded.",
			Buckets: buckets,
		}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paperclip_email_deliveries_total", Help: "Inbound email deliveries by outcome.",
		}, []string{"outcome"}),
		Quarantined: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paperclip_email_quarantined_total", Help: "Received email that did not become work, by quarantine reason.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.Admission, m.Processing, m.Wake, m.Deliveries, m.Quarantined)
	}
	return m
}

// ConnectedSockets returns how many of this process's live connections
// are subscribed now (the sockets gauge).
func (w *Worker) ConnectedSockets() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.sockets {
		if s.connected {
			n++
		}
	}
	return n
}
