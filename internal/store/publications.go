package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// EmailPublication is an outbound email's worker row joined with its
// immutable send intent.
type EmailPublication struct {
	ID                string
	CompanyID         string
	EndpointID        string
	ConversationID    string
	IssueID           string
	State             domain.SendState
	ProviderMessageID string
	ProviderThreadID  string
	Attempts          int
	Error             string
	NextAttemptAt     *time.Time
	PublishedAt       *time.Time
	CreatedAt         time.Time
	// Send intent.
	Request        json.RawMessage
	Actor          json.RawMessage
	Digest         string
	Outcome        domain.SendOutcome
	Attachments    json.RawMessage
	FirstAttemptAt *time.Time
	// DeliveredAt is when the delivery receipt set the outcome delivered.
	DeliveredAt *time.Time
}

const pubCols = `p.id, p.company_id, p.endpoint_id, p.conversation_id, p.issue_id, p.state, p.provider_message_id,
	p.provider_thread_id, p.attempts, p.redacted_error, p.next_attempt_at, p.published_at, p.created_at,
	s.request, s.actor, s.digest, s.outcome, s.attachments, s.first_attempt_at, s.delivered_at`

const pubFrom = ` FROM email_publications p JOIN email_sends s ON s.publication_id = p.id`

func scanPublication(row rowScanner) (EmailPublication, error) {
	var p EmailPublication
	var msgID, threadID, errText sql.NullString
	var next, published, first, delivered sql.NullTime
	var req, actor, atts []byte
	err := row.Scan(&p.ID, &p.CompanyID, &p.EndpointID, &p.ConversationID, &p.IssueID, &p.State, &msgID, &threadID,
		&p.Attempts, &errText, &next, &published, &p.CreatedAt, &req, &actor, &p.Digest, &p.Outcome, &atts, &first, &delivered)
	if err != nil {
		return p, err
	}
	p.ProviderMessageID, p.ProviderThreadID, p.Error = msgID.String, threadID.String, errText.String
	p.NextAttemptAt, p.PublishedAt, p.FirstAttemptAt = timePtr(next), timePtr(published), timePtr(first)
	p.DeliveredAt = timePtr(delivered)
	p.CreatedAt = p.CreatedAt.UTC()
	p.Request, p.Actor, p.Attachments = rawJSON(req), rawJSON(actor), rawJSON(atts)
	return p, nil
}

// InsertPublication stores a publication and its immutable send intent.
func (s *Store) InsertPublication(ctx context.Context, q db.Querier, p *EmailPublication) error {
	now := s.Now()
	p.CreatedAt = now
	if p.State == "" {
		p.State = domain.SendPending
	}
	if p.Outcome == "" {
		p.Outcome = domain.OutcomeQueued
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO email_publications (id, company_id, endpoint_id, conversation_id, issue_id,
		idempotency_key, payload, state, redacted_error, created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$10)`,
		p.ID, p.CompanyID, p.EndpointID, p.ConversationID, p.IssueID, "email:"+p.ID, `{}`, string(p.State), nullString(p.Error), now); err != nil {
		if db.IsUniqueViolation(err) {
			return fmt.Errorf("insert publication: %w", ErrConflict)
		}
		return fmt.Errorf("insert publication: %w", err)
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO email_sends (publication_id, company_id, endpoint_id, request, actor, digest,
		outcome, attachments, created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$9)`,
		p.ID, p.CompanyID, p.EndpointID, string(p.Request), string(p.Actor), p.Digest, p.Outcome, nullJSON(p.Attachments), now); err != nil {
		return fmt.Errorf("insert send intent: %w", err)
	}
	return nil
}

// GetPublication returns a publication with its send intent.
func (s *Store) GetPublication(ctx context.Context, q db.Querier, id string) (EmailPublication, error) {
	return queryOne(ctx, q, "get email delivery", scanPublication, `SELECT `+pubCols+pubFrom+` WHERE p.id = $1`, id)
}

// PublicationByProviderMessage returns the endpoint's publication that
// produced a provider message.
func (s *Store) PublicationByProviderMessage(ctx context.Context, q db.Querier, endpointID, messageID string) (EmailPublication, error) {
	return queryOne(ctx, q, "get email delivery", scanPublication, `SELECT `+pubCols+pubFrom+`
		WHERE p.endpoint_id = $1 AND p.provider_message_id = $2`, endpointID, messageID)
}

// CompanyPublicationByProviderMessage returns a publication of any of the
// company's inboxes that produced a provider message (the newest, should
// several share the id). The endpoint subquery, rather than a filter on
// the publication's company_id, lets both databases probe the
// (endpoint_id, provider_message_id) index once per inbox instead of
// scanning the company's outbox.
func (s *Store) CompanyPublicationByProviderMessage(ctx context.Context, q db.Querier, companyID, messageID string) (EmailPublication, error) {
	return queryOne(ctx, q, "get email delivery", scanPublication, `SELECT `+pubCols+pubFrom+`
		WHERE p.endpoint_id IN (SELECT e.id FROM email_endpoints e WHERE e.company_id = $1) AND p.provider_message_id = $2
		ORDER BY p.created_at DESC, p.id DESC LIMIT 1`, companyID, messageID)
}

// ListPublicationsByConversation returns a conversation's sends, oldest first.
func (s *Store) ListPublicationsByConversation(ctx context.Context, q db.Querier, conversationID string) ([]EmailPublication, error) {
	return queryAll(ctx, q, "list email deliveries", scanPublication, `SELECT `+pubCols+pubFrom+`
		WHERE p.conversation_id = $1 ORDER BY p.created_at, p.id`, conversationID)
}

// PendingSends returns up to limit of an endpoint's sends the worker may
// still act on (queued or uncertain, and not parked as delivery_unknown),
// oldest first.
func (s *Store) PendingSends(ctx context.Context, q db.Querier, endpointID string, limit int) ([]EmailPublication, error) {
	return queryAll(ctx, q, "pending sends", scanPublication, `SELECT `+pubCols+pubFrom+`
		WHERE p.endpoint_id = $1 AND s.outcome IN ('queued', 'uncertain') AND p.state IN ('pending', 'streaming', 'retry')
		ORDER BY p.created_at, p.id LIMIT $2`, endpointID, limit)
}

// EndpointsWithPendingSends returns the ids of endpoints holding sends the
// worker may still act on.
func (s *Store) EndpointsWithPendingSends(ctx context.Context, q db.Querier) ([]string, error) {
	return queryAll(ctx, q, "pending send endpoints", func(r rowScanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT DISTINCT p.endpoint_id`+pubFrom+` WHERE s.outcome IN ('queued', 'uncertain') AND p.state IN ('pending', 'streaming', 'retry')`)
}

// StartAttempt records that an attempt begins: attempts+1, state streaming,
// first_attempt_at set once.
func (s *Store) StartAttempt(ctx context.Context, q db.Querier, id string) error {
	now := s.Now()
	if _, err := q.ExecContext(ctx, `UPDATE email_publications SET state = 'streaming', attempts = attempts + 1, updated_at = $2
		WHERE id = $1`, id, now); err != nil {
		return fmt.Errorf("start send attempt: %w", err)
	}
	if _, err := q.ExecContext(ctx, `UPDATE email_sends SET first_attempt_at = COALESCE(first_attempt_at, $2), updated_at = $2
		WHERE publication_id = $1`, id, now); err != nil {
		return fmt.Errorf("start send attempt: %w", err)
	}
	return nil
}

// SetPublicationState writes the worker state, error and next attempt; it
// never overwrites a publication already published unless state is
// "published".
func (s *Store) SetPublicationState(ctx context.Context, q db.Querier, id string, state domain.SendState, errText string, next *time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE email_publications SET state = $2, redacted_error = $3, next_attempt_at = $4, updated_at = $5
		WHERE id = $1 AND (state <> 'published' OR $2 = 'published')`, id, string(state), nullString(errText), nullTime(next), s.Now())
	if err != nil {
		return fmt.Errorf("set publication state: %w", err)
	}
	return nil
}

// SetSendOutcome writes the user-facing outcome when the current outcome is
// one of from (empty from means unconditionally). The first change to
// delivered records delivered_at.
func (s *Store) SetSendOutcome(ctx context.Context, q db.Querier, id string, outcome domain.SendOutcome, from ...domain.SendOutcome) (bool, error) {
	var delivered *time.Time
	now := s.Now()
	if outcome == domain.OutcomeDelivered {
		delivered = &now
	}
	query := `UPDATE email_sends SET outcome = $2, updated_at = $3, delivered_at = COALESCE(delivered_at, $4) WHERE publication_id = $1`
	args := []any{id, string(outcome), now, nullTime(delivered)}
	if len(from) > 0 {
		query += ` AND outcome IN (`
		for i, f := range from {
			if i > 0 {
				query += ", "
			}
			args = append(args, string(f))
			query += fmt.Sprintf("$%d", len(args))
		}
		query += `)`
	}
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return false, fmt.Errorf("set send outcome: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// MarkPublished records the provider's message and thread for a send. The
// error is cleared only on the first publish: a receipt (say a bounce) may
// already have recorded its diagnostic on a published send.
func (s *Store) MarkPublished(ctx context.Context, q db.Querier, id, messageID, threadID string) error {
	now := s.Now()
	if _, err := q.ExecContext(ctx, `UPDATE email_publications SET state = 'published', provider_message_id = $2, provider_thread_id = $3,
		published_at = COALESCE(published_at, $4),
		redacted_error = CASE WHEN state = 'published' THEN redacted_error ELSE NULL END,
		next_attempt_at = NULL, updated_at = $4 WHERE id = $1`,
		id, messageID, threadID, now); err != nil {
		return fmt.Errorf("mark published: %w", err)
	}
	return nil
}

// SetPublicationError records a diagnostic on a publication without
// changing its state (a receipt reporting a bounce on a published send).
func (s *Store) SetPublicationError(ctx context.Context, q db.Querier, id, errText string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_publications SET redacted_error = $2, updated_at = $3 WHERE id = $1`,
		id, errText, s.Now()); err != nil {
		return fmt.Errorf("set publication error: %w", err)
	}
	return nil
}

// SetFirstAttempt overrides first_attempt_at (tests of the 23-hour window
// and operators' tooling).
func (s *Store) SetFirstAttempt(ctx context.Context, q db.Querier, id string, t time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_sends SET first_attempt_at = $2 WHERE publication_id = $1`, id, t.UTC()); err != nil {
		return fmt.Errorf("set first attempt: %w", err)
	}
	return nil
}
