package outbound

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Metrics are the send side's stage measurements (docs/operations.md).
// Outcome changes are counted when the statement making them runs, inside
// its transaction: a transaction that then rolls back (rare) has still
// counted.
type Metrics struct {
	// AcceptedToSent observes acceptance → the provider accepted the send.
	AcceptedToSent prometheus.Histogram
	// SentToDelivered observes the provider accepting the send → its
	// delivery receipt.
	SentToDelivered prometheus.Histogram
	// Sends counts sends accepted and outcome changes, by outcome
	// (accepted, sent, delivered, failed, uncertain).
	Sends *prometheus.CounterVec
	// Receipts counts the provider receipts applied to sends, by event
	// type (message.sent, message.delivered, message.bounced, …).
	Receipts *prometheus.CounterVec
	// ReviewWait observes how long held sends waited for their decision,
	// by decision (approved, rejected, expired).
	ReviewWait *prometheus.HistogramVec
}

// NewMetrics creates the collectors and registers them with reg when reg
// is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		AcceptedToSent: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paperclip_email_send_accepted_to_sent_seconds", Help: "Time from a send's acceptance to the provider accepting it.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 18),
		}),
		SentToDelivered: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paperclip_email_send_sent_to_delivered_seconds", Help: "Time from the provider accepting a send to its delivery receipt.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
		}),
		Sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paperclip_email_sends_total", Help: "Email sends accepted (outcome=accepted) and send outcome changes, by outcome.",
		}, []string{"outcome"}),
		Receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paperclip_email_send_receipts_total", Help: "Provider receipts applied to sends, by event type.",
		}, []string{"kind"}),
		ReviewWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "paperclip_email_review_wait_seconds", Help: "Time a held send waited for review, by decision (approved, rejected, expired).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 20),
		}, []string{"decision"}),
	}
	// Every decision's series exists from the start, so dashboards and
	// the documented metric list see it before the first review.
	for _, d := range []string{"approved", "rejected", "expired"} {
		m.ReviewWait.WithLabelValues(d)
	}
	if reg != nil {
		reg.MustRegister(m.AcceptedToSent, m.SentToDelivered, m.Sends, m.Receipts, m.ReviewWait)
	}
	return m
}

// setOutcome writes a send's outcome (see store.SetSendOutcome) and counts
// it when it changed.
func (s *Service) setOutcome(ctx context.Context, q db.Querier, id string, outcome domain.SendOutcome, from ...domain.SendOutcome) (bool, error) {
	changed, err := s.Store.SetSendOutcome(ctx, q, id, outcome, from...)
	if err == nil && changed {
		s.Metrics.Sends.WithLabelValues(string(outcome)).Inc()
	}
	return changed, err
}

// observeDelivered records sent → delivered for a send whose delivery
// receipt was just applied.
func (s *Service) observeDelivered(pub store.EmailPublication) {
	if pub.PublishedAt != nil {
		s.Metrics.SentToDelivered.Observe(max(s.Store.Now().Sub(*pub.PublishedAt), 0).Seconds())
	}
}
