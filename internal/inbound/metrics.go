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
	// SocketMoves counts socket ownership moves seen by this process, by
	// direction: in (it took over an inbox another replica had held), out
	// (it handed one to another replica). See ownership.go.
	SocketMoves *prometheus.CounterVec
	// Renewals counts this process's completed batch lease renewals (one
	// statement each, every SocketRenew while it holds or looks for a
	// lease): tests bound failover in renewal periods with it.
	Renewals prometheus.Counter
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
		SocketMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paperclip_email_socket_moves_total", Help: "WebSocket inboxes this process took over from another replica (in) or handed to one (out).",
		}, []string{"direction"}),
		Renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paperclip_email_lease_renewals_total", Help: "Batch lease renewals this process completed (one statement renews all its receiving leases).",
		}),
	}
	// Both directions exist from the start, so a dashboard's rate() sees
	// the first move.
	m.SocketMoves.WithLabelValues("in")
	m.SocketMoves.WithLabelValues("out")
	if reg != nil {
		reg.MustRegister(m.Admission, m.Processing, m.Wake, m.Deliveries, m.Quarantined, m.SocketMoves, m.Renewals)
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
