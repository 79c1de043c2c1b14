package server

import (
	"context"
	"database/sql"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/notifications"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The state-change notification events, deduplicated
// (docs/email-setup.md, "Notifications"). Each is deduplicated by a notification mark
// (store.SwapNotificationMark): replicas that notice the same change emit
// it once, and a state that flaps inside the mark's quiet period is
// reported once, with the state it settled in.
const (
	// healthQuiet is how long after an inbox.health_changed event the
	// inbox's health is not reported again: a flapping inbox sends at
	// most one event per healthQuiet, then its current health.
	healthQuiet = 10 * time.Minute
	// bounceQuiet is how often an inbox.bounce_rate_high event may repeat
	// for one inbox while its bounce rate stays high.
	bounceQuiet = 24 * time.Hour
	// defaultWatchEvery is how often inbox health is compared with the
	// last reported one.
	defaultWatchEvery = time.Minute
)

// healthWatch emits inbox.health_changed. An inbox's health is computed
// from many facts (its row, leases, secrets, grants, failed runs, bounces:
// email.Service.Summaries), so no one transaction changes it; instead,
// every interval, the health of each inbox of the companies that have a
// webhook subscribed to the event is compared with the inbox's mark.
type healthWatch struct {
	email *email.Service
	notes *notifications.Service
	st    *store.Store
	every time.Duration
	loop  notify.Loop
}

// Start runs the watch until Shutdown.
func (w *healthWatch) Start(context.Context) error {
	w.loop.Start(w.every, nil, w.check)
	return nil
}

// Shutdown stops the watch and waits for it, at most until ctx ends.
func (w *healthWatch) Shutdown(ctx context.Context) error { return w.loop.Stop(ctx) }

// check compares every watched inbox's health with its mark. Drafts are
// not watched (their setup reports itself), nor an inbox that is only
// connecting (a live connection handed between replicas, which the
// catch-up scan covers meanwhile).
func (w *healthWatch) check(ctx context.Context) {
	companies, err := w.notes.Subscribed(ctx, notifications.EventInboxHealth)
	if err != nil {
		if ctx.Err() == nil {
			w.notes.Log.Warn("inbox health watch", "err", err)
		}
		return
	}
	for _, companyID := range companies {
		eps, err := w.st.ListEndpoints(ctx, w.st.DB, companyID)
		if err != nil {
			return
		}
		live := eps[:0]
		for _, e := range eps {
			if e.Status == domain.EndpointActive || e.Status == domain.EndpointPaused {
				live = append(live, e)
			}
		}
		for i, sum := range w.email.Summaries(ctx, live) {
			if ctx.Err() != nil {
				return
			}
			if sum.HealthCode == email.CodeConnecting {
				continue
			}
			ep := live[i]
			state := sum.Health + "/" + sum.HealthCode
			m := store.NotificationMark{CompanyID: companyID, Key: "inbox.health_changed:" + ep.ID, Value: state, Quiet: healthQuiet}
			_, err := w.notes.EmitOnChange(ctx, m, notifications.EventInboxHealth, func(prev string) map[string]any {
				return map[string]any{"endpointId": ep.ID, "address": ep.Address, "health": sum.Health, "code": sum.HealthCode,
					"message": sum.HealthMessage, "previous": prev}
			})
			if err != nil && ctx.Err() == nil {
				w.notes.Log.Warn("inbox health notification", "endpoint", ep.ID, "err", err)
			}
		}
	}
}

// bounceRateHigh is email.Options.BounceRateHigh: it emits
// inbox.bounce_rate_high, at most once per inbox per bounceQuiet across
// every replica (each replica's RulesWorker reports a crossing it sees).
func (s *Server) bounceRateHigh(ctx context.Context, endpointID string, sends, bounced int) {
	if s.Notifications == nil {
		return
	}
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
	if err != nil {
		return
	}
	m := store.NotificationMark{CompanyID: ep.CompanyID, Key: notifications.EventBounceRateHigh + ":" + ep.ID, Value: "high", Quiet: bounceQuiet,
		Repeat: true, EmitFirst: true}
	_, err = s.Notifications.EmitOnChange(ctx, m, notifications.EventBounceRateHigh, func(string) map[string]any {
		return map[string]any{"endpointId": ep.ID, "address": ep.Address, "sends": sends, "bounced": bounced,
			"limitPercent": int(email.BounceRateLimit * 100)}
	})
	if err != nil && ctx.Err() == nil {
		s.Logger.Warn("bounce rate notification", "endpoint", endpointID, "err", err)
	}
}

// budgetExceeded is heartbeat's BudgetExceeded hook: it emits
// agent.budget_exceeded once per agent and month, inside the transaction
// that found the budget spent (a charge or a refused wake).
func (s *Server) budgetExceeded(ctx context.Context, tx *sql.Tx, agent domain.Agent) error {
	if s.Notifications == nil {
		return nil
	}
	key := notifications.EventBudgetExceeded + ":" + agent.ID + ":" + agent.SpendPeriod
	m := store.NotificationMark{CompanyID: agent.CompanyID, Key: key, Value: "exceeded", EmitFirst: true}
	emitted, err := s.Notifications.EmitOnChangeTx(ctx, tx, m, notifications.EventBudgetExceeded, map[string]any{
		"agentId": agent.ID, "agentName": agent.Name, "budgetMonthlyCents": agent.BudgetMonthlyCents,
		"spentMonthlyCents": agent.SpentMonthlyCents, "period": agent.SpendPeriod})
	if err != nil {
		return err
	}
	if emitted {
		s.Notifications.NotifyWhenCommitted(key, m.Value)
	}
	return nil
}
