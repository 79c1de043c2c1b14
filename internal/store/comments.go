package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const commentCols = `id, company_id, issue_id, body, author_kind, author_agent_id, author_user_id, run_id, created_at`

func scanComment(row rowScanner) (domain.Comment, error) {
	var c domain.Comment
	var agent, user, run sql.NullString
	err := row.Scan(&c.ID, &c.CompanyID, &c.IssueID, &c.Body, &c.AuthorKind, &agent, &user, &run, &c.CreatedAt)
	c.AuthorAgentID, c.AuthorUserID, c.RunID = agent.String, user.String, run.String
	c.CreatedAt = c.CreatedAt.UTC()
	return c, err
}

// CreateComment inserts c.
func (s *Store) CreateComment(ctx context.Context, q db.Querier, c *domain.Comment) error {
	c.ID = NewID()
	c.CreatedAt = s.Now()
	_, err := q.ExecContext(ctx, insertCommentSQL, commentArgs(c)...)
	if err != nil {
		return fmt.Errorf("create comment: %w", err)
	}
	return nil
}

// ListComments returns a task's comments, oldest first (conversation order).
func (s *Store) ListComments(ctx context.Context, q db.Querier, issueID string) ([]domain.Comment, error) {
	return queryAll(ctx, q, "list comments", scanComment,
		`SELECT `+commentCols+` FROM issue_comments WHERE issue_id = $1 ORDER BY created_at, id`, issueID)
}

// GetComment returns a comment by id.
func (s *Store) GetComment(ctx context.Context, q db.Querier, id string) (domain.Comment, error) {
	return queryOne(ctx, q, "get comment", scanComment, `SELECT `+commentCols+` FROM issue_comments WHERE id = $1`, id)
}
