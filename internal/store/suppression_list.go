package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
)

// Suppression is one recipient an inbox must not mail (a permanent bounce
// or a complaint), with the provider message that caused it when known.
type Suppression struct {
	EndpointID      string
	EndpointAddress string
	Address         string
	Reason          string
	SourceMessageID string
	CreatedAt       time.Time
}

// SuppressFrom is Suppress recording the provider message whose receipt
// suppressed the address.
func (s *Store) SuppressFrom(ctx context.Context, q db.Querier, companyID, endpointID, address, reason, sourceMessageID string) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO email_suppressions (endpoint_id, address, company_id, reason, created_at, source_message_id)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (endpoint_id, address) DO NOTHING`,
		endpointID, address, companyID, reason, s.Now(), nullString(sourceMessageID)); err != nil {
		return fmt.Errorf("suppress recipient: %w", err)
	}
	return nil
}

// SuppressionCursor is the page cursor of a suppression row: its time, its
// inbox as the id and its address as the key. A suppression's identity is
// (inbox, address), so here Key is the last tie-breaker, not a leading
// sort key as in other listings.
func SuppressionCursor(v Suppression) Cursor {
	return Cursor{At: v.CreatedAt, ID: v.EndpointID, Key: v.Address}
}

// ListSuppressions returns one page of a company's suppressed recipients,
// newest first (keyset on created_at, endpoint_id, address).
func (s *Store) ListSuppressions(ctx context.Context, q db.Querier, companyID string, p Page) ([]Suppression, error) {
	args := []any{companyID, p.limit() + 1}
	page := ""
	if after := p.After; after != nil {
		if after.Key == "" {
			return nil, ErrBadCursor
		}
		page = ` AND (s.created_at < $3 OR (s.created_at = $3 AND (s.endpoint_id < $4 OR (s.endpoint_id = $4 AND s.address < $5))))`
		args = append(args, after.At.UTC(), after.ID, after.Key)
	}
	return queryAll(ctx, q, "list suppressions", func(row rowScanner) (Suppression, error) {
		var v Suppression
		var src sql.NullString
		err := row.Scan(&v.EndpointID, &v.EndpointAddress, &v.Address, &v.Reason, &src, &v.CreatedAt)
		v.SourceMessageID, v.CreatedAt = src.String, v.CreatedAt.UTC()
		return v, err
	}, `SELECT s.endpoint_id, e.address, s.address, s.reason, s.source_message_id, s.created_at
		FROM email_suppressions s JOIN email_endpoints e ON e.id = s.endpoint_id
		WHERE s.company_id = $1`+page+` ORDER BY s.created_at DESC, s.endpoint_id DESC, s.address DESC LIMIT $2`, args...)
}

// LiftSuppression removes a company's suppressions of address (of one
// inbox when endpointID is set) and returns those removed.
func (s *Store) LiftSuppression(ctx context.Context, q db.Querier, companyID, endpointID, address string) ([]Suppression, error) {
	return queryAll(ctx, q, "lift suppression", func(row rowScanner) (Suppression, error) {
		var v Suppression
		var src sql.NullString
		err := row.Scan(&v.EndpointID, &v.Address, &v.Reason, &src, &v.CreatedAt)
		v.SourceMessageID = src.String
		return v, err
	}, `DELETE FROM email_suppressions WHERE company_id = $1 AND address = $2 AND ($3 = '' OR endpoint_id = $3)
		RETURNING endpoint_id, address, reason, source_message_id, created_at`, companyID, address, endpointID)
}

// BounceStats counts an inbox's last n attempted sends and how many of
// them bounced.
func (s *Store) BounceStats(ctx context.Context, q db.Querier, endpointID, bounceError string, n int) (sends, bounced int, err error) {
	err = q.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN redacted_error = $2 THEN 1 ELSE 0 END), 0) FROM (
		SELECT redacted_error FROM email_publications WHERE endpoint_id = $1 AND provider_message_id IS NOT NULL
		ORDER BY created_at DESC LIMIT $3) recent`, endpointID, bounceError, n).Scan(&sends, &bounced)
	if err != nil {
		return 0, 0, fmt.Errorf("bounce stats: %w", err)
	}
	return sends, bounced, nil
}

// InboxBounce is one active inbox's bounce count over its last sends.
type InboxBounce struct {
	EndpointID     string
	Sends, Bounced int
}

// ActiveBounceRates returns, for every active inbox that sent, how many
// of its last n attempted sends bounced (one statement for all inboxes).
func (s *Store) ActiveBounceRates(ctx context.Context, q db.Querier, bounceError string, n int) ([]InboxBounce, error) {
	return queryAll(ctx, q, "bounce rates", func(row rowScanner) (InboxBounce, error) {
		var b InboxBounce
		err := row.Scan(&b.EndpointID, &b.Sends, &b.Bounced)
		return b, err
	}, `SELECT endpoint_id, COUNT(*), COALESCE(SUM(CASE WHEN redacted_error = $1 THEN 1 ELSE 0 END), 0) FROM (
		SELECT p.endpoint_id, p.redacted_error,
			ROW_NUMBER() OVER (PARTITION BY p.endpoint_id ORDER BY p.created_at DESC, p.id DESC) AS rn
		FROM email_publications p JOIN email_endpoints e ON e.id = p.endpoint_id AND e.status = 'active'
		WHERE p.provider_message_id IS NOT NULL) recent
		WHERE rn <= $2 GROUP BY endpoint_id`, bounceError, n)
}
