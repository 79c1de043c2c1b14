package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// The keyset-paged listings of the API (docs/api.md, "Paging"). Each
// returns up to p.Limit+1 rows; TrimPage cuts the extra row and
// turns the page's last row into the next cursor.

// listPage runs sel + " WHERE " + where, continued after p.After on
// (timeCol, idCol) and ordered by them (newest first unless p.Oldest).
func listPage[T any](ctx context.Context, q db.Querier, what string, scan func(rowScanner) (T, error), sel, where string,
	args []any, timeCol, idCol string, p Page) ([]T, error) {
	cont, order, more := p.keyset(timeCol, idCol, len(args)+1)
	return queryAll(ctx, q, what, scan, sel+` WHERE `+where+cont+order, append(args, more...)...)
}

// ListCommentsPage returns a page of a task's comments, oldest first
// (conversation order: the documented exception to newest first).
func (s *Store) ListCommentsPage(ctx context.Context, q db.Querier, issueID string, p Page) ([]domain.Comment, error) {
	p.Oldest = true
	return listPage(ctx, q, "list comments", scanComment, `SELECT `+commentCols+` FROM issue_comments`,
		`issue_id = $1`, []any{issueID}, "created_at", "id", p)
}

// ListAttachmentsPage returns a page of a task's attachments, newest first.
func (s *Store) ListAttachmentsPage(ctx context.Context, q db.Querier, issueID string, p Page) ([]domain.Attachment, error) {
	return listPage(ctx, q, "list attachments", scanAttachment, `SELECT `+attachmentCols+` FROM attachments`,
		`issue_id = $1`, []any{issueID}, "created_at", "id", p)
}

// ListRunsPage returns a page of a company's runs, newest first, by agent
// and task when set.
func (s *Store) ListRunsPage(ctx context.Context, q db.Querier, companyID, agentID, issueID string, p Page) ([]domain.Run, error) {
	where := []string{"company_id = $1"}
	args := []any{companyID}
	if agentID != "" {
		args = append(args, agentID)
		where = append(where, fmt.Sprintf("agent_id = $%d", len(args)))
	}
	if issueID != "" {
		args = append(args, issueID)
		where = append(where, fmt.Sprintf("issue_id = $%d", len(args)))
	}
	return listPage(ctx, q, "list runs", scanRun, `SELECT `+runCols+` FROM heartbeat_runs`,
		strings.Join(where, " AND "), args, "created_at", "id", p)
}

// ListAgentsPage returns a page of a company's agents, newest first.
func (s *Store) ListAgentsPage(ctx context.Context, q db.Querier, companyID string, p Page) ([]domain.Agent, error) {
	return listPage(ctx, q, "list agents", scanAgent, `SELECT `+agentCols+` FROM agents`,
		`company_id = $1`, []any{companyID}, "created_at", "id", p)
}

// ListProjectsPage returns a page of a company's projects, newest first.
func (s *Store) ListProjectsPage(ctx context.Context, q db.Querier, companyID string, p Page) ([]domain.Project, error) {
	return listPage(ctx, q, "list projects", scanProject, `SELECT `+projectCols+` FROM projects`,
		`company_id = $1`, []any{companyID}, "created_at", "id", p)
}

// ListMembersPage returns a page of a company's memberships, newest
// first (keyed by the member's user id). A row whose permissions do not
// decode is listed with what decoded, as in ListMembers.
func (s *Store) ListMembersPage(ctx context.Context, q db.Querier, companyID string, p Page) ([]domain.Membership, error) {
	lenient := func(row rowScanner) (domain.Membership, error) {
		m, err := scanMembership(row)
		if errors.Is(err, errMembershipPermissions) {
			err = nil
		}
		return m, err
	}
	return listPage(ctx, q, "list members", lenient, membershipSelect, `m.company_id = $1`, []any{companyID},
		"m.created_at", "m.user_id", p)
}

// ListEndpointsPage returns a page of a company's inboxes, newest first;
// archived (disconnected) ones only with archived set.
func (s *Store) ListEndpointsPage(ctx context.Context, q db.Querier, companyID string, archived bool, p Page) ([]domain.EmailEndpoint, error) {
	where := `company_id = $1 AND status <> 'archived'`
	if archived {
		where = `company_id = $1`
	}
	return listPage(ctx, q, "list email inboxes", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints`,
		where, []any{companyID}, "created_at", "id", p)
}

// ConversationsPage returns a page of an inbox's conversations with their
// tasks, most recent activity first. A conversation with new activity
// while a client pages moves ahead of the cursor (docs/api.md, "Paging").
func (s *Store) ConversationsPage(ctx context.Context, q db.Querier, endpointID string, p Page) ([]ConversationRow, error) {
	return listPage(ctx, q, "list email conversations", func(r rowScanner) (ConversationRow, error) {
		var c ConversationRow
		err := r.Scan(&c.ID, &c.CompanyID, &c.EndpointID, &c.IssueID, &c.ExternalConversationID, &c.ExternalThreadID,
			&c.Subject, &c.State, &c.LastActivityAt, &c.CreatedAt, &c.IssueTitle, &c.IssueStatus)
		c.LastActivityAt, c.CreatedAt = c.LastActivityAt.UTC(), c.CreatedAt.UTC()
		return c, err
	}, `SELECT c.id, c.company_id, c.endpoint_id, c.issue_id, c.external_conversation_id, c.external_thread_id, c.subject,
		c.state, c.last_activity_at, c.created_at, i.title, i.status FROM email_conversations c JOIN issues i ON i.id = c.issue_id`,
		`c.endpoint_id = $1`, []any{endpointID}, "c.last_activity_at", "c.id", p)
}

// ActivityFilter narrows an activity listing; empty fields do not filter.
type ActivityFilter struct {
	// Actions keeps entries whose action is one of these, or starts with
	// one ending in "." (a kind such as "email.").
	Actions   []string
	ActorKind string
	ActorID   string
	// IssueID keeps the entries about that task.
	IssueID string
	// Since and Until bound the entry time: Since <= t < Until.
	Since, Until *time.Time
}

// where renders the filter after "company_id = $1".
func (f ActivityFilter) where(args []any) (string, []any) {
	where := []string{"company_id = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(f.Actions) > 0 {
		var or []string
		for _, a := range f.Actions {
			if strings.HasSuffix(a, ".") {
				args = append(args, a+"%")
				or = append(or, fmt.Sprintf("action LIKE $%d", len(args)))
			} else {
				args = append(args, a)
				or = append(or, fmt.Sprintf("action = $%d", len(args)))
			}
		}
		where = append(where, "("+strings.Join(or, " OR ")+")")
	}
	if f.ActorKind != "" {
		add("actor_kind = $%d", f.ActorKind)
	}
	if f.ActorID != "" {
		// An agent acts as "agent" with its id in agent_id as well.
		args = append(args, f.ActorID)
		where = append(where, fmt.Sprintf("(actor_id = $%[1]d OR agent_id = $%[1]d)", len(args)))
	}
	if f.IssueID != "" {
		add("entity_type = 'issue' AND entity_id = $%d", f.IssueID)
	}
	if f.Since != nil {
		add("created_at >= $%d", f.Since.UTC())
	}
	if f.Until != nil {
		add("created_at < $%d", f.Until.UTC())
	}
	return strings.Join(where, " AND "), args
}

// ListActivityPage returns a page of a company's audit log, newest first.
func (s *Store) ListActivityPage(ctx context.Context, q db.Querier, companyID string, f ActivityFilter, p Page) ([]domain.Activity, error) {
	where, args := f.where([]any{companyID})
	return listPage(ctx, q, "list activity", scanActivity, `SELECT `+activityCols+` FROM activity_log`, where, args,
		"created_at", "id", p)
}

// EachActivity calls fn with every audit entry of a company matching f,
// newest first, reading in keyset pages of batch rows (an export streams
// without holding the log in memory or a read transaction open).
func (s *Store) EachActivity(ctx context.Context, q db.Querier, companyID string, f ActivityFilter, batch int, fn func(domain.Activity) error) error {
	p := Page{Limit: batch}
	for {
		rows, err := s.ListActivityPage(ctx, q, companyID, f, p)
		if err != nil {
			return err
		}
		more := len(rows) > batch
		if more {
			rows = rows[:batch]
		}
		for _, a := range rows {
			if err := fn(a); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		last := rows[len(rows)-1]
		p.After = &Cursor{At: last.CreatedAt, ID: last.ID}
	}
}

// DeliveriesPage returns a page of an inbox's deliveries, newest
// admission first.
func (s *Store) DeliveriesPage(ctx context.Context, q db.Querier, endpointID string, p Page) ([]DeliveryActivity, error) {
	return listPage(ctx, q, "list email deliveries", scanDeliveryActivity, deliveryActivitySelect,
		`d.endpoint_id = $1`, []any{endpointID}, "d.received_at", "d.id", p)
}

// PublicationsPage returns a page of an inbox's sends, newest first.
func (s *Store) PublicationsPage(ctx context.Context, q db.Querier, endpointID string, p Page) ([]EmailPublication, error) {
	return listPage(ctx, q, "list email sends", scanPublication, `SELECT `+pubCols+pubFrom,
		`p.endpoint_id = $1`, []any{endpointID}, "p.created_at", "p.id", p)
}
