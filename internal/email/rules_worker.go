package email

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/store"
)

// RulesWorker is the background side of "who may write to an agent": it
// syncs pending sender rules to AgentMail (durably: the state is in the
// database, so a sync cut short by a crash is retried by any replica),
// checks synced rules for drift, and purges quarantined content older than
// PAPERCLIP_QUARANTINE_DAYS.
type RulesWorker struct {
	s *Service
	// Interval is the loop's tick (default 5 s); a rules change wakes the
	// worker at once (Options.RulesChanged). The database is read only
	// when work may be due: at a failed sync's next attempt, or after
	// recheckTicks ticks (another replica's change, a sync cut short).
	Interval time.Duration
	// DriftEvery is how often each synced inbox is checked for drift
	// (default 1 hour).
	DriftEvery time.Duration
	// BounceEvery is how often the bounce rates are checked (default 1
	// minute).
	BounceEvery time.Duration

	loop notify.Loop
	// high holds the inboxes whose bounce rate was over the limit at the
	// last check (loop goroutine only); highCount is its size, for the
	// paperclip_email_bounce_rate_high_inboxes gauge.
	high      map[string]bool
	highCount atomic.Int64
	// syncAt and driftAt are when syncDue and checkDrift next read the
	// database (loop goroutine only; zero: at the next tick).
	syncAt, driftAt time.Time
	// seenEpoch is the Service's rulesEpoch at the last round (loop
	// goroutine only).
	seenEpoch int64
}

// recheckTicks is how many ticks an idle worker waits before reading the
// database again (one minute by default). Why not every tick: an idle
// cluster should issue almost no statements, and a rules change on this
// replica wakes the worker anyway; the recheck is for changes made on
// other replicas, whose own worker normally syncs them.
const recheckTicks = 12

// HighBounceInboxes is how many active inboxes had a bounce rate over
// BounceRateLimit at the last check.
func (w *RulesWorker) HighBounceInboxes() int64 { return w.highCount.Load() }

// NewRulesWorker returns the worker of s.
func NewRulesWorker(s *Service) *RulesWorker {
	return &RulesWorker{s: s, Interval: 5 * time.Second, DriftEvery: time.Hour, BounceEvery: time.Minute}
}

// Start runs the worker until Shutdown: every round syncs due rules and
// checks drift, the bounce rates every BounceEvery and the quarantine
// purge every hour; a rules change starts a round at once.
func (w *RulesWorker) Start(context.Context) error {
	var lastPurge, lastBounce time.Time
	w.loop.Start(min(w.Interval, w.BounceEvery), w.s.RulesChanged, func(ctx context.Context) {
		// A rules change on this replica since the last round: sync now,
		// whatever syncAt planned.
		if e := w.s.rulesEpoch.Load(); e != w.seenEpoch {
			w.seenEpoch = e
			w.syncAt = time.Time{}
		}
		w.syncDue(ctx)
		w.checkDrift(ctx)
		if time.Since(lastBounce) > w.BounceEvery {
			lastBounce = time.Now()
			w.checkBounces(ctx)
		}
		if time.Since(lastPurge) > time.Hour {
			lastPurge = time.Now()
			w.purge(ctx)
		}
	})
	return nil
}

// Shutdown stops the worker and waits for it, at most until ctx ends.
func (w *RulesWorker) Shutdown(ctx context.Context) error { return w.loop.Stop(ctx) }

// rulesLeaseKey serializes the syncs of one inbox across replicas: two
// concurrent syncs of different versions could otherwise interleave their
// list writes and leave AgentMail with the older version marked current.
const rulesLeaseKey = "email-rules"

// syncDue syncs every inbox whose rules wait, each under its lease.
func (w *RulesWorker) syncDue(ctx context.Context) {
	s := w.s
	if time.Now().Before(w.syncAt) {
		return
	}
	const page = 50
	due, err := s.Store.DueSenderRules(ctx, s.Store.DB, page)
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Warn("read due sender rules", "err", err)
		}
		return
	}
	defer w.planSync(ctx, len(due) == page)
	for _, row := range due {
		if ctx.Err() != nil {
			return
		}
		w.underLease(ctx, row.CompanyID, row.EndpointID, func() {
			// Re-read under the lease: another replica may have synced it.
			cur, err := s.Store.GetSenderRules(ctx, s.Store.DB, row.EndpointID)
			if err != nil || cur.SyncState == store.RulesSynced {
				return
			}
			if err := s.SyncSenderRules(ctx, cur); err != nil && ctx.Err() == nil {
				s.Log.Warn("record sender rules sync", "endpoint", row.EndpointID, "err", err)
			}
		})
	}
}

// planSync sets when syncDue next reads the database: at the next tick
// after a full page, else at the earliest retry waiting, at the latest
// after recheckTicks ticks.
func (w *RulesWorker) planSync(ctx context.Context, more bool) {
	if more {
		w.syncAt = time.Time{}
		return
	}
	w.syncAt = time.Now().Add(recheckTicks * w.Interval)
	next, err := w.s.Store.NextSenderRulesRetry(ctx, w.s.Store.DB)
	if err != nil {
		w.syncAt = time.Time{}
		return
	}
	if next != nil {
		// The store's clock may differ from the process's (tests move it):
		// count the wait from the store's now.
		if at := time.Now().Add(next.Sub(w.s.Store.Now())); at.Before(w.syncAt) {
			w.syncAt = at
		}
	}
}

func (w *RulesWorker) underLease(ctx context.Context, companyID, endpointID string, fn func()) {
	s := w.s
	l, _, err := s.Store.TryLease(ctx, s.Store.DB, companyID, endpointID, rulesLeaseKey, s.Holder, 2*time.Minute)
	if err != nil || l == nil {
		return
	}
	defer func() { _ = l.Release(ctx) }()
	fn()
}

// checkDrift compares the synced rules of inboxes not checked for
// DriftEvery with AgentMail's lists.
func (w *RulesWorker) checkDrift(ctx context.Context) {
	s := w.s
	if time.Now().Before(w.driftAt) {
		return
	}
	const page = 20
	rows, err := s.Store.SenderRulesToCheck(ctx, s.Store.DB, s.Store.Now().Add(-w.DriftEvery), page)
	if err != nil {
		return
	}
	if len(rows) < page {
		w.driftAt = time.Now().Add(min(w.DriftEvery, recheckTicks*w.Interval))
	} else {
		w.driftAt = time.Time{}
	}
	for _, row := range rows {
		ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, row.EndpointID)
		if err != nil || ctx.Err() != nil {
			return
		}
		if err := s.CheckDrift(ctx, ep); err != nil {
			// Checked: try again at the next period, not every round.
			_ = s.Store.SetSenderRulesDrift(ctx, s.Store.DB, ep.ID, row.Drift)
		}
	}
}

func (w *RulesWorker) purge(ctx context.Context) {
	s := w.s
	days := s.Config.QuarantineDays
	if days <= 0 {
		days = 30
	}
	n, err := s.Store.PurgeQuarantine(ctx, s.Store.DB, s.Store.Now().AddDate(0, 0, -days))
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Warn("purge quarantine", "err", err)
		}
		return
	}
	if n > 0 {
		s.Log.Info("purged quarantined email content", "messages", n, "days", days)
	}
}

// checkBounces recomputes which active inboxes bounce too much. An inbox
// that crosses the limit (as this process sees it) is logged and handed to
// Options.BounceRateHigh, which emits the inbox.bounce_rate_high
// notification event, deduplicated across replicas.
func (w *RulesWorker) checkBounces(ctx context.Context) {
	s := w.s
	rates, err := s.Store.ActiveBounceRates(ctx, s.Store.DB, BounceSendError, BounceWindow)
	if err != nil {
		return
	}
	now := map[string]bool{}
	for _, b := range rates {
		if !bounceHigh(b.Sends, b.Bounced) {
			continue
		}
		now[b.EndpointID] = true
		if !w.high[b.EndpointID] {
			s.Log.Warn("inbox bounce rate high", "endpoint", b.EndpointID, "sends", b.Sends, "bounced", b.Bounced)
			if s.BounceRateHigh != nil {
				s.BounceRateHigh(ctx, b.EndpointID, b.Sends, b.Bounced)
			}
		}
	}
	w.high = now
	w.highCount.Store(int64(len(now)))
}
