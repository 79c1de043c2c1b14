package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

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
	return s.insertConversationRow(ctx, q, c)
}

// insertConversationRow is InsertConversation with c's id and times set.
func (s *Store) insertConversationRow(ctx context.Context, q db.Querier, c *domain.EmailConversation) (created bool, err error) {
	res, err := q.ExecContext(ctx, `INSERT INTO email_conversations (`+conversationCols+`, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$10) ON CONFLICT (endpoint_id, external_thread_id) DO NOTHING`,
		c.ID, c.CompanyID, c.EndpointID, c.IssueID, c.ExternalConversationID, c.ExternalThreadID, c.Subject, c.State,
		c.LastActivityAt, c.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("create email conversation: %w", err)
	}
	return insertedOrExisting(res, c, func() (domain.EmailConversation, error) {
		return s.ConversationByThread(ctx, q, c.EndpointID, c.ExternalThreadID)
	})
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

// SetConversationThread binds a conversation to its provider thread (this
// replaces the pending:<key> placeholder of a new outbound conversation).
func (s *Store) SetConversationThread(ctx context.Context, q db.Querier, id, threadID, state string) error {
	now := s.Now()
	if _, err := q.ExecContext(ctx, `UPDATE email_conversations SET external_thread_id = $2, state = $3, last_activity_at = $4, updated_at = $4
		WHERE id = $1`, id, threadID, state, now); err != nil {
		if db.IsUniqueViolation(err) {
			return fmt.Errorf("bind conversation thread: %w", ErrConflict)
		}
		return fmt.Errorf("bind conversation thread: %w", err)
	}
	return nil
}

// GetConversation returns a conversation by id.
func (s *Store) GetConversation(ctx context.Context, q db.Querier, id string) (domain.EmailConversation, error) {
	return queryOne(ctx, q, "get email conversation", scanConversation, `SELECT `+conversationCols+` FROM email_conversations WHERE id = $1`, id)
}

// ThreadFacts is what a receiving transaction reads about a message and
// its thread before it decides what to do (ReadThreadFacts).
type ThreadFacts struct {
	// Conversation is the endpoint's conversation of the thread, when
	// Known; Status is its task's status, read without a lock (see
	// IssueStatus).
	Conversation domain.EmailConversation
	Known        bool
	Status       string
	// Published reports that a send of the company's inboxes produced the
	// message's provider id (asked only with checkPublished).
	Published bool
	// Retained are those of the asked message ids the endpoint retained.
	Retained map[string]bool
}

// ReadThreadFacts reads ConversationByThreadWithStatus of threadID,
// whether CompanyPublicationByProviderMessage finds messageID (when
// checkPublished) and RetainedMessageIDs of ids: separate statements on
// SQLite, one on PostgreSQL, where the three are independent reads of one
// transaction's snapshot and each round trip costs both processes (a
// thread of more than 200 messages takes the separate statements there
// too, so existingAmong chunks its keys).
func (s *Store) ReadThreadFacts(ctx context.Context, q db.Querier, endpointID, companyID, threadID, messageID string,
	checkPublished bool, ids []string) (ThreadFacts, error) {
	if s.DB.Dialect == db.Postgres && len(ids) <= 200 {
		return s.readThreadFactsPostgres(ctx, q, endpointID, companyID, threadID, messageID, checkPublished, ids)
	}
	var f ThreadFacts
	var err error
	f.Conversation, f.Status, err = s.ConversationByThreadWithStatus(ctx, q, endpointID, threadID)
	switch {
	case err == nil:
		f.Known = true
	case !errors.Is(err, ErrNotFound):
		return f, err
	}
	if checkPublished && messageID != "" {
		_, err := s.CompanyPublicationByProviderMessage(ctx, q, companyID, messageID)
		switch {
		case err == nil:
			f.Published = true
		case !errors.Is(err, ErrNotFound):
			return f, err
		}
	}
	f.Retained, err = s.RetainedMessageIDs(ctx, q, endpointID, ids)
	return f, err
}

// readThreadFactsPostgres is ReadThreadFacts in one statement: the
// conversation by a left join on a one-row relation (so a thread without
// one still returns its other facts), the publication as EXISTS, and the
// retained ids as a JSON array of existingAmong's unique-index probes
// (JSON, since database/sql scans no arrays; message ids are
// sender-controlled text, so no delimiter would be safe).
func (s *Store) readThreadFactsPostgres(ctx context.Context, q db.Querier, endpointID, companyID, threadID, messageID string,
	checkPublished bool, ids []string) (ThreadFacts, error) {
	var f ThreadFacts
	var id, company, endpoint, issue, extConv, extThread, subject, state, status sql.NullString
	var last, created sql.NullTime
	var retained string
	if ids == nil {
		ids = []string{}
	}
	err := q.QueryRowContext(ctx, `SELECT c.id, c.company_id, c.endpoint_id, c.issue_id, c.external_conversation_id,
		c.external_thread_id, c.subject, c.state, c.last_activity_at, c.created_at, i.status,
		$5::boolean AND $4 <> '' AND EXISTS (SELECT 1 FROM email_publications p WHERE p.provider_message_id = $4
			AND EXISTS (SELECT 1 FROM email_endpoints e WHERE e.id = p.endpoint_id AND e.company_id = $3)),
		(SELECT COALESCE(json_agg(k.v), '[]')::text `+probeKeys("email_messages", "provider_message_id", "$1", "$6")+`)
		FROM (SELECT 1) one
		LEFT JOIN (email_conversations c JOIN issues i ON i.id = c.issue_id) ON c.endpoint_id = $1 AND c.external_thread_id = $2`,
		endpointID, threadID, companyID, messageID, checkPublished, ids).Scan(&id, &company, &endpoint, &issue, &extConv,
		&extThread, &subject, &state, &last, &created, &status, &f.Published, &retained)
	if err != nil {
		return f, fmt.Errorf("read thread facts: %w", err)
	}
	if id.Valid {
		f.Known, f.Status = true, status.String
		f.Conversation = domain.EmailConversation{ID: id.String, CompanyID: company.String, EndpointID: endpoint.String,
			IssueID: issue.String, ExternalConversationID: extConv.String, ExternalThreadID: extThread.String,
			Subject: subject.String, State: state.String, LastActivityAt: last.Time.UTC(), CreatedAt: created.Time.UTC()}
	}
	var list []string
	if err := json.Unmarshal([]byte(retained), &list); err != nil {
		return f, fmt.Errorf("read thread facts: retained ids: %w", err)
	}
	f.Retained = make(map[string]bool, len(list))
	for _, v := range list {
		f.Retained[v] = true
	}
	return f, nil
}
