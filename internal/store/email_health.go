package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
)

// EndpointHealthFacts is what an inbox's health is computed from besides
// its row (docs/api.md, "Inbox health").
type EndpointHealthFacts struct {
	// ProblemCode, ProblemMessage and ProblemAt are the problem recorded
	// with RecordEndpointProblem ("" when none).
	ProblemCode    string
	ProblemMessage string
	ProblemAt      *time.Time
	// SocketHolder names the replica holding the live socket lease now
	// ("" when none).
	SocketHolder string
	// RuntimeSecretID and WebhookSecretID are the active secrets bound as
	// the runtime key and the webhook signing secret ("" when unbound).
	RuntimeSecretID string
	WebhookSecretID string
	// ConnectionFound and ConnectionStatus describe the saved credential
	// the inbox uses; ActiveGrants counts its active human grants and
	// AgentInstalls the installs that cover the assigned agent.
	ConnectionFound  bool
	ConnectionStatus string
	ActiveGrants     int
	AgentInstalls    int
}

// healthBatch bounds the ids of one health statement.
const healthBatch = 200

// EndpointHealthFacts reads the health facts of endpoints by id, in one
// statement per 200 (the list pages poll them, and on SQLite preparing a
// statement costs more than running it). runtimePath and webhookPath are
// the binding paths of the runtime key and the webhook secret, targetType
// the bindings' target type. A missing endpoint has no entry.
func (s *Store) EndpointHealthFacts(ctx context.Context, q db.Querier, ids []string, targetType, runtimePath, webhookPath string) (map[string]EndpointHealthFacts, error) {
	out := make(map[string]EndpointHealthFacts, len(ids))
	for start := 0; start < len(ids); start += healthBatch {
		chunk := ids[start:min(start+healthBatch, len(ids))]
		args := []any{LeaseKeySocket, s.Now(), targetType, runtimePath, webhookPath}
		ph := make([]string, len(chunk))
		for i, id := range chunk {
			args = append(args, id)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		rows, err := q.QueryContext(ctx, `SELECT e.id, e.problem_code, e.problem_message, e.problem_at,
		(SELECT l.holder FROM email_leases l WHERE l.endpoint_id = e.id AND l.lease_key = $1 AND l.expires_at > $2),
		(SELECT b.secret_id FROM company_secret_bindings b JOIN company_secrets cs ON cs.id = b.secret_id AND cs.status = 'active'
			WHERE b.target_type = $3 AND b.target_id = e.id AND b.config_path = $4),
		(SELECT b.secret_id FROM company_secret_bindings b JOIN company_secrets cs ON cs.id = b.secret_id AND cs.status = 'active'
			WHERE b.target_type = $3 AND b.target_id = e.id AND b.config_path = $5),
		(SELECT c.status FROM email_connections c WHERE c.id = e.credential_connection_id),
		(SELECT COUNT(*) FROM email_connection_grants g WHERE g.connection_id = e.credential_connection_id AND g.status = 'active'),
		(SELECT COUNT(*) FROM email_connection_installs i WHERE i.connection_id = e.credential_connection_id
			AND ((i.target_type = 'company' AND i.target_id = e.company_id) OR (i.target_type = 'agent' AND i.target_id = e.assigned_agent_id)))
		FROM email_endpoints e WHERE e.id IN (`+strings.Join(ph, ", ")+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("read email inbox health: %w", err)
		}
		for rows.Next() {
			var f EndpointHealthFacts
			var id string
			var code, msg, holder, runtime, webhook, connStatus sql.NullString
			var at sql.NullTime
			if err := rows.Scan(&id, &code, &msg, &at, &holder, &runtime, &webhook, &connStatus, &f.ActiveGrants, &f.AgentInstalls); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read email inbox health: %w", err)
			}
			f.ProblemCode, f.ProblemMessage, f.ProblemAt = code.String, msg.String, timePtr(at)
			f.SocketHolder, f.RuntimeSecretID, f.WebhookSecretID = holder.String, runtime.String, webhook.String
			f.ConnectionFound, f.ConnectionStatus = connStatus.Valid, connStatus.String
			out[id] = f
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read email inbox health: %w", err)
		}
	}
	return out, nil
}

// problemRewriteAfter bounds how often one unchanged problem is written
// again (its time refreshed): a flood of forged webhook posts costs at
// most one write a minute per inbox.
const problemRewriteAfter = time.Minute

// RecordEndpointProblem records a problem observed for an endpoint (a
// failed setup, a webhook delivery failing its signature check) with its
// plain-words message. The same problem is rewritten at most once a
// minute.
func (s *Store) RecordEndpointProblem(ctx context.Context, q db.Querier, endpointID, code, message string) error {
	now := s.Now()
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET problem_code = $2, problem_message = $3, problem_at = $4
		WHERE id = $1 AND (problem_code IS NULL OR problem_code <> $2 OR problem_message <> $3 OR problem_at < $5)`,
		endpointID, code, message, now, now.Add(-problemRewriteAfter)); err != nil {
		return fmt.Errorf("record email inbox problem: %w", err)
	}
	return nil
}

// ClearEndpointProblem clears the endpoint's recorded problem when it has
// the given code ("" clears any). A statement that finds nothing to clear
// changes nothing and takes no row lock.
func (s *Store) ClearEndpointProblem(ctx context.Context, q db.Querier, endpointID, code string) error {
	var err error
	if code == "" {
		_, err = q.ExecContext(ctx, `UPDATE email_endpoints SET problem_code = NULL, problem_message = NULL, problem_at = NULL
			WHERE id = $1 AND problem_code IS NOT NULL`, endpointID)
	} else {
		_, err = q.ExecContext(ctx, `UPDATE email_endpoints SET problem_code = NULL, problem_message = NULL, problem_at = NULL
			WHERE id = $1 AND problem_code = $2`, endpointID, code)
	}
	if err != nil {
		return fmt.Errorf("clear email inbox problem: %w", err)
	}
	return nil
}

// EmailRunProblem is a failed or refused run of an inbox's agent on one of
// the inbox's open email tasks, not followed by a successful run there.
type EmailRunProblem struct {
	RunID         string
	IssueID       string
	IssueTitle    string
	Status        string
	Error         string
	RefusalReason string
	At            time.Time
}

// EmailRunProblems returns, for each of the endpoints that has one, the
// newest run since `since` of the endpoint's assigned agent on an open task
// bound to one of the endpoint's conversations that failed, timed out or
// was refused and was not followed by a successful run of that task. Such
// a task's mail is likely unanswered. One statement per 200 endpoints.
func (s *Store) EmailRunProblems(ctx context.Context, q db.Querier, endpointIDs []string, since time.Time) (map[string]EmailRunProblem, error) {
	out := map[string]EmailRunProblem{}
	for start := 0; start < len(endpointIDs); start += healthBatch {
		chunk := endpointIDs[start:min(start+healthBatch, len(endpointIDs))]
		args := []any{since}
		ph := make([]string, len(chunk))
		for i, id := range chunk {
			args = append(args, id)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		type row struct {
			endpointID string
			p          EmailRunProblem
		}
		found, err := queryAll(ctx, q, "read email run problems", func(r rowScanner) (row, error) {
			var x row
			var errText, refusal sql.NullString
			err := r.Scan(&x.endpointID, &x.p.RunID, &x.p.IssueID, &x.p.IssueTitle, &x.p.Status, &errText, &refusal, &x.p.At)
			x.p.Error, x.p.RefusalReason, x.p.At = errText.String, refusal.String, x.p.At.UTC()
			return x, err
		}, `SELECT c.endpoint_id, r.id, r.issue_id, i.title, r.status, r.error, r.refusal_reason, r.created_at
		FROM email_conversations c
		JOIN email_endpoints e ON e.id = c.endpoint_id
		JOIN issues i ON i.id = c.issue_id
		JOIN heartbeat_runs r ON r.issue_id = c.issue_id AND r.agent_id = e.assigned_agent_id
		WHERE c.endpoint_id IN (`+strings.Join(ph, ", ")+`) AND r.created_at > $1
		AND r.status IN ('failed', 'timed_out', 'refused') AND i.status NOT IN ('done', 'cancelled')
		AND NOT EXISTS (SELECT 1 FROM heartbeat_runs r2 WHERE r2.agent_id = r.agent_id AND r2.issue_id = r.issue_id
			AND r2.status = 'succeeded' AND r2.created_at > r.created_at)
		ORDER BY r.created_at DESC, r.id DESC`, args...)
		if err != nil {
			return nil, err
		}
		// Newest first: the first row of each endpoint is its problem.
		for _, x := range found {
			if _, ok := out[x.endpointID]; !ok {
				out[x.endpointID] = x.p
			}
		}
	}
	return out, nil
}
