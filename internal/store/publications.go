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
	// ApprovedRequest is the version a reviewer approved with edits (nil:
	// the request is sent as the agent wrote it).
	ApprovedRequest json.RawMessage
}

const pubCols = `p.id, p.company_id, p.endpoint_id, p.conversation_id, p.issue_id, p.state, p.provider_message_id,
	p.provider_thread_id, p.attempts, p.redacted_error, p.next_attempt_at, p.published_at, p.created_at,
	s.request, s.actor, s.digest, s.outcome, s.attachments, s.first_attempt_at, s.delivered_at, s.approved_request`

const pubFrom = ` FROM email_publications p JOIN email_sends s ON s.publication_id = p.id`

func scanPublication(row rowScanner) (EmailPublication, error) {
	var p EmailPublication
	var msgID, threadID, errText sql.NullString
	var next, published, first, delivered sql.NullTime
	var req, actor, atts, approved []byte
	err := row.Scan(&p.ID, &p.CompanyID, &p.EndpointID, &p.ConversationID, &p.IssueID, &p.State, &msgID, &threadID,
		&p.Attempts, &errText, &next, &published, &p.CreatedAt, &req, &actor, &p.Digest, &p.Outcome, &atts, &first, &delivered, &approved)
	if err != nil {
		return p, err
	}
	p.ProviderMessageID, p.ProviderThreadID, p.Error = msgID.String, threadID.String, errText.String
	p.NextAttemptAt, p.PublishedAt, p.FirstAttemptAt = timePtr(next), timePtr(published), timePtr(first)
	p.DeliveredAt = timePtr(delivered)
	p.CreatedAt = p.CreatedAt.UTC()
	p.Request, p.Actor, p.Attachments, p.ApprovedRequest = rawJSON(req), rawJSON(actor), rawJSON(atts), rawJSON(approved)
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
// several share the id). Why this shape: the provider_message_id index
// finds the message's few sends first and the endpoint check keeps them to
// the company, so the cost does not grow with the company's inboxes (probing
// the (endpoint_id, provider_message_id) index once per inbox made every
// received email slower with each inbox added).
func (s *Store) CompanyPublicationByProviderMessage(ctx context.Context, q db.Querier, companyID, messageID string) (EmailPublication, error) {
	return queryOne(ctx, q, "get email delivery", scanPublication, `SELECT `+pubCols+pubFrom+`
		WHERE p.provider_message_id = $2 AND EXISTS (SELECT 1 FROM email_endpoints e WHERE e.id = p.endpoint_id AND e.company_id = $1)
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

// PendingSendEndpoint is an endpoint holding sends the worker may still
// act on, with the endpoint's status.
type PendingSendEndpoint struct {
	ID     string
	Status string
}

// EndpointsWithPendingSends returns the endpoints holding sends the worker
// may still act on, with their status (one query, so the worker need not
// read each endpoint to skip a paused one).
func (s *Store) EndpointsWithPendingSends(ctx context.Context, q db.Querier) ([]PendingSendEndpoint, error) {
	return queryAll(ctx, q, "pending send endpoints", func(r rowScanner) (PendingSendEndpoint, error) {
		var e PendingSendEndpoint
		return e, r.Scan(&e.ID, &e.Status)
	}, `SELECT e.id, e.status FROM email_endpoints e WHERE e.id IN (SELECT p.endpoint_id`+pubFrom+`
		WHERE s.outcome IN ('queued', 'uncertain') AND p.state IN ('pending', 'streaming', 'retry'))`)
}

// SettledSend is one unfinished send that SettleDisconnectedSends ended.
type SettledSend struct {
	ID        string
	CompanyID string
	// Outcome is failed (never attempted) or uncertain (an attempt may
	// have reached the provider); From is the outcome before.
	Outcome, From domain.SendOutcome
}

// SettleDisconnectedSends ends every unfinished send (queued, uncertain
// or awaiting review, not parked) of a disconnected endpoint (docs/email-pipeline.md, "Sends
// of a disconnected inbox"): a send never attempted becomes failed with
// neverMsg; a send with an attempt, which may have reached the provider,
// becomes delivery_unknown / uncertain with inDoubtMsg, for an operator to
// resolve. Call it inside the transaction that archives the endpoint.
//
// Why the row lock: StartAttempt only starts an attempt on a row still
// pending, streaming or retry. On PostgreSQL the FOR UPDATE here and
// StartAttempt's UPDATE serialize on the publication row, so a racing
// attempt either started first (attempts > 0: the send is settled as
// uncertain) or finds the send failed and never calls the provider. SQLite
// has one writer, which serializes them anyway.
func (s *Store) SettleDisconnectedSends(ctx context.Context, q db.Querier, endpointID, neverMsg, inDoubtMsg string) ([]SettledSend, error) {
	lock := ""
	if s.DB.Dialect == db.Postgres {
		lock = " FOR UPDATE OF p"
	}
	type row struct {
		SettledSend
		attempts int
	}
	rows, err := queryAll(ctx, q, "settle disconnected sends", func(r rowScanner) (row, error) {
		var v row
		return v, r.Scan(&v.ID, &v.CompanyID, &v.attempts, &v.From)
	}, `SELECT p.id, p.company_id, p.attempts, s.outcome`+pubFrom+`
		WHERE p.endpoint_id = $1 AND s.outcome IN ('queued', 'uncertain', 'awaiting_review') AND p.state IN ('pending', 'streaming', 'retry')
		ORDER BY p.created_at, p.id`+lock, endpointID)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	out := make([]SettledSend, 0, len(rows))
	for _, r := range rows {
		state, outcome, msg := domain.SendUnknown, domain.OutcomeUncertain, inDoubtMsg
		if r.attempts == 0 && (r.From == domain.OutcomeQueued || r.From == domain.OutcomeAwaitingReview) {
			state, outcome, msg = domain.SendFailed, domain.OutcomeFailed, neverMsg
		}
		if _, err := q.ExecContext(ctx, `UPDATE email_publications SET state = $2, redacted_error = $3, next_attempt_at = NULL,
			updated_at = $4 WHERE id = $1`, r.ID, string(state), msg, now); err != nil {
			return nil, fmt.Errorf("settle disconnected send: %w", err)
		}
		if _, err := q.ExecContext(ctx, `UPDATE email_sends SET outcome = $2, updated_at = $3 WHERE publication_id = $1`,
			r.ID, string(outcome), now); err != nil {
			return nil, fmt.Errorf("settle disconnected send: %w", err)
		}
		if r.From == domain.OutcomeAwaitingReview {
			// A held send of a disconnected inbox can never be approved.
			if _, err := q.ExecContext(ctx, `UPDATE email_send_reviews SET status = 'rejected', decision_reason = $2, decided_at = $3
				WHERE publication_id = $1 AND status = 'awaiting_review'`, r.ID, "The inbox was disconnected", now); err != nil {
				return nil, fmt.Errorf("settle disconnected send: %w", err)
			}
		}
		r.Outcome = outcome
		out = append(out, r.SettledSend)
	}
	return out, nil
}

// ErrSendSettled means a send was settled (failed, parked or published)
// before its attempt could start: no attempt may be made.
var ErrSendSettled = errors.New("send already settled")

// StartAttempt records that an attempt begins: attempts+1, state streaming,
// first_attempt_at set once. It returns ErrSendSettled, changing nothing,
// when the send is no longer pending, streaming or retry (say its inbox was
// disconnected meanwhile): the caller must not call the provider.
func (s *Store) StartAttempt(ctx context.Context, q db.Querier, id string) error {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE email_publications SET state = 'streaming', attempts = attempts + 1, updated_at = $2
		WHERE id = $1 AND state IN ('pending', 'streaming', 'retry')`, id, now)
	if err != nil {
		return fmt.Errorf("start send attempt: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("start send attempt: %w", err)
	} else if n == 0 {
		return fmt.Errorf("start send attempt %s: %w", id, ErrSendSettled)
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

// MarkPublished records the provider's message and thread (empty when
// unknown: an operator's unverified resolution) for a send. The
// error is cleared only on the first publish: a receipt (say a bounce) may
// already have recorded its diagnostic on a published send.
func (s *Store) MarkPublished(ctx context.Context, q db.Querier, id, messageID, threadID string) error {
	now := s.Now()
	if _, err := q.ExecContext(ctx, `UPDATE email_publications SET state = 'published', provider_message_id = $2, provider_thread_id = $3,
		published_at = COALESCE(published_at, $4),
		redacted_error = CASE WHEN state = 'published' THEN redacted_error ELSE NULL END,
		next_attempt_at = NULL, updated_at = $4 WHERE id = $1`,
		id, messageID, nullString(threadID), now); err != nil {
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
