package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
)

// Quarantine reasons: why an inbound message did not become work.
const (
	QuarantineSpam            = "spam"
	QuarantineBlocked         = "blocked"
	QuarantineUnauthenticated = "unauthenticated"
	QuarantineSenderRule      = "sender_rule"
	QuarantineAutomatic       = "automatic"
)

// QuarantineReasons lists every reason, for validating filters.
var QuarantineReasons = []string{QuarantineSpam, QuarantineBlocked, QuarantineUnauthenticated, QuarantineSenderRule,
	QuarantineAutomatic}

// QuarantinedMessage is one inbound message that did not become work
// (table email_quarantine). BodyText is empty once purged.
type QuarantinedMessage struct {
	ID                string
	CompanyID         string
	EndpointID        string
	DeliveryID        string
	ProviderMessageID string
	ProviderThreadID  string
	From              string
	Subject           string
	ReceivedAt        time.Time
	Reason            string
	Detail            string
	BodyText          string
	ReleasedAt        *time.Time
	ReleasedBy        string
	PurgedAt          *time.Time
	CreatedAt         time.Time
}

const quarantineCols = `id, company_id, endpoint_id, delivery_id, provider_message_id, provider_thread_id, from_address, subject,
	received_at, reason, detail, body_text, released_at, released_by, purged_at, created_at`

func scanQuarantined(row rowScanner) (QuarantinedMessage, error) {
	var m QuarantinedMessage
	var body, by sql.NullString
	var rel, purged sql.NullTime
	if err := row.Scan(&m.ID, &m.CompanyID, &m.EndpointID, &m.DeliveryID, &m.ProviderMessageID, &m.ProviderThreadID, &m.From,
		&m.Subject, &m.ReceivedAt, &m.Reason, &m.Detail, &body, &rel, &by, &purged, &m.CreatedAt); err != nil {
		return m, err
	}
	m.BodyText, m.ReleasedBy = body.String, by.String
	m.ReleasedAt, m.PurgedAt = timePtr(rel), timePtr(purged)
	m.ReceivedAt, m.CreatedAt = m.ReceivedAt.UTC(), m.CreatedAt.UTC()
	return m, nil
}

// InsertQuarantined records a message that did not become work, once per
// delivery (a repeated insert for the same delivery changes nothing).
func (s *Store) InsertQuarantined(ctx context.Context, q db.Querier, m *QuarantinedMessage) error {
	if m.ID == "" {
		m.ID = NewID()
	}
	m.CreatedAt = s.Now()
	if _, err := q.ExecContext(ctx, `INSERT INTO email_quarantine (id, company_id, endpoint_id, delivery_id, provider_message_id,
		provider_thread_id, from_address, subject, received_at, reason, detail, body_text, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (delivery_id) DO NOTHING`,
		m.ID, m.CompanyID, m.EndpointID, m.DeliveryID, m.ProviderMessageID, m.ProviderThreadID, m.From, m.Subject,
		m.ReceivedAt.UTC(), m.Reason, m.Detail, nullString(m.BodyText), m.CreatedAt); err != nil {
		return fmt.Errorf("quarantine message: %w", err)
	}
	return nil
}

// GetQuarantined returns one quarantined message.
func (s *Store) GetQuarantined(ctx context.Context, q db.Querier, id string) (QuarantinedMessage, error) {
	m, err := scanQuarantined(q.QueryRowContext(ctx, `SELECT `+quarantineCols+` FROM email_quarantine WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, fmt.Errorf("get quarantined message: %w", err)
	}
	return m, nil
}

// QuarantineFilter selects a quarantine listing: one company, optionally
// one inbox and one reason; released messages are left out.
type QuarantineFilter struct {
	CompanyID  string
	EndpointID string
	Reason     string
}

// ListQuarantined returns one page of unreleased quarantined messages,
// newest first (keyset on created_at, id: stable while mail arrives).
func (s *Store) ListQuarantined(ctx context.Context, q db.Querier, f QuarantineFilter, p Page) ([]QuarantinedMessage, error) {
	where, order, pargs := p.keyset("created_at", "id", 4)
	args := append([]any{f.CompanyID, f.EndpointID, f.Reason}, pargs...)
	return queryAll(ctx, q, "list quarantine", scanQuarantined, `SELECT `+quarantineCols+` FROM email_quarantine
		WHERE company_id = $1 AND ($2 = '' OR endpoint_id = $2) AND ($3 = '' OR reason = $3) AND released_at IS NULL`+where+order, args...)
}

// MarkQuarantineReleased records a release by actor, once: released is
// false when the message was already released (by this or a concurrent
// call; the row's lock orders them).
func (s *Store) MarkQuarantineReleased(ctx context.Context, q db.Querier, id, actor string) (released bool, err error) {
	res, err := q.ExecContext(ctx, `UPDATE email_quarantine SET released_at = $2, released_by = $3 WHERE id = $1 AND released_at IS NULL`,
		id, s.Now(), actor)
	if err != nil {
		return false, fmt.Errorf("release quarantined message: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("release quarantined message: %w", err)
	}
	return n == 1, nil
}

// PurgeQuarantine drops the content of quarantined messages created
// before cutoff (the rows stay, as the trace), and returns how many.
func (s *Store) PurgeQuarantine(ctx context.Context, q db.Querier, cutoff time.Time) (int64, error) {
	res, err := q.ExecContext(ctx, `UPDATE email_quarantine SET body_text = NULL, purged_at = $2
		WHERE created_at < $1 AND purged_at IS NULL`, cutoff.UTC(), s.Now())
	if err != nil {
		return 0, fmt.Errorf("purge quarantine: %w", err)
	}
	return res.RowsAffected()
}

// RequeueDelivery puts a finished delivery back into the receiving queue
// with event as its normalized event (a released quarantined message).
func (s *Store) RequeueDelivery(ctx context.Context, q db.Querier, id string, event []byte) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_deliveries SET state = 'received', attempts = 0, redacted_error = NULL,
		next_attempt_at = NULL, processed_at = NULL, normalized_event = $2, updated_at = $3 WHERE id = $1`,
		id, string(event), s.Now()); err != nil {
		return fmt.Errorf("requeue email delivery: %w", err)
	}
	return nil
}
