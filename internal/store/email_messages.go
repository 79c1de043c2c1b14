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
	res, err := q.ExecContext(ctx, insertEmailMessageSQL, emailMessageArgs(m)...)
	if err != nil {
		return false, fmt.Errorf("retain email message: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RetainedMessageIDs returns which of the provider message ids the endpoint
// already retains.
func (s *Store) RetainedMessageIDs(ctx context.Context, q db.Querier, endpointID string, ids []string) (map[string]bool, error) {
	return s.existingAmong(ctx, q, "check retained email", "email_messages", "provider_message_id", endpointID, ids)
}

// ListEmailMessages returns a conversation's retained mail in thread order.
func (s *Store) ListEmailMessages(ctx context.Context, q db.Querier, conversationID string) ([]domain.EmailMessage, error) {
	return queryAll(ctx, q, "list email messages", scanEmailMessage, `SELECT `+emailMessageCols+` FROM email_messages
		WHERE conversation_id = $1 ORDER BY timestamp, created_at, id`, conversationID)
}

// EmailMessageByProviderID returns a retained message of an endpoint.
func (s *Store) EmailMessageByProviderID(ctx context.Context, q db.Querier, endpointID, messageID string) (domain.EmailMessage, error) {
	return queryOne(ctx, q, "get email message", scanEmailMessage, `SELECT `+emailMessageCols+` FROM email_messages
		WHERE endpoint_id = $1 AND provider_message_id = $2`, endpointID, messageID)
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
	res, err := q.ExecContext(ctx, insertMessageLinkSQL, messageLinkArgs(l, s.Now())...)
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
