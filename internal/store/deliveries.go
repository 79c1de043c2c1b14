package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// EmailDelivery is one admitted provider event in the durable inbound queue
// (table email_deliveries).
type EmailDelivery struct {
	ID                string
	CompanyID         string
	EndpointID        string
	ConversationID    string
	ProviderEventID   string
	DeduplicationKey  string
	EventKind         string
	Source            string
	ProviderThreadID  string
	NormalizedEvent   json.RawMessage
	State             domain.DeliveryState
	Attempts          int
	RedactedError     string
	NextAttemptAt     *time.Time
	ReceivedAt        time.Time
	ProcessedAt       *time.Time
	AdmissionToWakeMs *int64
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

const deliveryCols = `id, company_id, endpoint_id, conversation_id, provider_event_id, deduplication_key, event_kind, source,
	provider_thread_id, normalized_event, state, attempts, redacted_error, next_attempt_at, received_at, processed_at,
	admission_to_wake_ms, created_at, updated_at`

func scanDelivery(row rowScanner) (EmailDelivery, error) {
	var ds deliveryScan
	if err := row.Scan(ds.dests()...); err != nil {
		return EmailDelivery{}, err
	}
	return ds.delivery(), nil
}

// deliveryScan receives the deliveryCols of one row, for scanDelivery and
// for queries that select them after other columns.
type deliveryScan struct {
	d                      EmailDelivery
	conv, thread, redacted sql.NullString
	event                  []byte
	next, processed        sql.NullTime
	a2w                    sql.NullInt64
}

// dests are the scan destinations of deliveryCols, in order.
func (ds *deliveryScan) dests() []any {
	d := &ds.d
	return []any{&d.ID, &d.CompanyID, &d.EndpointID, &ds.conv, &d.ProviderEventID, &d.DeduplicationKey, &d.EventKind,
		&d.Source, &ds.thread, &ds.event, &d.State, &d.Attempts, &ds.redacted, &ds.next, &d.ReceivedAt, &ds.processed, &ds.a2w,
		&d.CreatedAt, &d.UpdatedAt}
}

// delivery is the scanned row.
func (ds *deliveryScan) delivery() EmailDelivery {
	d := ds.d
	d.ConversationID, d.ProviderThreadID, d.RedactedError = ds.conv.String, ds.thread.String, ds.redacted.String
	d.NormalizedEvent = rawJSON(ds.event)
	d.NextAttemptAt, d.ProcessedAt = timePtr(ds.next), timePtr(ds.processed)
	if ds.a2w.Valid {
		v := ds.a2w.Int64
		d.AdmissionToWakeMs = &v
	}
	d.ReceivedAt, d.CreatedAt, d.UpdatedAt = d.ReceivedAt.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return d
}

// InsertDelivery admits d into the inbound queue. The insert is
// ON CONFLICT DO NOTHING against both unique keys (endpoint + provider event
// id, endpoint + deduplication key), so the same message arriving over the
// WebSocket, a webhook and a catch-up scan is admitted once; inserted reports
// whether this call created the row.
func (s *Store) InsertDelivery(ctx context.Context, q db.Querier, d *EmailDelivery) (inserted bool, err error) {
	if d.ID == "" {
		d.ID = NewID()
	}
	now := s.Now()
	d.ReceivedAt, d.CreatedAt, d.UpdatedAt = now, now, now
	if d.State == "" {
		d.State = domain.DeliveryReceived
	}
	// No conflict target: "DO NOTHING" without one covers every unique
	// constraint on both SQLite and PostgreSQL, which is exactly the
	// cross-transport deduplication we want.
	res, err := q.ExecContext(ctx, `INSERT INTO email_deliveries (id, company_id, endpoint_id, provider_event_id,
		deduplication_key, event_kind, source, provider_thread_id, normalized_event, state, attempts, received_at,
		created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,0,$11,$11,$11) ON CONFLICT DO NOTHING`,
		d.ID, d.CompanyID, d.EndpointID, d.ProviderEventID, d.DeduplicationKey, d.EventKind, d.Source,
		nullString(d.ProviderThreadID), string(d.NormalizedEvent), string(d.State), now)
	if err != nil {
		return false, fmt.Errorf("admit email delivery: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// notHeldBack is the condition that no older delivery of d's provider
// thread is waiting for a later retry ($2 being now). Why the inner terms
// repeat the predicate of the partial index email_deliveries_held
// (migration 00018): that index holds only deliveries waiting with a retry
// time, usually none, so the probe costs nothing however many deliveries
// the inbox holds. Without it PostgreSQL, misled by statistics that
// put a handful of rows under each inbox (a thousand inboxes, or a fresh
// table), probed by inbox alone and filtered every delivery the inbox ever
// had, for each waiting delivery: 21 ms a call during a 600-email burst.
const notHeldBack = `NOT EXISTS (SELECT 1 FROM email_deliveries o WHERE o.endpoint_id = d.endpoint_id
			AND d.provider_thread_id IS NOT NULL AND o.provider_thread_id = d.provider_thread_id
			AND o.next_attempt_at IS NOT NULL AND o.state IN ('received', 'processing', 'retry') AND o.next_attempt_at > $2
			AND (o.received_at < d.received_at OR (o.received_at = d.received_at AND o.id < d.id)))`

// DueDeliveries returns up to limit of the endpoint's deliveries that are
// waiting (received, processing or retry) and due at now, oldest admission
// first. A delivery is held back while an older delivery of the same
// provider thread is still waiting for a later retry, so a failed message
// never lets its successors overtake it (per-thread FIFO across retries).
func (s *Store) DueDeliveries(ctx context.Context, q db.Querier, endpointID string, now time.Time, limit int) ([]EmailDelivery, error) {
	return queryAll(ctx, q, "list due email deliveries", scanDelivery, `SELECT `+deliveryCols+` FROM email_deliveries d
		WHERE d.endpoint_id = $1 AND d.state IN ('received', 'processing', 'retry')
		AND (d.next_attempt_at IS NULL OR d.next_attempt_at <= $2)
		AND `+notHeldBack+`
		ORDER BY d.received_at, d.id LIMIT `+fmt.Sprint(limit), endpointID, now)
}

// NextDeliveryAttempt returns the earliest time at which one of the
// endpoint's waiting deliveries becomes due, or nil when none waits. A
// waiting delivery without a retry time is due immediately (it returns now);
// deliveries held back behind an older delivery of their thread (see
// DueDeliveries) are skipped, since they become due with that delivery.
func (s *Store) NextDeliveryAttempt(ctx context.Context, q db.Querier, endpointID string, now time.Time) (*time.Time, error) {
	// Ordering undated (due now) rows first with a CASE instead of COALESCE:
	// on SQLite COALESCE over a time column loses the declared type and the
	// value would come back as text.
	var next sql.NullTime
	err := q.QueryRowContext(ctx, `SELECT d.next_attempt_at FROM email_deliveries d WHERE d.endpoint_id = $1
		AND d.state IN ('received', 'processing', 'retry')
		AND `+notHeldBack+`
		ORDER BY (CASE WHEN d.next_attempt_at IS NULL THEN 0 ELSE 1 END), d.next_attempt_at LIMIT 1`, endpointID, now).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("next email delivery attempt: %w", err)
	}
	if !next.Valid {
		return &now, nil
	}
	t := next.Time.UTC()
	return &t, nil
}

// GetDelivery returns a delivery by id. Inside a transaction, lock=true
// takes the row lock on PostgreSQL so the state read is the one the caller
// updates.
func (s *Store) GetDelivery(ctx context.Context, q db.Querier, id string, lock bool) (EmailDelivery, error) {
	suffix := ""
	if lock {
		suffix = s.DB.ForUpdate()
	}
	return queryOne(ctx, q, "get email delivery", scanDelivery, `SELECT `+deliveryCols+` FROM email_deliveries WHERE id = $1`+suffix, id)
}

// ListDeliveries returns an endpoint's deliveries in admission order.
func (s *Store) ListDeliveries(ctx context.Context, q db.Querier, endpointID string) ([]EmailDelivery, error) {
	return queryAll(ctx, q, "list email deliveries", scanDelivery, `SELECT `+deliveryCols+` FROM email_deliveries
		WHERE endpoint_id = $1 ORDER BY received_at, id`, endpointID)
}

// UpdateDelivery writes the worker-owned columns of d.
func (s *Store) UpdateDelivery(ctx context.Context, q db.Querier, d *EmailDelivery) error {
	if _, err := q.ExecContext(ctx, updateDeliverySQL, s.deliveryUpdateArgs(d)...); err != nil {
		return fmt.Errorf("update email delivery: %w", err)
	}
	return nil
}

const updateDeliverySQL = `UPDATE email_deliveries SET conversation_id = $2, provider_thread_id = $3,
		normalized_event = $4, state = $5, attempts = $6, redacted_error = $7, next_attempt_at = $8, processed_at = $9,
		admission_to_wake_ms = $10, updated_at = $11 WHERE id = $1`

// updateDeliveryTouchingPostgres is TouchConversation ($12 the
// conversation, $13 its new state or NULL to keep it) and UpdateDelivery
// as one statement. Why this is safe: the two updates touch different
// tables and neither reads what the other writes.
const updateDeliveryTouchingPostgres = `WITH c AS (UPDATE email_conversations SET last_activity_at = $11, updated_at = $11,
		state = COALESCE($13, state) WHERE id = $12) ` + updateDeliverySQL

func (s *Store) deliveryUpdateArgs(d *EmailDelivery) []any {
	d.UpdatedAt = s.Now()
	var a2w any
	if d.AdmissionToWakeMs != nil {
		a2w = *d.AdmissionToWakeMs
	}
	return []any{d.ID, nullString(d.ConversationID), nullString(d.ProviderThreadID), string(d.NormalizedEvent), string(d.State),
		d.Attempts, nullString(d.RedactedError), nullTime(d.NextAttemptAt), nullTime(d.ProcessedAt), a2w, d.UpdatedAt}
}

// UpdateDeliveryTouching is UpdateDelivery that also records activity on
// conversation convID as TouchConversation does (convState "" keeps its
// state); an empty convID touches nothing. On PostgreSQL it is one round
// trip.
func (s *Store) UpdateDeliveryTouching(ctx context.Context, q db.Querier, d *EmailDelivery, convID, convState string) error {
	if convID == "" {
		return s.UpdateDelivery(ctx, q, d)
	}
	if s.DB.Dialect != db.Postgres {
		if err := s.TouchConversation(ctx, q, convID, convState); err != nil {
			return err
		}
		return s.UpdateDelivery(ctx, q, d)
	}
	if _, err := q.ExecContext(ctx, updateDeliveryTouchingPostgres, append(s.deliveryUpdateArgs(d), convID, nullString(convState))...); err != nil {
		return fmt.Errorf("update email delivery and conversation: %w", err)
	}
	return nil
}

// SetDeliveryThread records the provider thread of a delivery whose event
// did not carry one, so later per-thread ordering checks can see it.
func (s *Store) SetDeliveryThread(ctx context.Context, q db.Querier, id, threadID string) error {
	_, err := q.ExecContext(ctx, `UPDATE email_deliveries SET provider_thread_id = $2 WHERE id = $1 AND provider_thread_id IS NULL`, id, threadID)
	if err != nil {
		return fmt.Errorf("record email delivery thread: %w", err)
	}
	return nil
}

// CountDeliveriesInState counts an endpoint's deliveries in state.
func (s *Store) CountDeliveriesInState(ctx context.Context, q db.Querier, endpointID string, state domain.DeliveryState) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_deliveries WHERE endpoint_id = $1 AND state = $2`,
		endpointID, string(state)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count email deliveries: %w", err)
	}
	return n, nil
}

// ExistingDeduplicationKeys returns which of keys are already admitted for
// the endpoint, so a catch-up scan skips messages it has seen.
func (s *Store) ExistingDeduplicationKeys(ctx context.Context, q db.Querier, endpointID string, keys []string) (map[string]bool, error) {
	return s.existingAmong(ctx, q, "check admitted email events", "email_deliveries", "deduplication_key", endpointID, keys)
}

// ListDeliveriesByConversation returns a page of the deliveries bound to
// a conversation in admission order (received_at, then id: oldest first),
// for the stage timestamps of a task's mail.
func (s *Store) ListDeliveriesByConversation(ctx context.Context, q db.Querier, conversationID string, p Page) ([]EmailDelivery, error) {
	p.Oldest = true
	return listPage(ctx, q, "list conversation deliveries", scanDelivery, `SELECT `+deliveryCols+` FROM email_deliveries`,
		`conversation_id = $1`, []any{conversationID}, "received_at", "id", p)
}
