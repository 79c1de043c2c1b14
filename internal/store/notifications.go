package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
)

// Company notification webhooks, their delivery log (the durable outbox of
// notification events) and the marks that deduplicate state-change events
// (migrations 00026 and 00031; internal/notifications delivers them).

// NotificationWebhook is one company notification webhook as stored: the
// signing secret only sealed by the vault.
type NotificationWebhook struct {
	ID        string
	CompanyID string
	URL       string
	Events    []string
	// Format is "standard" (Standard Webhooks JSON) or "slack".
	Format       string
	SecretSealed string
	// PrivateAllowed is set when an instance administrator pointed the
	// webhook at an address that is not public.
	PrivateAllowed bool
	CreatedBy      string
	CreatedAt      time.Time
}

// NotificationDelivery is one event for one webhook: pending until a
// 2xx answer (delivered) or the end of its retry window (failed).
type NotificationDelivery struct {
	ID            string
	CompanyID     string
	WebhookID     string
	Event         string
	Payload       string
	State         string
	Attempts      int
	LastStatus    *int
	LastError     *string
	NextAttemptAt *time.Time
	CreatedAt     time.Time
	DeliveredAt   *time.Time
}

// Notification delivery states.
const (
	NotificationPending   = "pending"
	NotificationDelivered = "delivered"
	NotificationFailed    = "failed"
)

const webhookCols = `id, company_id, url, events, format, secret_sealed, private_allowed, created_by, created_at`

func scanWebhook(r rowScanner) (NotificationWebhook, error) {
	var h NotificationWebhook
	var evs string
	if err := r.Scan(&h.ID, &h.CompanyID, &h.URL, &evs, &h.Format, &h.SecretSealed, &h.PrivateAllowed, &h.CreatedBy, &h.CreatedAt); err != nil {
		return h, err
	}
	_ = json.Unmarshal([]byte(evs), &h.Events)
	h.CreatedAt = h.CreatedAt.UTC()
	return h, nil
}

// ListNotificationWebhooks returns every webhook of a company, oldest
// first (at most 20 exist: the events are emitted to all of them).
func (s *Store) ListNotificationWebhooks(ctx context.Context, q db.Querier, companyID string) ([]NotificationWebhook, error) {
	return queryAll(ctx, q, "list notification webhooks", scanWebhook, `SELECT `+webhookCols+` FROM notification_webhooks
		WHERE company_id = $1 ORDER BY created_at, id`, companyID)
}

// NotificationWebhooksPage returns a page of a company's webhooks, newest
// first (docs/api.md, "Paging").
func (s *Store) NotificationWebhooksPage(ctx context.Context, q db.Querier, companyID string, p Page) ([]NotificationWebhook, error) {
	return listPage(ctx, q, "list notification webhooks", scanWebhook, `SELECT `+webhookCols+` FROM notification_webhooks`,
		`company_id = $1`, []any{companyID}, "created_at", "id", p)
}

// WebhookCursor is the paging key of a webhook.
func WebhookCursor(h NotificationWebhook) Cursor { return Cursor{At: h.CreatedAt, ID: h.ID} }

// GetNotificationWebhook returns one webhook by id (ErrNotFound when gone).
func (s *Store) GetNotificationWebhook(ctx context.Context, q db.Querier, id string) (NotificationWebhook, error) {
	return queryOne(ctx, q, "get notification webhook", scanWebhook, `SELECT `+webhookCols+` FROM notification_webhooks WHERE id = $1`, id)
}

// CountNotificationWebhooks counts a company's webhooks.
func (s *Store) CountNotificationWebhooks(ctx context.Context, q db.Querier, companyID string) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM notification_webhooks WHERE company_id = $1`, companyID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count notification webhooks: %w", err)
	}
	return n, nil
}

// InsertNotificationWebhook stores a webhook (h.ID and h.CreatedAt set by
// the caller).
func (s *Store) InsertNotificationWebhook(ctx context.Context, q db.Querier, h NotificationWebhook) error {
	evs, err := json.Marshal(h.Events)
	if err != nil {
		return fmt.Errorf("insert notification webhook: %w", err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO notification_webhooks (`+webhookCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
		h.ID, h.CompanyID, h.URL, string(evs), h.Format, h.SecretSealed, h.PrivateAllowed, h.CreatedBy, h.CreatedAt); err != nil {
		return fmt.Errorf("insert notification webhook: %w", err)
	}
	return nil
}

// DeleteNotificationWebhook deletes a company's webhook and its delivery
// log; it reports whether one was deleted.
func (s *Store) DeleteNotificationWebhook(ctx context.Context, q db.Querier, companyID, id string) (bool, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM notification_webhooks WHERE id = $1 AND company_id = $2`, id, companyID)
	if err != nil {
		return false, fmt.Errorf("delete notification webhook: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

const notificationDeliveryCols = `id, company_id, webhook_id, event, payload, state, attempts, last_status, last_error,
	next_attempt_at, created_at, delivered_at`

func scanNotificationDelivery(r rowScanner) (NotificationDelivery, error) {
	var d NotificationDelivery
	var status sql.NullInt64
	var lastErr sql.NullString
	var next, delivered sql.NullTime
	if err := r.Scan(&d.ID, &d.CompanyID, &d.WebhookID, &d.Event, &d.Payload, &d.State, &d.Attempts, &status, &lastErr,
		&next, &d.CreatedAt, &delivered); err != nil {
		return d, err
	}
	if status.Valid {
		v := int(status.Int64)
		d.LastStatus = &v
	}
	if lastErr.Valid {
		d.LastError = &lastErr.String
	}
	d.NextAttemptAt, d.DeliveredAt, d.CreatedAt = timePtr(next), timePtr(delivered), d.CreatedAt.UTC()
	return d, nil
}

// InsertNotificationDelivery records one pending event for one webhook,
// due at once (d.ID, d.CreatedAt set by the caller).
func (s *Store) InsertNotificationDelivery(ctx context.Context, q db.Querier, d NotificationDelivery) error {
	state := d.State
	if state == "" {
		state = NotificationPending
	}
	var next any = d.CreatedAt
	if state != NotificationPending {
		next = nil
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO notification_deliveries (id, company_id, webhook_id, event, payload, state,
		next_attempt_at, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`, d.ID, d.CompanyID, d.WebhookID, d.Event, d.Payload, state,
		next, d.CreatedAt); err != nil {
		return fmt.Errorf("record notification: %w", err)
	}
	return nil
}

// NotificationDeliveriesPage returns a page of one webhook's delivery log,
// newest first.
func (s *Store) NotificationDeliveriesPage(ctx context.Context, q db.Querier, companyID, webhookID string, p Page) ([]NotificationDelivery, error) {
	return listPage(ctx, q, "list notification deliveries", scanNotificationDelivery,
		`SELECT `+notificationDeliveryCols+` FROM notification_deliveries`, `webhook_id = $1 AND company_id = $2`,
		[]any{webhookID, companyID}, "created_at", "id", p)
}

// NotificationDeliveryCursor is the paging key of a delivery.
func NotificationDeliveryCursor(d NotificationDelivery) Cursor {
	return Cursor{At: d.CreatedAt, ID: d.ID}
}

// DueNotificationDeliveries returns up to limit pending deliveries whose
// next attempt is due at now, the longest waiting first.
func (s *Store) DueNotificationDeliveries(ctx context.Context, q db.Querier, now time.Time, limit int) ([]NotificationDelivery, error) {
	return queryAll(ctx, q, "due notifications", scanNotificationDelivery, `SELECT `+notificationDeliveryCols+`
		FROM notification_deliveries WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT `+fmt.Sprint(limit), now)
}

// NextNotificationAttempt returns when the earliest pending delivery is
// due (ok false when none is pending).
func (s *Store) NextNotificationAttempt(ctx context.Context, q db.Querier) (time.Time, bool, error) {
	// Why ORDER BY … LIMIT 1 and not MIN(): SQLite returns an aggregate of
	// a timestamp as text.
	var next time.Time
	err := q.QueryRowContext(ctx, `SELECT next_attempt_at FROM notification_deliveries WHERE state = 'pending'
		ORDER BY next_attempt_at LIMIT 1`).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next notification: %w", err)
	}
	return next.UTC(), true, nil
}

// RecordNotificationDelivered records a delivery's successful attempt.
func (s *Store) RecordNotificationDelivered(ctx context.Context, q db.Querier, id string, status int, at time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE notification_deliveries SET state = 'delivered', attempts = attempts + 1,
		last_status = $2, last_error = NULL, next_attempt_at = NULL, delivered_at = $3 WHERE id = $1`, id, status, at); err != nil {
		return fmt.Errorf("record notification delivery: %w", err)
	}
	return nil
}

// RecordNotificationAttempt records a failed attempt: the state (pending
// with its next attempt, or failed), the answer's status (0: none) and our
// own sentence about it.
func (s *Store) RecordNotificationAttempt(ctx context.Context, q db.Querier, id, state string, status int, msg string, next time.Time) error {
	var st any
	if status != 0 {
		st = status
	}
	if _, err := q.ExecContext(ctx, `UPDATE notification_deliveries SET state = $2, attempts = attempts + 1, last_status = $3,
		last_error = $4, next_attempt_at = $5 WHERE id = $1`, id, state, st, msg, next); err != nil {
		return fmt.Errorf("record notification attempt: %w", err)
	}
	return nil
}

// NotificationMark asks to move the mark Key of a company to Value.
type NotificationMark struct {
	CompanyID string
	Key       string
	Value     string
	// Quiet is how long a mark keeps a state before it may change again:
	// a change asked for sooner is left for a later call.
	Quiet time.Duration
	// Repeat lets a mark in the same Value "change" again once Quiet has
	// passed (an alert repeated at most once per Quiet while it holds).
	Repeat bool
	// EmitFirst makes the creation of the mark a change. Without it the
	// first sighting only records the state (a baseline), dated Quiet ago
	// so that the next real change is reported at once.
	EmitFirst bool
}

// MarkChange is what SwapNotificationMark did.
type MarkChange struct {
	// Changed is set when this call moved the mark (or created it with
	// EmitFirst): the caller emits its event in the same transaction.
	Changed bool
	// First is set when the mark did not exist before.
	First bool
	// Previous is the value the mark held ("" when First).
	Previous string
}

// SwapNotificationMark moves a notification mark to m.Value when it holds
// another value (or the same, with Repeat) since at least m.Quiet, or
// creates it. Why a compare-and-set on the value read: two replicas that
// observe the same change both try it, and the UPDATE of the second finds
// the value already moved (on PostgreSQL it waits for the first's commit
// and re-reads the row), so exactly one emits the event.
func (s *Store) SwapNotificationMark(ctx context.Context, q db.Querier, m NotificationMark) (MarkChange, error) {
	now := s.Now()
	created := now
	if !m.EmitFirst {
		created = now.Add(-m.Quiet)
	}
	res, err := q.ExecContext(ctx, `INSERT INTO notification_marks (mark_key, company_id, value, changed_at) VALUES ($1,$2,$3,$4)
		ON CONFLICT (mark_key) DO NOTHING`, m.Key, m.CompanyID, m.Value, created)
	if err != nil {
		return MarkChange{}, fmt.Errorf("notification mark: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return MarkChange{Changed: m.EmitFirst, First: true}, nil
	}
	var prev string
	var at time.Time
	if err := q.QueryRowContext(ctx, `SELECT value, changed_at FROM notification_marks WHERE mark_key = $1`, m.Key).Scan(&prev, &at); err != nil {
		return MarkChange{}, fmt.Errorf("notification mark: %w", err)
	}
	if (prev == m.Value && !m.Repeat) || at.After(now.Add(-m.Quiet)) {
		return MarkChange{Previous: prev}, nil
	}
	res, err = q.ExecContext(ctx, `UPDATE notification_marks SET value = $2, changed_at = $3 WHERE mark_key = $1 AND value = $4
		AND changed_at <= $5`, m.Key, m.Value, now, prev, now.Add(-m.Quiet))
	if err != nil {
		return MarkChange{}, fmt.Errorf("notification mark: %w", err)
	}
	n, _ := res.RowsAffected()
	return MarkChange{Changed: n == 1, Previous: prev}, nil
}

// CompaniesSubscribedTo returns the companies with a webhook subscribed to
// event, each once. Why filtered here and not in SQL: events is a JSON
// array in a text column on both databases, and a company has at most 20
// webhooks.
func (s *Store) CompaniesSubscribedTo(ctx context.Context, q db.Querier, event string) ([]string, error) {
	rows, err := queryAll(ctx, q, "subscribed companies", func(r rowScanner) ([2]string, error) {
		var x [2]string
		err := r.Scan(&x[0], &x[1])
		return x, err
	}, `SELECT company_id, events FROM notification_webhooks ORDER BY company_id`)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range rows {
		var evs []string
		if json.Unmarshal([]byte(x[1]), &evs) != nil || !slices.Contains(evs, event) {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != x[0] {
			out = append(out, x[0])
		}
	}
	return out, nil
}

// ValidDeliveryID reports whether s has the shape of a notification
// delivery id: "msg_" and 32 lower-case hex digits.
func ValidDeliveryID(s string) bool {
	if len(s) != 36 || s[:4] != "msg_" {
		return false
	}
	for _, c := range s[4:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// NotificationMarkValue returns a mark's value (ErrNotFound when unset).
func (s *Store) NotificationMarkValue(ctx context.Context, q db.Querier, key string) (string, error) {
	return queryOne(ctx, q, "notification mark", func(r rowScanner) (string, error) {
		var v string
		err := r.Scan(&v)
		return v, err
	}, `SELECT value FROM notification_marks WHERE mark_key = $1`, key)
}

// ClaimNotificationDelivery takes a due pending delivery for one attempt:
// it moves its next attempt to until, and reports whether this call did.
// Why: every replica's delivery loop reads the same due rows; the claim
// is a compare-and-set on "still due at now" (on PostgreSQL a second
// claimer waits for the first's row lock, then finds the row no longer
// due), so one replica makes the attempt, and a replica that dies during
// it leaves the delivery due again at until.
func (s *Store) ClaimNotificationDelivery(ctx context.Context, q db.Querier, id string, now, until time.Time) (bool, error) {
	res, err := q.ExecContext(ctx, `UPDATE notification_deliveries SET next_attempt_at = $2 WHERE id = $1 AND state = 'pending'
		AND next_attempt_at <= $3`, id, until, now)
	if err != nil {
		return false, fmt.Errorf("claim notification delivery: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}
