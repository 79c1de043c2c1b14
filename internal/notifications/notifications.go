// Package notifications delivers company notification events (a held email
// awaiting review, a failed send, …) to the company's webhooks: signed
// with the Standard Webhooks scheme (webhook-id, webhook-timestamp,
// webhook-signature), or as Slack-compatible {"text": …} posts. An event
// is recorded in the transaction of the change it reports (EmitTx), so it
// is delivered if and only if that change commits, and delivery is retried
// with backoff for 24 hours with a per-webhook delivery log.
package notifications

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/vault"
)

// Events known at start. Another package may add its own with
// RegisterEvent before the server starts.
const (
	EventReviewRequested = "email.review_requested"
	EventReviewExpired   = "email.review_expired"
	EventSendFailed      = "email.send_failed"
	EventInboxHealth     = "inbox.health_changed"
	EventBudgetExceeded  = "agent.budget_exceeded"
	// EventBounceRateHigh: more than 5 % of an inbox's last 100 sends
	// bounced (at most once per inbox per day while it holds).
	EventBounceRateHigh = "inbox.bounce_rate_high"
)

var (
	eventsMu sync.RWMutex
	// events maps each known event to its one-line summary (the Slack
	// text's first words).
	events = map[string]string{
		EventReviewRequested: "An email is waiting for review",
		EventReviewExpired:   "A held email expired without review",
		EventSendFailed:      "An email could not be sent",
		EventInboxHealth:     "An email inbox's health changed",
		EventBudgetExceeded:  "An agent exceeded its budget",
		EventBounceRateHigh:  "An email inbox's bounce rate is over 5 %",
	}
)

// RegisterEvent adds an event name that webhooks may subscribe to, with the
// summary line a Slack post starts with.
func RegisterEvent(name, summary string) {
	eventsMu.Lock()
	defer eventsMu.Unlock()
	events[name] = summary
}

// Events lists the known event names, sorted.
func Events() []string {
	eventsMu.RLock()
	defer eventsMu.RUnlock()
	out := make([]string, 0, len(events))
	for k := range events {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func summaryOf(event string) (string, bool) {
	eventsMu.RLock()
	defer eventsMu.RUnlock()
	s, ok := events[event]
	return s, ok
}

// Delivery timing: attempts back off from 5 s doubling to an hour, and none
// starts after 24 hours.
const (
	retryWindow = 24 * time.Hour
	minBackoff  = 5 * time.Second
	maxBackoff  = time.Hour
	// requestTimeout bounds one delivery attempt.
	requestTimeout = 15 * time.Second
	// notifyChannel wakes the delivery workers of every replica when an
	// event commits (PostgreSQL).
	notifyChannel = "paperclip_notifications"
)

// Service manages the webhooks and delivers their events.
type Service struct {
	Store *store.Store
	Authz *authz.Service
	Vault *vault.Vault
	Log   *slog.Logger
	// MaxBody bounds a JSON request body of the routes.
	MaxBody int64
	// Work wakes the delivery loop.
	Work notify.Signal

	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Service.
func New(st *store.Store, az *authz.Service, v *vault.Vault, log *slog.Logger, maxBody int64) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{Store: st, Authz: az, Vault: v, Log: log, MaxBody: maxBody, Work: notify.New()}
}

// Webhook is a company notification webhook as the API shows it (the
// secret only in the creation answer).
type Webhook struct {
	ID        string    `json:"id"`
	CompanyID string    `json:"companyId"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Format    string    `json:"format"`
	CreatedAt time.Time `json:"createdAt"`
	// Secret is the signing secret (whsec_…), returned once at creation.
	Secret string `json:"secret,omitempty"`
}

// view is the API's view of a stored webhook (without its secret).
func view(h store.NotificationWebhook) Webhook {
	evs := h.Events
	if evs == nil {
		evs = []string{}
	}
	return Webhook{ID: h.ID, CompanyID: h.CompanyID, URL: h.URL, Events: evs, Format: h.Format, CreatedAt: h.CreatedAt}
}

// EmitTx records event for every webhook of the company subscribed to it,
// inside tx; the delivery loop sends them after commit. Call Notify after
// the commit to wake this process's loop at once.
func (s *Service) EmitTx(ctx context.Context, tx *sql.Tx, companyID, event string, data map[string]any) error {
	if _, ok := summaryOf(event); !ok {
		return fmt.Errorf("emit notification: unknown event %q", event)
	}
	hooks, err := s.Store.ListNotificationWebhooks(ctx, tx, companyID)
	if err != nil {
		return err
	}
	now := s.Store.Now()
	queued := false
	for _, h := range hooks {
		if !slices.Contains(h.Events, event) {
			continue
		}
		payload, _ := json.Marshal(map[string]any{"type": event, "timestamp": now.Format(time.RFC3339Nano), "data": data})
		if err := s.Store.InsertNotificationDelivery(ctx, tx, store.NotificationDelivery{ID: NewDeliveryID(), CompanyID: companyID,
			WebhookID: h.ID, Event: event, Payload: string(payload), CreatedAt: now}); err != nil {
			return err
		}
		queued = true
	}
	if queued {
		return s.Store.DB.NotifyTx(ctx, tx, notifyChannel)
	}
	return nil
}

// Notify wakes the delivery loop (after committing an emitted event).
func (s *Service) Notify() { s.Work.Notify() }

// NewDeliveryID returns a delivery id, which is also the webhook-id header
// of its every attempt: "msg_" and 32 hex digits (store.ValidDeliveryID).
func NewDeliveryID() string { return "msg_" + strings.ReplaceAll(store.NewID(), "-", "") }

// EmitOnChange emits event in one transaction with moving the mark m, and
// only when this call moved it (store.SwapNotificationMark): replicas that
// notice the same change emit it once, and a state flapping inside the
// mark's quiet period is not re-sent. The first sighting of a mark only
// records it unless m.EmitFirst is set. It reports whether it emitted.
func (s *Service) EmitOnChange(ctx context.Context, m store.NotificationMark, event string,
	data func(previous string) map[string]any) (bool, error) {
	// The usual case, nothing changed, costs one read and no write
	// transaction (a watcher asks every minute for every inbox).
	if !m.Repeat {
		if v, err := s.Store.NotificationMarkValue(ctx, s.Store.DB, m.Key); err == nil && v == m.Value {
			return false, nil
		}
	}
	emitted := false
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		emitted = false
		ch, err := s.Store.SwapNotificationMark(ctx, tx, m)
		if err != nil || !ch.Changed {
			return err
		}
		emitted = true
		return s.EmitTx(ctx, tx, m.CompanyID, event, data(ch.Previous))
	})
	if err != nil {
		return false, fmt.Errorf("emit %s: %w", event, err)
	}
	if emitted {
		s.Notify()
	}
	return emitted, nil
}

// EmitOnChangeTx is EmitOnChange inside the caller's transaction: the
// change it reports commits with the event. The caller wakes the delivery
// loop after commit (Notify); where it cannot, NotifyWhenCommitted.
func (s *Service) EmitOnChangeTx(ctx context.Context, tx *sql.Tx, m store.NotificationMark, event string, data map[string]any) (bool, error) {
	ch, err := s.Store.SwapNotificationMark(ctx, tx, m)
	if err != nil || !ch.Changed {
		return false, err
	}
	return true, s.EmitTx(ctx, tx, m.CompanyID, event, data)
}

// NotifyWhenCommitted wakes the delivery loop once the mark key shows the
// value, for an emitter inside a transaction it does not commit itself (a
// heartbeat wake). On PostgreSQL the NOTIFY of EmitTx already wakes every
// replica at commit; on SQLite the loop has no such signal, so this
// watches for the commit (at most 30 s; a rolled-back change never shows).
func (s *Service) NotifyWhenCommitted(key, value string) {
	if s.Store.DB.Dialect == db.Postgres {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for wait := 10 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, time.Second) {
			if v, err := s.Store.NotificationMarkValue(ctx, s.Store.DB, key); err == nil && v == value {
				s.Notify()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}()
}

// Subscribed returns the companies with a webhook subscribed to event.
func (s *Service) Subscribed(ctx context.Context, event string) ([]string, error) {
	return s.Store.CompaniesSubscribedTo(ctx, s.Store.DB, event)
}

// newSecret returns a Standard Webhooks secret: "whsec_" and the base64 of
// 32 random bytes.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// Sign returns the Standard Webhooks signature header value for a message:
// "v1," and the base64 HMAC-SHA256, keyed by the secret's decoded bytes,
// of "<id>.<unix timestamp>.<body>".
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, ts.Unix())
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// sealAAD binds a sealed secret to its webhook row.
func sealAAD(webhookID string) []byte { return []byte("notification-webhook:" + webhookID) }

// backoff is the wait after attempt n (1-based): 5 s doubling, at most an hour.
func backoff(n int) time.Duration {
	d := minBackoff << min(n-1, 20)
	return min(d, maxBackoff)
}

// slackText renders an event as one Slack message.
func slackText(event string, data map[string]any) string {
	summary, _ := summaryOf(event)
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(summary + " (" + event + ")")
	for _, k := range keys {
		b.WriteString("\n• " + k + ": " + fmt.Sprint(data[k]))
	}
	return b.String()
}
