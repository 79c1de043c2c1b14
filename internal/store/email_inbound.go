package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// Inbound delivery states (reference §3.3).
const (
	DeliveryReceived   = "received"
	DeliveryFiltered   = "filtered"
	DeliveryProcessing = "processing"
	DeliveryProcessed  = "processed"
	DeliveryRetry      = "retry"
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
	State             string
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
	var d EmailDelivery
	var conv, thread, redacted sql.NullString
	var event []byte
	var next, processed sql.NullTime
	var a2w sql.NullInt64
	err := row.Scan(&d.ID, &d.CompanyID, &d.EndpointID, &conv, &d.ProviderEventID, &d.DeduplicationKey, &d.EventKind,
		&d.Source, &thread, &event, &d.State, &d.Attempts, &redacted, &next, &d.ReceivedAt, &processed, &a2w,
		&d.CreatedAt, &d.UpdatedAt)
	if err != nil {
		return d, err
	}
	d.ConversationID, d.ProviderThreadID, d.RedactedError = conv.String, thread.String, redacted.String
	d.NormalizedEvent = rawJSON(event)
	d.NextAttemptAt, d.ProcessedAt = timePtr(next), timePtr(processed)
	if a2w.Valid {
		v := a2w.Int64
		d.AdmissionToWakeMs = &v
	}
	d.ReceivedAt, d.CreatedAt, d.UpdatedAt = d.ReceivedAt.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return d, nil
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
		d.State = DeliveryReceived
	}
	// No conflict target: "DO NOTHING" without one covers every unique
	// constraint on both SQLite and PostgreSQL, which is exactly the
	// cross-transport deduplication we want.
	res, err := q.ExecContext(ctx, `INSERT INTO email_deliveries (id, company_id, endpoint_id, provider_event_id,
		deduplication_key, event_kind, source, provider_thread_id, normalized_event, state, attempts, received_at,
		created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,0,$11,$11,$11) ON CONFLICT DO NOTHING`,
		d.ID, d.CompanyID, d.EndpointID, d.ProviderEventID, d.DeduplicationKey, d.EventKind, d.Source,
		nullString(d.ProviderThreadID), string(d.NormalizedEvent), d.State, now)
	if err != nil {
		return false, fmt.Errorf("admit email delivery: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// TouchEndpointEvent records that an event arrived for the endpoint. It
// writes at most once per second per endpoint: every admission touching the
// endpoint row would serialize concurrent admissions of one busy inbox on
// that row's lock in PostgreSQL.
func (s *Store) TouchEndpointEvent(ctx context.Context, q db.Querier, endpointID string) error {
	now := s.Now()
	_, err := q.ExecContext(ctx, `UPDATE email_endpoints SET last_event_at = $2 WHERE id = $1
		AND (last_event_at IS NULL OR last_event_at < $3)`, endpointID, now, now.Add(-time.Second))
	if err != nil {
		return fmt.Errorf("record email event time: %w", err)
	}
	return nil
}

// DueDeliveries returns up to limit of the endpoint's deliveries that are
// waiting (received, processing or retry) and due at now, oldest admission
// first. A delivery is held back while an older delivery of the same
// provider thread is still waiting for a later retry, so a failed message
// never lets its successors overtake it (per-thread FIFO across retries).
func (s *Store) DueDeliveries(ctx context.Context, q db.Querier, endpointID string, now time.Time, limit int) ([]EmailDelivery, error) {
	return queryAll(ctx, q, "list due email deliveries", scanDelivery, `SELECT `+deliveryCols+` FROM email_deliveries d
		WHERE d.endpoint_id = $1 AND d.state IN ('received', 'processing', 'retry')
		AND (d.next_attempt_at IS NULL OR d.next_attempt_at <= $2)
		AND NOT EXISTS (SELECT 1 FROM email_deliveries o WHERE o.endpoint_id = d.endpoint_id
			AND d.provider_thread_id IS NOT NULL AND o.provider_thread_id = d.provider_thread_id
			AND o.state IN ('received', 'processing', 'retry') AND o.next_attempt_at > $2
			AND (o.received_at < d.received_at OR (o.received_at = d.received_at AND o.id < d.id)))
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
		AND NOT EXISTS (SELECT 1 FROM email_deliveries o WHERE o.endpoint_id = d.endpoint_id
			AND d.provider_thread_id IS NOT NULL AND o.provider_thread_id = d.provider_thread_id
			AND o.state IN ('received', 'processing', 'retry') AND o.next_attempt_at > $2
			AND (o.received_at < d.received_at OR (o.received_at = d.received_at AND o.id < d.id)))
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
	d.UpdatedAt = s.Now()
	var a2w any
	if d.AdmissionToWakeMs != nil {
		a2w = *d.AdmissionToWakeMs
	}
	_, err := q.ExecContext(ctx, `UPDATE email_deliveries SET conversation_id = $2, provider_thread_id = $3,
		normalized_event = $4, state = $5, attempts = $6, redacted_error = $7, next_attempt_at = $8, processed_at = $9,
		admission_to_wake_ms = $10, updated_at = $11 WHERE id = $1`,
		d.ID, nullString(d.ConversationID), nullString(d.ProviderThreadID), string(d.NormalizedEvent), d.State,
		d.Attempts, nullString(d.RedactedError), nullTime(d.NextAttemptAt), nullTime(d.ProcessedAt), a2w, d.UpdatedAt)
	if err != nil {
		return fmt.Errorf("update email delivery: %w", err)
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
func (s *Store) CountDeliveriesInState(ctx context.Context, q db.Querier, endpointID, state string) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_deliveries WHERE endpoint_id = $1 AND state = $2`,
		endpointID, state).Scan(&n); err != nil {
		return 0, fmt.Errorf("count email deliveries: %w", err)
	}
	return n, nil
}

// ExistingDeduplicationKeys returns which of keys are already admitted for
// the endpoint, so a catch-up scan skips messages it has seen.
func (s *Store) ExistingDeduplicationKeys(ctx context.Context, q db.Querier, endpointID string, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	for start := 0; start < len(keys); start += 200 {
		chunk := keys[start:min(start+200, len(keys))]
		args := []any{endpointID}
		ph := make([]string, len(chunk))
		for i, k := range chunk {
			args = append(args, k)
			ph[i] = fmt.Sprintf("$%d", i+2)
		}
		found, err := queryAll(ctx, q, "check admitted email events", func(r rowScanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, `SELECT deduplication_key FROM email_deliveries WHERE endpoint_id = $1 AND deduplication_key IN (`+strings.Join(ph, ", ")+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, k := range found {
			out[k] = true
		}
	}
	return out, nil
}

// EndpointStatusShared reads an endpoint's status inside a transaction,
// holding a shared row lock on PostgreSQL (FOR SHARE). Concurrent message
// processing of one inbox shares the lock, while pause/disconnect (which
// update the row) wait for in-flight work, so no mail is retained into an
// endpoint that has just stopped.
func (s *Store) EndpointStatusShared(ctx context.Context, tx *sql.Tx, endpointID string) (string, error) {
	suffix := ""
	if s.DB.Dialect == db.Postgres {
		suffix = " FOR SHARE"
	}
	var st string
	if err := tx.QueryRowContext(ctx, `SELECT status FROM email_endpoints WHERE id = $1`+suffix, endpointID).Scan(&st); err != nil {
		return "", notFound("get email inbox", err)
	}
	return st, nil
}

// EndpointShared reads a whole endpoint row inside a transaction, holding a
// shared row lock on PostgreSQL (FOR SHARE) exactly like
// EndpointStatusShared. Processing reads the full row rather than only the
// status so that the credential re-check before a wake runs on the row as
// of this transaction, in the same round trip.
func (s *Store) EndpointShared(ctx context.Context, tx *sql.Tx, endpointID string) (domain.EmailEndpoint, error) {
	suffix := ""
	if s.DB.Dialect == db.Postgres {
		suffix = " FOR SHARE"
	}
	return queryOne(ctx, tx, "get email inbox", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints WHERE id = $1`+suffix, endpointID)
}

// ForceCatchup clears last_sync_at so the next worker tick scans the inbox
// (after a WebSocket acknowledgement or a reconnect).
func (s *Store) ForceCatchup(ctx context.Context, q db.Querier, endpointID string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET last_sync_at = NULL WHERE id = $1`, endpointID); err != nil {
		return fmt.Errorf("force email catch-up: %w", err)
	}
	return nil
}

// FinishCatchup records a completed catch-up scan: the receipt-time
// checkpoint the next scan starts from (minus its overlap) and when it ran.
func (s *Store) FinishCatchup(ctx context.Context, q db.Querier, endpointID string, checkpoint time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET sync_checkpoint = $2, last_sync_at = $3 WHERE id = $1`,
		endpointID, checkpoint.UTC(), s.Now()); err != nil {
		return fmt.Errorf("record email catch-up: %w", err)
	}
	return nil
}

// SetEndpointHealth writes an endpoint's health message and last error
// (empty lastError clears it) without touching any other column.
func (s *Store) SetEndpointHealth(ctx context.Context, q db.Querier, endpointID, health, lastError string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET health_message = $2, last_error = $3 WHERE id = $1`,
		endpointID, health, nullString(lastError)); err != nil {
		return fmt.Errorf("record email inbox health: %w", err)
	}
	return nil
}

// RenewLease extends token's unexpired (endpoint, key) lease to now+ttl and
// reports whether token still held it. It is the worker's fence: one
// statement both proves ownership and keeps it, so work done after a true
// result cannot overlap a successor's.
func (s *Store) RenewLease(ctx context.Context, q db.Querier, endpointID, key, token string, ttl time.Duration) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5`,
		endpointID, key, token, now.Add(ttl), now)
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", key, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// AcquireLeases takes, for token, every lease of keys on the endpoint that
// is free, expired or already token's (the rule of AcquireLease), in one
// statement per 100 keys, and returns the keys it holds. Keys are taken in
// sorted order, so two callers with overlapping sets cannot deadlock on
// each other's rows.
func (s *Store) AcquireLeases(ctx context.Context, q db.Querier, companyID, endpointID string, keys []string, token, holder string, ttl time.Duration) (map[string]bool, error) {
	sorted := append([]string(nil), keys...)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := map[string]bool{}
	now := s.Now()
	for start := 0; start < len(sorted); start += 100 {
		chunk := sorted[start:min(start+100, len(sorted))]
		args := []any{endpointID, companyID, token, holder, now.Add(ttl), now}
		rows := make([]string, len(chunk))
		for i, k := range chunk {
			args = append(args, k)
			rows[i] = fmt.Sprintf("($1, $%d, $2, $3, $4, $5, $6, $6)", len(args))
		}
		held, err := queryAll(ctx, q, "acquire leases", func(r rowScanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, `INSERT INTO email_leases (endpoint_id, lease_key, company_id, token, holder, expires_at, created_at, updated_at)
			VALUES `+strings.Join(rows, ", ")+`
			ON CONFLICT (endpoint_id, lease_key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
				expires_at = excluded.expires_at, updated_at = excluded.updated_at
			WHERE email_leases.token = excluded.token OR email_leases.expires_at <= $6
			RETURNING lease_key`, args...)
		if err != nil {
			return nil, err
		}
		for _, k := range held {
			out[k] = true
		}
	}
	return out, nil
}

// ReleaseLeasesOf deletes every lease of the endpoint that token holds.
func (s *Store) ReleaseLeasesOf(ctx context.Context, q db.Querier, endpointID, token string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM email_leases WHERE endpoint_id = $1 AND token = $2`, endpointID, token); err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// RenewLeaseLocked is AdvisoryXactLock(lockKey) followed by RenewLease, in
// one round trip on PostgreSQL: the lock is an uncorrelated sub-select,
// which PostgreSQL evaluates once as a one-time filter before scanning the
// lease row, so the order of the two locks is the same as with two
// statements (advisory lock first). On SQLite, where the advisory lock is
// a no-op, it is RenewLease.
func (s *Store) RenewLeaseLocked(ctx context.Context, tx *sql.Tx, endpointID, key, token string, ttl time.Duration, lockKey string) (bool, error) {
	if s.DB.Dialect != db.Postgres {
		return s.RenewLease(ctx, tx, endpointID, key, token, ttl)
	}
	now := s.Now()
	res, err := tx.ExecContext(ctx, `UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5
		AND (SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended($6, 0))) adv) = 1`,
		endpointID, key, token, now.Add(ttl), now, lockKey)
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", key, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// LeaseExpiry returns when the (endpoint, key) lease expires, or nil when
// no lease row exists.
func (s *Store) LeaseExpiry(ctx context.Context, q db.Querier, endpointID, key string) (*time.Time, error) {
	var t sql.NullTime
	err := q.QueryRowContext(ctx, `SELECT expires_at FROM email_leases WHERE endpoint_id = $1 AND lease_key = $2`, endpointID, key).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", key, err)
	}
	return timePtr(t), nil
}

// DeleteReceivingLeases removes every socket, catch-up and thread lease. It
// is only safe when no other process can use the database (SQLite under the
// home lock): at start, such leases can only belong to a dead predecessor.
func (s *Store) DeleteReceivingLeases(ctx context.Context, q db.Querier) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM email_leases WHERE lease_key IN ('email-socket', 'email-catchup')
		OR lease_key LIKE 'email-thread:%'`); err != nil {
		return fmt.Errorf("clear stale email leases: %w", err)
	}
	return nil
}

const conversationCols = `id, company_id, endpoint_id, issue_id, external_conversation_id, external_thread_id, subject, state,
	last_activity_at, created_at`

func scanConversation(row rowScanner) (domain.EmailConversation, error) {
	var c domain.EmailConversation
	err := row.Scan(&c.ID, &c.CompanyID, &c.EndpointID, &c.IssueID, &c.ExternalConversationID, &c.ExternalThreadID,
		&c.Subject, &c.State, &c.LastActivityAt, &c.CreatedAt)
	c.LastActivityAt, c.CreatedAt = c.LastActivityAt.UTC(), c.CreatedAt.UTC()
	return c, err
}

// ConversationByThread returns the endpoint's conversation of a provider
// thread (subjects never identify conversations).
func (s *Store) ConversationByThread(ctx context.Context, q db.Querier, endpointID, threadID string) (domain.EmailConversation, error) {
	return queryOne(ctx, q, "get email conversation", scanConversation, `SELECT `+conversationCols+` FROM email_conversations
		WHERE endpoint_id = $1 AND external_thread_id = $2`, endpointID, threadID)
}

// ConversationByThreadWithStatus is ConversationByThread that also returns
// the status of the conversation's task, read without a lock (see
// IssueStatus), in the same round trip.
func (s *Store) ConversationByThreadWithStatus(ctx context.Context, q db.Querier, endpointID, threadID string) (domain.EmailConversation, string, error) {
	var status string
	c, err := queryOne(ctx, q, "get email conversation", func(r rowScanner) (domain.EmailConversation, error) {
		var c domain.EmailConversation
		err := r.Scan(&c.ID, &c.CompanyID, &c.EndpointID, &c.IssueID, &c.ExternalConversationID, &c.ExternalThreadID,
			&c.Subject, &c.State, &c.LastActivityAt, &c.CreatedAt, &status)
		c.LastActivityAt, c.CreatedAt = c.LastActivityAt.UTC(), c.CreatedAt.UTC()
		return c, err
	}, `SELECT c.id, c.company_id, c.endpoint_id, c.issue_id, c.external_conversation_id, c.external_thread_id, c.subject,
		c.state, c.last_activity_at, c.created_at, i.status FROM email_conversations c JOIN issues i ON i.id = c.issue_id
		WHERE c.endpoint_id = $1 AND c.external_thread_id = $2`, endpointID, threadID)
	return c, status, err
}

// ConversationByIssue returns the conversation bound to a task.
func (s *Store) ConversationByIssue(ctx context.Context, q db.Querier, issueID string) (domain.EmailConversation, error) {
	return queryOne(ctx, q, "get email conversation", scanConversation, `SELECT `+conversationCols+` FROM email_conversations
		WHERE issue_id = $1 ORDER BY created_at LIMIT 1`, issueID)
}

// ListConversations returns an endpoint's conversations, oldest first.
func (s *Store) ListConversations(ctx context.Context, q db.Querier, endpointID string) ([]domain.EmailConversation, error) {
	return queryAll(ctx, q, "list email conversations", scanConversation, `SELECT `+conversationCols+` FROM email_conversations
		WHERE endpoint_id = $1 ORDER BY created_at, id`, endpointID)
}

// InsertConversation inserts c unless the endpoint already has a
// conversation for the thread; either way c ends up holding the stored row
// and created says which happened.
func (s *Store) InsertConversation(ctx context.Context, q db.Querier, c *domain.EmailConversation) (created bool, err error) {
	c.ID = NewID()
	c.CreatedAt = s.Now()
	c.LastActivityAt = c.CreatedAt
	if c.State == "" {
		c.State = "active"
	}
	res, err := q.ExecContext(ctx, `INSERT INTO email_conversations (`+conversationCols+`, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$10) ON CONFLICT (endpoint_id, external_thread_id) DO NOTHING`,
		c.ID, c.CompanyID, c.EndpointID, c.IssueID, c.ExternalConversationID, c.ExternalThreadID, c.Subject, c.State,
		c.LastActivityAt, c.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("create email conversation: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	existing, err := s.ConversationByThread(ctx, q, c.EndpointID, c.ExternalThreadID)
	if err != nil {
		return false, err
	}
	*c = existing
	return false, nil
}

// TouchConversation sets a conversation's last activity and, when state is
// not empty, its state.
func (s *Store) TouchConversation(ctx context.Context, q db.Querier, id, state string) error {
	now := s.Now()
	var err error
	if state == "" {
		_, err = q.ExecContext(ctx, `UPDATE email_conversations SET last_activity_at = $2, updated_at = $2 WHERE id = $1`, id, now)
	} else {
		_, err = q.ExecContext(ctx, `UPDATE email_conversations SET last_activity_at = $2, updated_at = $2, state = $3 WHERE id = $1`, id, now, state)
	}
	if err != nil {
		return fmt.Errorf("update email conversation: %w", err)
	}
	return nil
}

const emailMessageCols = `id, company_id, endpoint_id, conversation_id, provider_message_id, provider_thread_id, envelope, headers,
	text, full_text, direction, automatic, attachment_ids, comment_id, timestamp, created_at`

func scanEmailMessage(row rowScanner) (domain.EmailMessage, error) {
	var m domain.EmailMessage
	var env, headers, atts []byte
	var comment sql.NullString
	err := row.Scan(&m.ID, &m.CompanyID, &m.EndpointID, &m.ConversationID, &m.ProviderMessageID, &m.ProviderThreadID,
		&env, &headers, &m.Text, &m.FullText, &m.Direction, &m.Automatic, &atts, &comment, &m.Timestamp, &m.CreatedAt)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(env, &m.Envelope); err != nil {
		return m, fmt.Errorf("decode envelope: %w", err)
	}
	m.Headers = rawJSON(headers)
	m.AttachmentIDs = []string{}
	if len(atts) > 0 {
		if err := json.Unmarshal(atts, &m.AttachmentIDs); err != nil {
			return m, fmt.Errorf("decode attachment ids: %w", err)
		}
	}
	m.CommentID = comment.String
	m.Timestamp, m.CreatedAt = m.Timestamp.UTC(), m.CreatedAt.UTC()
	return m, nil
}

// InsertEmailMessage retains m unless the endpoint already holds that
// provider message (ON CONFLICT DO NOTHING on endpoint + provider message
// id); inserted reports whether this call stored it.
func (s *Store) InsertEmailMessage(ctx context.Context, q db.Querier, m *domain.EmailMessage) (inserted bool, err error) {
	m.ID = NewID()
	m.CreatedAt = s.Now()
	if m.AttachmentIDs == nil {
		m.AttachmentIDs = []string{}
	}
	res, err := q.ExecContext(ctx, `INSERT INTO email_messages (`+emailMessageCols+`)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16) ON CONFLICT (endpoint_id, provider_message_id) DO NOTHING`,
		m.ID, m.CompanyID, m.EndpointID, m.ConversationID, m.ProviderMessageID, m.ProviderThreadID, mustJSON(m.Envelope),
		nullJSON(m.Headers), m.Text, m.FullText, m.Direction, m.Automatic, mustJSON(m.AttachmentIDs), nullString(m.CommentID),
		m.Timestamp.UTC(), m.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("retain email message: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RetainedMessageIDs returns which of the provider message ids the endpoint
// already retains.
func (s *Store) RetainedMessageIDs(ctx context.Context, q db.Querier, endpointID string, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for start := 0; start < len(ids); start += 200 {
		chunk := ids[start:min(start+200, len(ids))]
		args := []any{endpointID}
		ph := make([]string, len(chunk))
		for i, id := range chunk {
			args = append(args, id)
			ph[i] = fmt.Sprintf("$%d", i+2)
		}
		found, err := queryAll(ctx, q, "check retained email", func(r rowScanner) (string, error) {
			var id string
			return id, r.Scan(&id)
		}, `SELECT provider_message_id FROM email_messages WHERE endpoint_id = $1 AND provider_message_id IN (`+strings.Join(ph, ", ")+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, id := range found {
			out[id] = true
		}
	}
	return out, nil
}

// ListEmailMessages returns a conversation's retained mail in thread order.
func (s *Store) ListEmailMessages(ctx context.Context, q db.Querier, conversationID string) ([]domain.EmailMessage, error) {
	return queryAll(ctx, q, "list email messages", scanEmailMessage, `SELECT `+emailMessageCols+` FROM email_messages
		WHERE conversation_id = $1 ORDER BY timestamp, created_at, id`, conversationID)
}

// EmailMessageLink ties a provider message to its task comment and, for the
// message whose own delivery claimed it, that delivery.
type EmailMessageLink struct {
	ID                string
	CompanyID         string
	EndpointID        string
	ConversationID    string
	DeliveryID        string
	PublicationID     string
	CommentID         string
	ProviderMessageID string
	Direction         string
}

// InsertMessageLink stores l unless the conversation already links that
// provider message (ON CONFLICT DO NOTHING); inserted reports whether this
// call created the row. A link inserted with a DeliveryID is created
// already claimed by that delivery (see ClaimMessageLink).
func (s *Store) InsertMessageLink(ctx context.Context, q db.Querier, l *EmailMessageLink) (inserted bool, err error) {
	l.ID = NewID()
	res, err := q.ExecContext(ctx, `INSERT INTO email_message_links (id, company_id, endpoint_id, conversation_id, delivery_id,
		publication_id, comment_id, provider_message_id, direction, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)
		ON CONFLICT (endpoint_id, conversation_id, provider_message_id) DO NOTHING`,
		l.ID, l.CompanyID, l.EndpointID, l.ConversationID, nullString(l.DeliveryID), nullString(l.PublicationID),
		nullString(l.CommentID), l.ProviderMessageID, l.Direction, s.Now())
	if err != nil {
		return false, fmt.Errorf("link email message: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// MessageLink returns the link of a provider message in a conversation.
func (s *Store) MessageLink(ctx context.Context, q db.Querier, endpointID, conversationID, providerMessageID string) (EmailMessageLink, error) {
	return queryOne(ctx, q, "get email message link", func(r rowScanner) (EmailMessageLink, error) {
		var l EmailMessageLink
		var del, pub, com sql.NullString
		err := r.Scan(&l.ID, &l.CompanyID, &l.EndpointID, &l.ConversationID, &del, &pub, &com, &l.ProviderMessageID, &l.Direction)
		l.DeliveryID, l.PublicationID, l.CommentID = del.String, pub.String, com.String
		return l, err
	}, `SELECT id, company_id, endpoint_id, conversation_id, delivery_id, publication_id, comment_id, provider_message_id, direction
		FROM email_message_links WHERE endpoint_id = $1 AND conversation_id = $2 AND provider_message_id = $3`,
		endpointID, conversationID, providerMessageID)
}

// ClaimMessageLink records deliveryID as the delivery that woke the agent
// for a linked message, unless another delivery already did. It returns
// whether this delivery holds the claim (also true when it held it before),
// which is what makes "one wake per message" hold when a message was first
// retained as context by another message's delivery.
func (s *Store) ClaimMessageLink(ctx context.Context, q db.Querier, linkID, deliveryID string) (bool, error) {
	res, err := q.ExecContext(ctx, `UPDATE email_message_links SET delivery_id = $2 WHERE id = $1
		AND (delivery_id IS NULL OR delivery_id = $2)`, linkID, deliveryID)
	if err != nil {
		return false, fmt.Errorf("claim email message link: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ClaimMessageLinkFor is ClaimMessageLink addressed by the link's natural
// key, returning the link's comment id when deliveryID holds the claim:
// one round trip instead of a lookup and a claim. claimed=false (no row)
// means the link is missing or claimed by another delivery; the caller
// reads it with MessageLink to tell which.
func (s *Store) ClaimMessageLinkFor(ctx context.Context, q db.Querier, endpointID, conversationID, providerMessageID, deliveryID string) (commentID string, claimed bool, err error) {
	var c sql.NullString
	err = q.QueryRowContext(ctx, `UPDATE email_message_links SET delivery_id = $4
		WHERE endpoint_id = $1 AND conversation_id = $2 AND provider_message_id = $3 AND (delivery_id IS NULL OR delivery_id = $4)
		RETURNING comment_id`, endpointID, conversationID, providerMessageID, deliveryID).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("claim email message link: %w", err)
	}
	return c.String, true, nil
}

// LockIssueStatus returns a task's status and assignee inside a
// transaction, holding its row lock on PostgreSQL so a reopen decision is
// not raced by a concurrent status change.
func (s *Store) LockIssueStatus(ctx context.Context, tx *sql.Tx, issueID string) (status, assignee string, err error) {
	var a sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT status, assignee_agent_id FROM issues WHERE id = $1`+s.DB.ForUpdate(), issueID).Scan(&status, &a)
	if err != nil {
		return "", "", notFound("get issue", err)
	}
	return status, a.String, nil
}

// SetIssueStatus changes only a task's status (with its completion and
// cancellation times), for the email reopen rule.
func (s *Store) SetIssueStatus(ctx context.Context, q db.Querier, issueID, status string) error {
	now := s.Now()
	_, err := q.ExecContext(ctx, `UPDATE issues SET status = $2, updated_at = $3, completed_at = NULL, cancelled_at = NULL WHERE id = $1`,
		issueID, status, now)
	if err != nil {
		return fmt.Errorf("update issue status: %w", err)
	}
	return nil
}

// IssueStatus returns a task's status without locking it. The inbound
// worker reads the status this way and makes the one transition it
// performs (done → todo) with ReopenDoneIssue, a conditional update, so
// the decision is still atomic while the task row is not locked before the
// wake locks the agent row: the scheduler locks agent then task, and taking
// them in the opposite order could deadlock.
func (s *Store) IssueStatus(ctx context.Context, q db.Querier, issueID string) (string, error) {
	var status string
	if err := q.QueryRowContext(ctx, `SELECT status FROM issues WHERE id = $1`, issueID).Scan(&status); err != nil {
		return "", notFound("get issue", err)
	}
	return status, nil
}

// ReopenDoneIssue moves a task from done to todo (clearing its completion
// and cancellation times) and reports whether it did: false means the task
// was no longer done when the update ran.
func (s *Store) ReopenDoneIssue(ctx context.Context, q db.Querier, issueID string) (bool, error) {
	res, err := q.ExecContext(ctx, `UPDATE issues SET status = $2, updated_at = $3, completed_at = NULL, cancelled_at = NULL
		WHERE id = $1 AND status = $4`, issueID, domain.IssueTodo, s.Now(), domain.IssueDone)
	if err != nil {
		return false, fmt.Errorf("reopen issue: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// CountIssueActivity counts the audit entries with action on a task written
// by actorID since the given time (the email reopen limiter's window).
func (s *Store) CountIssueActivity(ctx context.Context, q db.Querier, companyID, issueID, actorID, action string, since time.Time) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM activity_log WHERE company_id = $1 AND created_at > $2
		AND entity_type = 'issue' AND entity_id = $3 AND actor_id = $4 AND action = $5`,
		companyID, since.UTC(), issueID, actorID, action).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count issue activity: %w", err)
	}
	return n, nil
}

// IssueActivitySinceLast reports whether actorID wrote an audit entry with
// action on a task after its latest entry with action after, looking back
// only to since. The reopen limiter uses it to post its explanation once
// per limited episode: an episode ends with the next real reopen.
func (s *Store) IssueActivitySinceLast(ctx context.Context, q db.Querier, companyID, issueID, actorID, action, after string, since time.Time) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM activity_log a WHERE a.company_id = $1 AND a.created_at > $2
		AND a.entity_type = 'issue' AND a.entity_id = $3 AND a.actor_id = $4 AND a.action = $5
		AND a.created_at >= COALESCE((SELECT MAX(b.created_at) FROM activity_log b WHERE b.company_id = $1 AND b.created_at > $2
			AND b.entity_type = 'issue' AND b.entity_id = $3 AND b.actor_id = $4 AND b.action = $6), a.created_at)`,
		companyID, since.UTC(), issueID, actorID, action, after).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("check issue activity: %w", err)
	}
	return n > 0, nil
}
