package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const activityCols = `id, company_id, actor_kind, actor_id, agent_id, run_id, action, entity_type, entity_id, details, created_at`

func scanActivity(row rowScanner) (domain.Activity, error) {
	var a domain.Activity
	var company, agent, run sql.NullString
	var details []byte
	err := row.Scan(&a.ID, &company, &a.ActorKind, &a.ActorID, &agent, &run, &a.Action, &a.EntityType, &a.EntityID, &details, &a.CreatedAt)
	a.CompanyID, a.AgentID, a.RunID = company.String, agent.String, run.String
	a.Details = rawJSON(details)
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

// InsertActivity appends an audit entry. Callers pass their transaction so
// the entry commits or rolls back with the change it records.
func (s *Store) InsertActivity(ctx context.Context, q db.Querier, a *domain.Activity) error {
	_, err := q.ExecContext(ctx, `INSERT INTO activity_log (`+activityCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
		activityArgs(s, a)...)
	if err != nil {
		return fmt.Errorf("insert activity: %w", err)
	}
	return nil
}

// activityArgs gives a its id and time (and {} details when it has none)
// and returns its 11 column values in activityCols order.
func activityArgs(s *Store, a *domain.Activity) []any {
	a.ID = NewID()
	a.CreatedAt = s.Now()
	if len(a.Details) == 0 {
		a.Details = []byte(`{}`)
	}
	return []any{a.ID, nullString(a.CompanyID), a.ActorKind, a.ActorID, nullString(a.AgentID), nullString(a.RunID),
		a.Action, a.EntityType, a.EntityID, string(a.Details), a.CreatedAt}
}

// InsertActivities appends several audit entries in one statement, in
// order (each gets its id and time as with InsertActivity).
func (s *Store) InsertActivities(ctx context.Context, q db.Querier, acts ...*domain.Activity) error {
	if len(acts) == 1 {
		return s.InsertActivity(ctx, q, acts[0])
	}
	if len(acts) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString(`INSERT INTO activity_log (` + activityCols + `) VALUES `)
	args := make([]any, 0, 11*len(acts))
	for i, a := range acts {
		if i > 0 {
			sb.WriteString(",")
		}
		n := len(args)
		fmt.Fprintf(&sb, "($%d,$%d,$%d,$%d,$%d,$%d,$%d,$%d,$%d,$%d,$%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9, n+10, n+11)
		args = append(args, activityArgs(s, a)...)
	}
	if _, err := q.ExecContext(ctx, sb.String(), args...); err != nil {
		return fmt.Errorf("insert activity: %w", err)
	}
	return nil
}

// AuditEntry builds the audit entry Audit would write (for InsertActivities).
func AuditEntry(by domain.ActivityActor, companyID, action, entityType, entityID string, details any) (*domain.Activity, error) {
	raw := []byte(`{}`)
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			return nil, fmt.Errorf("audit %s: %w", action, err)
		}
		raw = b
	}
	return &domain.Activity{CompanyID: companyID, ActorKind: by.Kind, ActorID: by.ID, AgentID: by.AgentID,
		RunID: by.RunID, Action: action, EntityType: entityType, EntityID: entityID, Details: raw}, nil
}

// Audit appends the audit entry of one action inside q (the transaction of
// the change it records): by whom, in which company, the action, the entity
// it touched and details (any JSON value; nil is {}). It is the one place
// where audit entries are built.
func (s *Store) Audit(ctx context.Context, q db.Querier, by domain.ActivityActor, companyID, action, entityType, entityID string, details any) error {
	a, err := AuditEntry(by, companyID, action, entityType, entityID, details)
	if err != nil {
		return err
	}
	return s.InsertActivity(ctx, q, a)
}

// ListActivity returns a company's audit log, newest first.
func (s *Store) ListActivity(ctx context.Context, q db.Querier, companyID string, limit int) ([]domain.Activity, error) {
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	return queryAll(ctx, q, "list activity", scanActivity,
		fmt.Sprintf(`SELECT `+activityCols+` FROM activity_log WHERE company_id = $1 ORDER BY created_at DESC, id LIMIT %d`, limit), companyID)
}

// CountIssueActivity counts the audit entries with action on a task written
// by actorID since the given time (the email reopen limiter's window).
func (s *Store) CountIssueActivity(ctx context.Context, q db.Querier, companyID, issueID, actorID, action string, since time.Time) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM activity_log WHERE company_id = $1 AND created_at > $2
		AND entity_type = 'issue' AND entity_id = $3 AND actor_id = $4 AND action = $5`,
		companyID, since.UTC(), issueID, actorID, action).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count issue activity: %w", err)
	}
	return n, nil
}

// IssueActivitySinceLast reports whether actorID wrote an audit entry with
// action on a task after its latest entry with action after, looking back
// only to since. The reopen limiter uses it to post its explanation once
// per limited episode: an episode ends with the next real reopen.
func (s *Store) IssueActivitySinceLast(ctx context.Context, q db.Querier, companyID, issueID, actorID, action, after string, since time.Time) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM activity_log a WHERE a.company_id = $1 AND a.created_at > $2
		AND a.entity_type = 'issue' AND a.entity_id = $3 AND a.actor_id = $4 AND a.action = $5
		AND a.created_at >= COALESCE((SELECT MAX(b.created_at) FROM activity_log b WHERE b.company_id = $1 AND b.created_at > $2
			AND b.entity_type = 'issue' AND b.entity_id = $3 AND b.actor_id = $4 AND b.action = $6), a.created_at)`,
		companyID, since.UTC(), issueID, actorID, action, after).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("check issue activity: %w", err)
	}
	return n > 0, nil
}
