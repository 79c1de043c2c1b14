package store

import (
	"context"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// ListUserMemberships returns every company membership of one user.
func (s *Store) ListUserMemberships(ctx context.Context, q db.Querier, userID string) ([]domain.Membership, error) {
	return queryAll(ctx, q, "list user memberships", scanMembership, membershipSelect+` WHERE m.user_id = $1 ORDER BY m.created_at`, userID)
}

// CountIssuesByStatus returns how many of a company's tasks are in each
// status (statuses without tasks are absent).
func (s *Store) CountIssuesByStatus(ctx context.Context, q db.Querier, companyID string) (map[string]int, error) {
	rows, err := q.QueryContext(ctx, `SELECT status, COUNT(*) FROM issues WHERE company_id = $1 GROUP BY status`, companyID)
	if err != nil {
		return nil, fmt.Errorf("count issues: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count issues: %w", err)
		}
		out[st] = n
	}
	return out, rows.Err()
}

// CommentOnIssue reports whether commentID is a comment of issueID.
func (s *Store) CommentOnIssue(ctx context.Context, q db.Querier, commentID, issueID string) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM issue_comments WHERE id = $1 AND issue_id = $2`, commentID, issueID).Scan(&n); err != nil {
		return false, fmt.Errorf("comment on issue: %w", err)
	}
	return n > 0, nil
}
