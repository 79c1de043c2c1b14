package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// The read models of an inbox's detail pages: every endpoint of a company
// including disconnected ones, its conversations with their tasks, and its
// recent activity (inbound deliveries and sends).

// ListAllEndpoints returns a company's endpoints including archived ones,
// newest first.
func (s *Store) ListAllEndpoints(ctx context.Context, q db.Querier, companyID string) ([]domain.EmailEndpoint, error) {
	return queryAll(ctx, q, "list email inboxes", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints
		WHERE company_id = $1 ORDER BY created_at DESC, id`, companyID)
}

// ConversationRow is one conversation of an inbox with its task's title
// and status.
type ConversationRow struct {
	domain.EmailConversation
	IssueTitle  string
	IssueStatus string
}

// ListConversationsWithIssues returns an endpoint's conversations with
// their tasks, most recent activity first, at most limit rows.
func (s *Store) ListConversationsWithIssues(ctx context.Context, q db.Querier, endpointID string, limit int) ([]ConversationRow, error) {
	return queryAll(ctx, q, "list email conversations", func(r rowScanner) (ConversationRow, error) {
		var c ConversationRow
		err := r.Scan(&c.ID, &c.CompanyID, &c.EndpointID, &c.IssueID, &c.ExternalConversationID, &c.ExternalThreadID,
			&c.Subject, &c.State, &c.LastActivityAt, &c.CreatedAt, &c.IssueTitle, &c.IssueStatus)
		c.LastActivityAt, c.CreatedAt = c.LastActivityAt.UTC(), c.CreatedAt.UTC()
		return c, err
	}, `SELECT c.id, c.company_id, c.endpoint_id, c.issue_id, c.external_conversation_id, c.external_thread_id, c.subject,
		c.state, c.last_activity_at, c.created_at, i.title, i.status FROM email_conversations c JOIN issues i ON i.id = c.issue_id
		WHERE c.endpoint_id = $1 ORDER BY c.last_activity_at DESC, c.id DESC LIMIT `+fmt.Sprint(limit), endpointID)
}

// DeliveryActivity is one inbound delivery of an inbox's activity list,
// with the task of its conversation when it has one.
type DeliveryActivity struct {
	EmailDelivery
	IssueID string
}

// RecentDeliveries returns an endpoint's newest deliveries (admission
// time, newest first), at most limit rows.
func (s *Store) RecentDeliveries(ctx context.Context, q db.Querier, endpointID string, limit int) ([]DeliveryActivity, error) {
	return queryAll(ctx, q, "list email deliveries", scanDeliveryActivity, deliveryActivitySelect+`
		WHERE d.endpoint_id = $1 ORDER BY d.received_at DESC, d.id DESC LIMIT `+fmt.Sprint(limit), endpointID)
}

// deliveryActivitySelect reads DeliveryActivity rows (scanDeliveryActivity).
const deliveryActivitySelect = `SELECT d.id, d.event_kind, d.deduplication_key, d.source, d.conversation_id, d.provider_thread_id, d.state,
		d.attempts, d.redacted_error, d.next_attempt_at, d.received_at, d.processed_at, d.updated_at, c.issue_id
		FROM email_deliveries d LEFT JOIN email_conversations c ON c.id = d.conversation_id`

func scanDeliveryActivity(r rowScanner) (DeliveryActivity, error) {
	var d DeliveryActivity
	var issue sql.NullString
	var conv, thread, redacted sql.NullString
	var next, processed sql.NullTime
	err := r.Scan(&d.ID, &d.EventKind, &d.DeduplicationKey, &d.Source, &conv, &thread, &d.State, &d.Attempts, &redacted, &next,
		&d.ReceivedAt, &processed, &d.UpdatedAt, &issue)
	d.ConversationID, d.ProviderThreadID, d.RedactedError, d.IssueID = conv.String, thread.String, redacted.String, issue.String
	d.NextAttemptAt, d.ProcessedAt = timePtr(next), timePtr(processed)
	d.ReceivedAt, d.UpdatedAt = d.ReceivedAt.UTC(), d.UpdatedAt.UTC()
	return d, err
}

// DeliveryQueue counts an endpoint's waiting deliveries by state.
type DeliveryQueue struct {
	Received, Processing, Retry int
	// OldestRetryAt is the admission time of the oldest delivery waiting
	// for a retry (nil when none waits).
	OldestRetryAt *time.Time
}

// EndpointDeliveryQueue returns the endpoint's inbound queue summary.
func (s *Store) EndpointDeliveryQueue(ctx context.Context, q db.Querier, endpointID string) (DeliveryQueue, error) {
	var out DeliveryQueue
	rows, err := q.QueryContext(ctx, `SELECT state, COUNT(*) FROM email_deliveries WHERE endpoint_id = $1
		AND state IN ('received', 'processing', 'retry') GROUP BY state`, endpointID)
	if err != nil {
		return out, fmt.Errorf("email delivery queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return out, fmt.Errorf("email delivery queue: %w", err)
		}
		switch domain.DeliveryState(st) {
		case domain.DeliveryReceived:
			out.Received = n
		case domain.DeliveryProcessing:
			out.Processing = n
		case domain.DeliveryRetry:
			out.Retry = n
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("email delivery queue: %w", err)
	}
	if out.Retry > 0 {
		// ORDER BY … LIMIT 1 rather than MIN(): on SQLite an aggregate over
		// a time column loses the declared type and comes back as text.
		var t sql.NullTime
		err := q.QueryRowContext(ctx, `SELECT received_at FROM email_deliveries WHERE endpoint_id = $1 AND state = 'retry'
			ORDER BY received_at LIMIT 1`, endpointID).Scan(&t)
		if err != nil && err != sql.ErrNoRows {
			return out, fmt.Errorf("email delivery queue: %w", err)
		}
		out.OldestRetryAt = timePtr(t)
	}
	return out, nil
}

// RecentPublications returns an endpoint's newest sends (acceptance time,
// newest first), at most limit rows.
func (s *Store) RecentPublications(ctx context.Context, q db.Querier, endpointID string, limit int) ([]EmailPublication, error) {
	return queryAll(ctx, q, "list email sends", scanPublication, `SELECT `+pubCols+pubFrom+`
		WHERE p.endpoint_id = $1 ORDER BY p.created_at DESC, p.id DESC LIMIT `+fmt.Sprint(limit), endpointID)
}
