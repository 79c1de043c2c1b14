package server

import (
	"context"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// registerEmailMetrics adds the email channel's gauges (docs/operations.md):
// this process's subscribed and held sockets, its share of them, and the database's inboxes by status,
// waiting deliveries and open sends, read at scrape time.
func (s *Server) registerEmailMetrics() {
	inb := s.Inbound
	s.Metrics.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paperclip_email_sockets_connected",
			Help: "Live AgentMail WebSocket connections of this process that are subscribed now."},
			func() float64 { return float64(inb.ConnectedSockets()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paperclip_email_sends_held",
			Help: "Sends held for review now, all companies (a database count: aggregate replicas with max())."},
			func() float64 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				n, err := s.Store.CountHeldSends(ctx, s.Store.DB)
				if err != nil {
					return math.NaN()
				}
				return float64(n)
			}),
		// Per-replica balance (docs/architecture.md, "Inbound email", the
		// stable socket ownership item): each replica reports its own
		// sockets and share.
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paperclip_email_sockets_held",
			Help: "WebSocket inboxes whose live connection this process holds (socket lease taken), subscribed or not."},
			func() float64 { held, _, _ := inb.SocketShare(); return float64(held) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paperclip_email_socket_fair_share",
			Help: "Active WebSocket inboxes divided among the live replicas, rounded up: this process's fair share of sockets."},
			func() float64 { _, fair, _ := inb.SocketShare(); return float64(fair) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paperclip_email_socket_share_cap",
			Help: "The most sockets this process takes: its fair share plus a slack of one and 2 %."},
			func() float64 { _, _, bound := inb.SocketShare(); return float64(bound) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paperclip_email_replicas_live",
			Help: "Live replicas sharing the sockets, this one included, as this process last counted them."},
			func() float64 { return float64(inb.LiveReplicas()) }),
		newEmailStatsCollector(s.Store),
	)
}

// emailStatsCollector exports store.EmailStats. Every replica reports the
// same database counts: aggregate them with max(), not sum().
type emailStatsCollector struct {
	st                                   *store.Store
	up, inboxes, deliveries, deliveryAge *prometheus.Desc
	sends, sendAge                       *prometheus.Desc
}

func newEmailStatsCollector(st *store.Store) *emailStatsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &emailStatsCollector{st: st,
		up:          d("paperclip_email_stats_up", "1 when the email counts below were read from the database at this scrape, else 0."),
		inboxes:     d("paperclip_email_inboxes", "Email inboxes by status and receive mode.", "status", "mode"),
		deliveries:  d("paperclip_email_deliveries_waiting", "Inbound deliveries not finished yet, by state.", "state"),
		deliveryAge: d("paperclip_email_delivery_oldest_waiting_seconds", "Age of the oldest unfinished inbound delivery in a state (0 when none).", "state"),
		sends:       d("paperclip_email_sends_open", "Sends not settled yet, by outcome (queued, uncertain).", "outcome"),
		sendAge:     d("paperclip_email_send_oldest_open_seconds", "Age of the oldest unsettled send with an outcome (0 when none).", "outcome"),
	}
}

// Describe implements prometheus.Collector.
func (c *emailStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.inboxes, c.deliveries, c.deliveryAge, c.sends, c.sendAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A database error reports
// paperclip_email_stats_up 0 instead of failing the whole scrape.
func (c *emailStatsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.st.EmailStats(ctx, c.st.DB)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, status := range []string{domain.EndpointDraft, domain.EndpointActive, domain.EndpointPaused, domain.EndpointArchived} {
		for _, mode := range []string{domain.ReceiveWebSocket, domain.ReceiveWebhook} {
			ch <- prometheus.MustNewConstMetric(c.inboxes, prometheus.GaugeValue, float64(st.Inboxes[status][mode]), status, mode)
		}
	}
	now := c.st.Now()
	age := func(t time.Time, ok bool) float64 {
		if !ok {
			return 0
		}
		return max(now.Sub(t), 0).Seconds()
	}
	for _, state := range store.WaitingDeliveryStates {
		ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.GaugeValue, float64(st.Deliveries[state]), state)
		t, ok := st.OldestDelivery[state]
		ch <- prometheus.MustNewConstMetric(c.deliveryAge, prometheus.GaugeValue, age(t, ok), state)
	}
	for _, outcome := range store.OpenSendOutcomes {
		ch <- prometheus.MustNewConstMetric(c.sends, prometheus.GaugeValue, float64(st.Sends[outcome]), outcome)
		t, ok := st.OldestSend[outcome]
		ch <- prometheus.MustNewConstMetric(c.sendAge, prometheus.GaugeValue, age(t, ok), outcome)
	}
}
