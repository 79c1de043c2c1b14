package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const attachmentCols = `id, company_id, issue_id, filename, content_type, size_bytes, sha256, created_by_user_id, created_by_agent_id, created_at`

func scanAttachment(row rowScanner) (domain.Attachment, error) {
	var a domain.Attachment
	var byUser, byAgent sql.NullString
	err := row.Scan(&a.ID, &a.CompanyID, &a.IssueID, &a.Filename, &a.ContentType, &a.SizeBytes, &a.SHA256, &byUser, &byAgent, &a.CreatedAt)
	a.CreatedByUserID, a.CreatedByAgentID = byUser.String, byAgent.String
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

// CreateAttachment inserts a's metadata (the bytes are already on disk).
func (s *Store) CreateAttachment(ctx context.Context, q db.Querier, a *domain.Attachment) error {
	a.ID = NewID()
	a.CreatedAt = s.Now()
	_, err := q.ExecContext(ctx, `INSERT INTO attachments (`+attachmentCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
		a.ID, a.CompanyID, a.IssueID, a.Filename, a.ContentType, a.SizeBytes, a.SHA256,
		nullString(a.CreatedByUserID), nullString(a.CreatedByAgentID), a.CreatedAt)
	if err != nil {
		return fmt.Errorf("create attachment: %w", err)
	}
	return nil
}

// GetAttachment returns attachment metadata by id.
func (s *Store) GetAttachment(ctx context.Context, q db.Querier, id string) (domain.Attachment, error) {
	return queryOne(ctx, q, "get attachment", scanAttachment, `SELECT `+attachmentCols+` FROM attachments WHERE id = $1`, id)
}

// ListAttachments returns a task's attachments, newest first.
func (s *Store) ListAttachments(ctx context.Context, q db.Querier, issueID string) ([]domain.Attachment, error) {
	return queryAll(ctx, q, "list attachments", scanAttachment,
		`SELECT `+attachmentCols+` FROM attachments WHERE issue_id = $1 ORDER BY created_at DESC, id`, issueID)
}
