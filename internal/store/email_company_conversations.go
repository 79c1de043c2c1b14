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

// CompanyConversation is one email conversation of a company's inbox list
// (the web UI's Email page): its task, its inbox, the newest inbound
// email's sender and opening text, and what its sends and runs are doing.
type CompanyConversation struct {
	ID, EndpointID, Address, IssueID, IssueTitle, IssueStatus, AssigneeAgentID, Subject string
	LastActivityAt, CreatedAt                                                           time.Time
	// From and Snippet come from the newest inbound email ("" without one).
	From, Snippet string
	// LastDirection is the newest retained email's direction.
	LastDirection string
	// LastOutcome is the newest send's outcome ("" without sends);
	// PendingSends counts sends queued or uncertain.
	LastOutcome  string
	PendingSends int
	// ActiveRuns counts the task's queued or running runs.
	ActiveRuns int
}

// snippetChars bounds the opening text read per conversation.
const snippetChars = 240

// ListCompanyConversations returns the company's email conversations
// across its inboxes (one inbox when endpointID is set), most recent
// activity first, at most limit rows. Why correlated subqueries: each
// reads one conversation's newest row through the (conversation, time)
// indexes, in the same SQL on SQLite and PostgreSQL, and the list is
// bounded by limit.
func (s *Store) ListCompanyConversations(ctx context.Context, q db.Querier, companyID, endpointID string, p Page) ([]CompanyConversation, error) {
	args := []any{companyID, endpointID}
	where := "c.company_id = $1 AND ($2 = '' OR c.endpoint_id = $2)"
	// Keyset on the last activity: a conversation that gets new mail while
	// a client pages moves to the front (docs/api.md, "Paging").
	kw, order, kargs := p.keyset("c.last_activity_at", "c.id", 3)
	where += kw
	args = append(args, kargs...)
	return queryAll(ctx, q, "list company email conversations", func(r rowScanner) (CompanyConversation, error) {
		var c CompanyConversation
		var addr, assignee, snippet, dir, outcome sql.NullString
		var env []byte
		err := r.Scan(&c.ID, &c.EndpointID, &addr, &c.IssueID, &c.IssueTitle, &c.IssueStatus, &assignee, &c.Subject,
			&c.LastActivityAt, &c.CreatedAt, &env, &snippet, &dir, &outcome, &c.PendingSends, &c.ActiveRuns)
		if err != nil {
			return c, err
		}
		c.Address, c.AssigneeAgentID, c.Snippet, c.LastDirection, c.LastOutcome = addr.String, assignee.String, snippet.String, dir.String, outcome.String
		if len(env) > 0 {
			var e domain.EmailEnvelope
			if json.Unmarshal(env, &e) == nil {
				c.From = e.From
			}
		}
		c.LastActivityAt, c.CreatedAt = c.LastActivityAt.UTC(), c.CreatedAt.UTC()
		return c, nil
	}, `SELECT c.id, c.endpoint_id, e.address, c.issue_id, i.title, i.status, i.assignee_agent_id, c.subject, c.last_activity_at, c.created_at,
		(SELECT m.envelope FROM email_messages m WHERE m.company_id = c.company_id AND m.conversation_id = c.id AND m.direction = 'inbound'
			ORDER BY m.timestamp DESC, m.id DESC LIMIT 1),
		(SELECT SUBSTR(m.text, 1, `+fmt.Sprint(snippetChars)+`) FROM email_messages m WHERE m.company_id = c.company_id AND m.conversation_id = c.id
			AND m.direction = 'inbound' ORDER BY m.timestamp DESC, m.id DESC LIMIT 1),
		(SELECT m.direction FROM email_messages m WHERE m.company_id = c.company_id AND m.conversation_id = c.id
			ORDER BY m.timestamp DESC, m.id DESC LIMIT 1),
		(SELECT s.outcome FROM email_publications p JOIN email_sends s ON s.publication_id = p.id WHERE p.conversation_id = c.id
			ORDER BY p.created_at DESC, p.id DESC LIMIT 1),
		(SELECT COUNT(*) FROM email_publications p JOIN email_sends s ON s.publication_id = p.id WHERE p.conversation_id = c.id
			AND s.outcome IN ('queued', 'uncertain')),
		(SELECT COUNT(*) FROM heartbeat_runs r WHERE r.issue_id = c.issue_id AND r.status IN ('queued', 'running'))
		FROM email_conversations c JOIN issues i ON i.id = c.issue_id JOIN email_endpoints e ON e.id = c.endpoint_id
		WHERE `+where+order, args...)
}
