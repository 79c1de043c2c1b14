package store

import (
	"context"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

func commentArgs(c *domain.Comment) []any {
	return []any{c.ID, c.CompanyID, c.IssueID, c.Body, c.AuthorKind, nullString(c.AuthorAgentID), nullString(c.AuthorUserID),
		nullString(c.RunID), c.CreatedAt}
}

func emailMessageArgs(m *domain.EmailMessage) []any {
	if m.AttachmentIDs == nil {
		m.AttachmentIDs = []string{}
	}
	return []any{m.ID, m.CompanyID, m.EndpointID, m.ConversationID, m.ProviderMessageID, m.ProviderThreadID, mustJSON(m.Envelope),
		nullJSON(m.Headers), m.Text, m.FullText, m.Direction, m.Automatic, mustJSON(m.AttachmentIDs), nullString(m.CommentID),
		m.Timestamp.UTC(), m.CreatedAt}
}

func messageLinkArgs(l *EmailMessageLink, now any) []any {
	return []any{l.ID, l.CompanyID, l.EndpointID, l.ConversationID, nullString(l.DeliveryID), nullString(l.PublicationID),
		nullString(l.CommentID), l.ProviderMessageID, l.Direction, now}
}

const (
	insertCommentSQL      = `INSERT INTO issue_comments (` + commentCols + `) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`
	insertEmailMessageSQL = `INSERT INTO email_messages (` + emailMessageCols + `)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16) ON CONFLICT (endpoint_id, provider_message_id) DO NOTHING`
	insertMessageLinkSQL = `INSERT INTO email_message_links (id, company_id, endpoint_id, conversation_id, delivery_id,
		publication_id, comment_id, provider_message_id, direction, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)
		ON CONFLICT (endpoint_id, conversation_id, provider_message_id) DO NOTHING`
)

// retainEmailPostgres is the three inserts of RetainEmail as one
// statement. Why this is safe as one statement: the three rows reference
// each other only by ids chosen here, nothing in it reads what another
// part writes, and each insert keeps its own ON CONFLICT; the counts say
// which of the message and the link were stored.
const retainEmailPostgres = `WITH c AS (INSERT INTO issue_comments (` + commentCols + `) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)),
	m AS (INSERT INTO email_messages (` + emailMessageCols + `)
		VALUES ($10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24,$25)
		ON CONFLICT (endpoint_id, provider_message_id) DO NOTHING RETURNING 1),
	l AS (INSERT INTO email_message_links (id, company_id, endpoint_id, conversation_id, delivery_id,
		publication_id, comment_id, provider_message_id, direction, created_at) VALUES ($26,$27,$28,$29,$30,$31,$32,$33,$34,$35)
		ON CONFLICT (endpoint_id, conversation_id, provider_message_id) DO NOTHING RETURNING 1)
	SELECT (SELECT COUNT(*) FROM m), (SELECT COUNT(*) FROM l)`

// RetainEmail stores one retained email without attachments: its task
// comment c, the email_messages row m and the message link l, both
// pointing at c (CreateComment, InsertEmailMessage and InsertMessageLink
// in that order and with their semantics). inserted and linked report
// whether m and l were stored. On PostgreSQL it is one round trip.
func (s *Store) RetainEmail(ctx context.Context, q db.Querier, c *domain.Comment, m *domain.EmailMessage, l *EmailMessageLink) (inserted, linked bool, err error) {
	c.ID, m.ID, l.ID = NewID(), NewID(), NewID()
	now := s.Now()
	c.CreatedAt, m.CreatedAt = now, now
	m.CommentID, l.CommentID = c.ID, c.ID
	if s.DB.Dialect == db.Postgres {
		args := append(append(commentArgs(c), emailMessageArgs(m)...), messageLinkArgs(l, now)...)
		var nm, nl int
		if err := q.QueryRowContext(ctx, retainEmailPostgres, args...).Scan(&nm, &nl); err != nil {
			return false, false, fmt.Errorf("retain email: %w", err)
		}
		return nm == 1, nl == 1, nil
	}
	if _, err := q.ExecContext(ctx, insertCommentSQL, commentArgs(c)...); err != nil {
		return false, false, fmt.Errorf("create comment: %w", err)
	}
	res, err := q.ExecContext(ctx, insertEmailMessageSQL, emailMessageArgs(m)...)
	if err != nil {
		return false, false, fmt.Errorf("retain email message: %w", err)
	}
	n, _ := res.RowsAffected()
	if res, err = q.ExecContext(ctx, insertMessageLinkSQL, messageLinkArgs(l, now)...); err != nil {
		return false, false, fmt.Errorf("link email message: %w", err)
	}
	nl, _ := res.RowsAffected()
	return n == 1, nl == 1, nil
}
