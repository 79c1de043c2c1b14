package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// CreateConversationTask creates the task of a new email conversation,
// unnumbered (CreateIssueUnnumbered says why), with the audit entry audit
// builds for it (i's id is set when it is called), and the conversation c
// bound to it. When i's idempotency key is taken, i becomes the existing
// task and no entry is written (issueCreated false); when the thread
// already has a conversation, c becomes that one (convCreated false).
// Either way c ends up naming the stored conversation.
//
// On PostgreSQL the three inserts are one round trip when the task is new
// (a data-modifying CTE: the entry and the conversation are selected FROM
// the task insert's RETURNING, so they are written exactly when the task
// is, as InsertRunAudited does for a run); this is a new thread's
// receiving transaction's largest part. SQLite runs them one by one.
func (s *Store) CreateConversationTask(ctx context.Context, q db.Querier, i *domain.Issue, audit func(domain.Issue) (*domain.Activity, error),
	c *domain.EmailConversation) (issueCreated, convCreated bool, err error) {
	s.newIssue(i)
	i.Number, i.Identifier = 0, ""
	a, err := audit(*i)
	if err != nil {
		return false, false, err
	}
	c.ID = NewID()
	c.CreatedAt = s.Now()
	c.LastActivityAt = c.CreatedAt
	if c.State == "" {
		c.State = "active"
	}
	if s.DB.Dialect != db.Postgres {
		res, err := q.ExecContext(ctx, insertIssueSQL, issueArgs(i, false)...)
		if err != nil {
			return false, false, fmt.Errorf("create issue: %w", err)
		}
		if issueCreated, err = insertedOrExisting(res, i, func() (domain.Issue, error) { return s.existingIssue(ctx, q, i) }); err != nil {
			return false, false, err
		}
		if issueCreated {
			if err := s.InsertActivities(ctx, q, a); err != nil {
				return false, false, err
			}
		}
		c.IssueID = i.ID
		convCreated, err = s.insertConversationRow(ctx, q, c)
		return issueCreated, convCreated, err
	}
	c.IssueID = i.ID
	args := issueArgs(i, false)
	var sb strings.Builder
	n := len(args)
	// Explicit types: a parameter in a SELECT list is otherwise text.
	fmt.Fprintf(&sb, `WITH i AS (%s RETURNING id),
		a AS (INSERT INTO activity_log (%s) SELECT $%d::text, $%d::text, $%d::text, $%d::text, $%d::text, $%d::text,
			$%d::text, $%d::text, $%d::text, $%d::jsonb, $%d::timestamptz FROM i),`,
		insertIssueSQL, activityCols, n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9, n+10, n+11)
	args = append(args, activityArgs(s, a)...)
	n = len(args)
	fmt.Fprintf(&sb, `
		c AS (INSERT INTO email_conversations (%s, updated_at) SELECT $%d::text, $%d::text, $%d::text, i.id, $%d::text,
			$%d::text, $%d::text, $%d::text, $%d::timestamptz, $%d::timestamptz, $%d::timestamptz FROM i
			ON CONFLICT (endpoint_id, external_thread_id) DO NOTHING RETURNING 1)
		SELECT (SELECT COUNT(*) FROM i), (SELECT COUNT(*) FROM c)`,
		conversationCols, n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9, n+9)
	args = append(args, c.ID, c.CompanyID, c.EndpointID, c.ExternalConversationID, c.ExternalThreadID, c.Subject, c.State,
		c.LastActivityAt, c.CreatedAt)
	var ni, nc int
	if err := q.QueryRowContext(ctx, sb.String(), args...).Scan(&ni, &nc); err != nil {
		return false, false, fmt.Errorf("create conversation task: %w", err)
	}
	switch {
	case ni == 0:
		// The key was taken: the existing task, and its conversation as
		// InsertConversation would make it.
		cur, err := s.existingIssue(ctx, q, i)
		if err != nil {
			return false, false, err
		}
		*i = cur
		c.IssueID = i.ID
		convCreated, err = s.insertConversationRow(ctx, q, c)
		return false, convCreated, err
	case nc == 0:
		cur, err := s.ConversationByThread(ctx, q, c.EndpointID, c.ExternalThreadID)
		if err != nil {
			return true, false, err
		}
		*c = cur
		return true, false, nil
	}
	return true, true, nil
}
