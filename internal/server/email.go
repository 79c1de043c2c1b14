package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/inbound/receive"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/outbound"
	"github.com/paperclipai/paperclipai/internal/policy"
)

// The receiving pipeline's two consumer-side interfaces, met by the send
// side and the heartbeat.
var (
	_ receive.Receipts = (*outbound.Service)(nil)
	_ receive.Waker    = (*heartbeat.Service)(nil)
)

// newEmailChannel builds the two email pipelines around s.Email and mounts
// their routes. The couplings are all here, as constructor options:
//
//   - the email service signals receiveWork and sendWork when an inbox
//     starts or stops (email.Options.Changed);
//   - the send side admits its own sent message into the receiving queue
//     (queue.AdmitTx, inside the send's transaction) and then signals
//     receiveWork (outbound.Options.InboundWork);
//   - receiving hands receipts and our own sent messages to the send side
//     (inbound.Options.Receipts is the outbound Service) and wakes agents
//     through the heartbeat (inbound.Options.Wake).
func (s *Server) newEmailChannel(az *authz.Service, client *agentmail.Client, holder string, exclusive bool,
	receiveWork, sendWork notify.Signal) {
	cfg := s.Config
	timing := inboundTiming(cfg)
	s.Outbound = outbound.New(outbound.Options{Store: s.Store, Email: s.Email, Authz: az, Policy: &policy.Service{Store: s.Store},
		Client: client, Attachments: s.attachments,
		Log: s.Logger.With("component", "outbound"), Holder: holder, Work: sendWork, InboundWork: receiveWork,
		LeaseTTL: timing.ThreadLeaseTTL, Metrics: outbound.NewMetrics(s.Metrics.Registry), Wake: s.Heartbeat,
		Events: s.Notifications})
	s.SendWorker = outbound.NewWorker(s.Outbound)
	s.Inbound = inbound.New(inbound.Options{
		Store: s.Store, Email: s.Email, Wake: s.Heartbeat, Receipts: s.Outbound, Work: receiveWork, Client: client,
		WebSocketURL: cfg.AgentMailWSURL, Attachments: s.attachments,
		Logger: s.Logger.With("component", "inbound"), Metrics: inbound.NewMetrics(s.Metrics.Registry),
		Holder: holder, ExclusiveDatabase: exclusive, Timing: timing,
	})
	s.API.MountEmail(s.Email)
	s.API.MountOutbound(s.Outbound)
	api.InboundRoutes(s.API, s.Inbound, s.Email, s.Store)
	s.registerEmailMetrics()
	rules := email.NewRulesWorker(s.Email)
	if cfg.NotificationWatchInterval > 0 {
		rules.BounceEvery = cfg.NotificationWatchInterval
	}
	s.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paperclip_email_bounce_rate_high_inboxes",
		Help: "Active inboxes of which more than 5 % of the last 100 sends bounced (checked every minute by this process)."},
		func() float64 { return float64(rules.HighBounceInboxes()) }))
	s.workers = append(s.workers, s.Inbound, s.SendWorker, rules)
}

// inboundTiming applies the configuration's email timing overrides. A
// lease TTL override sets the socket and the thread leases alike and
// renews every third of it (the default thread lease's ratio, 1 s of
// 3 s); unset, sockets hold 6 s and threads 3 s, renewed every second.
func inboundTiming(cfg config.Config) inbound.Timing {
	var t inbound.Timing
	if ttl := cfg.EmailLeaseTTL; ttl > 0 {
		t.SocketLeaseTTL, t.ThreadLeaseTTL = ttl, ttl
		t.SocketRenew = max(ttl/3, 100*time.Millisecond)
	}
	t.CatchupInterval, t.ReconnectMin = cfg.EmailCatchupInterval, cfg.EmailReconnectMin
	return t
}
