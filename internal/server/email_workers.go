package server

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/outbound"
)

// Environment overrides of the inbound timing, for tests and drills that
// must see lease expiry, catch-up or reconnects within seconds. Production
// leaves them unset (reference timing: 90 s leases renewed every 20 s,
// catch-up every 60 s, reconnect backoff 2 s…60 s).
const (
	envEmailLeaseTTL        = "PAPERCLIP_EMAIL_LEASE_TTL"
	envEmailCatchupInterval = "PAPERCLIP_EMAIL_CATCHUP_INTERVAL"
	envEmailReconnectMin    = "PAPERCLIP_EMAIL_RECONNECT_MIN"
)

// inboundTiming reads the optional timing overrides. A lease TTL override
// also scales the renewal period to the reference ratio (20 s of 90 s).
func inboundTiming() (inbound.Timing, error) {
	var t inbound.Timing
	parse := func(name string) (time.Duration, error) {
		v := os.Getenv(name)
		if v == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%s must be a positive duration such as 5s", name)
		}
		return d, nil
	}
	ttl, err := parse(envEmailLeaseTTL)
	if err != nil {
		return t, err
	}
	if ttl > 0 {
		t.SocketLeaseTTL, t.ThreadLeaseTTL = ttl, ttl
		t.SocketRenew = max(ttl*2/9, 100*time.Millisecond)
	}
	if t.CatchupInterval, err = parse(envEmailCatchupInterval); err != nil {
		return t, err
	}
	if t.ReconnectMin, err = parse(envEmailReconnectMin); err != nil {
		return t, err
	}
	return t, nil
}

// startEmailWorkers builds and starts the inbound email pipeline: the
// worker, its webhook route, the setup service's start/stop callbacks and
// the hooks through which outbound sees receipts and our own sent mail.
func (s *Server) startEmailWorkers(ctx context.Context, exclusive bool) error {
	timing, err := inboundTiming()
	if err != nil {
		return err
	}
	cfg := s.Config
	amClient := s.Email.Client
	w := inbound.New(inbound.Options{
		Store: s.Store, Email: s.Email, Heartbeat: s.Heartbeat, Client: amClient,
		WebSocketURL: cfg.AgentMailWSURL, Attachments: s.attachments,
		Logger: s.Logger.With("component", "inbound"), Metrics: inbound.NewMetrics(s.Metrics.Registry),
		Holder: s.Heartbeat.RunnerID(), ExclusiveDatabase: exclusive, Timing: timing,
	})
	if s.Outbound != nil {
		ob := s.Outbound
		if timing.ThreadLeaseTTL > 0 {
			ob.LeaseTTL = timing.ThreadLeaseTTL
		}
		w.SetReceiptHandler(func(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, ev agentmail.Event, m *agentmail.Message) error {
			var sent *outbound.SentMessage
			if m != nil {
				sent = &outbound.SentMessage{MessageID: m.MessageID, ThreadID: m.ThreadID, From: m.From, Labels: m.Labels, Headers: m.Headers}
			}
			return ob.HandleReceipt(ctx, tx, ep, ev, sent)
		})
		w.SetSentMessageHandler(func(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, m *agentmail.Message) error {
			return ob.BindSent(ctx, tx, ep, outbound.SentMessage{MessageID: m.MessageID, ThreadID: m.ThreadID,
				From: m.From, Labels: m.Labels, Headers: m.Headers})
		})
		ob.Admit = func(ctx context.Context, endpointID string, ev agentmail.Event) error {
			ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
			if err != nil {
				return err
			}
			_, err = w.AdmitEvent(ctx, ep, ev, "outbound")
			return err
		}
	}
	s.Inbound = w
	s.Email.OnActivated = func(id string) {
		w.EndpointActivated(id)
		// Queued sends of a resumed inbox can go now.
		if s.Outbound != nil {
			s.Outbound.Notify()
		}
	}
	s.Email.OnStopped = w.EndpointStopped
	w.Routes(s.API)
	return w.Start(ctx)
}

// stopEmailWorkers stops the inbound pipeline, closing this process's
// sockets and releasing only its own leases, before the database closes.
func (s *Server) stopEmailWorkers(ctx context.Context) error {
	if s.Inbound == nil {
		return nil
	}
	return s.Inbound.Shutdown(ctx)
}
