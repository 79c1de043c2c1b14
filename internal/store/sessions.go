package store

import (
	"context"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// TaskSession is the CLI conversation an agent's runs on one task resume
// (agent_task_sessions). It is valid only for the adapter type and working
// directory it was made with: the CLIs keep conversations per directory.
type TaskSession struct {
	AgentID     string
	IssueID     string
	AdapterType string
	SessionID   string
	Workdir     string
	RunID       string
	UpdatedAt   time.Time
}

// GetTaskSession returns the agent's session on a task, or ErrNotFound.
func (s *Store) GetTaskSession(ctx context.Context, q db.Querier, agentID, issueID string) (TaskSession, error) {
	return queryOne(ctx, q, "get task session", func(row rowScanner) (TaskSession, error) {
		var t TaskSession
		var run *string
		err := row.Scan(&t.AgentID, &t.IssueID, &t.AdapterType, &t.SessionID, &t.Workdir, &run, &t.UpdatedAt)
		if run != nil {
			t.RunID = *run
		}
		t.UpdatedAt = t.UpdatedAt.UTC()
		return t, err
	}, `SELECT agent_id, issue_id, adapter_type, session_id, workdir, run_id, updated_at
		FROM agent_task_sessions WHERE agent_id = $1 AND issue_id = $2`, agentID, issueID)
}

// PutTaskSession records (or replaces) the agent's session on a task.
func (s *Store) PutTaskSession(ctx context.Context, q db.Querier, t TaskSession) error {
	_, err := q.ExecContext(ctx, `INSERT INTO agent_task_sessions (agent_id, issue_id, adapter_type, session_id, workdir, run_id, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (agent_id, issue_id) DO UPDATE SET adapter_type = excluded.adapter_type, session_id = excluded.session_id,
			workdir = excluded.workdir, run_id = excluded.run_id, updated_at = excluded.updated_at`,
		t.AgentID, t.IssueID, t.AdapterType, t.SessionID, t.Workdir, nullString(t.RunID), s.Now())
	if err != nil {
		return fmt.Errorf("put task session: %w", err)
	}
	return nil
}

// DeleteTaskSession forgets the agent's session on a task.
func (s *Store) DeleteTaskSession(ctx context.Context, q db.Querier, agentID, issueID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM agent_task_sessions WHERE agent_id = $1 AND issue_id = $2`, agentID, issueID); err != nil {
		return fmt.Errorf("delete task session: %w", err)
	}
	return nil
}

// microsPerCent converts micro-dollars to cents.
const microsPerCent = 10000

// RecordRunUsage stores a run's session and usage, and adds its cost to
// the agent's spend of the current month. Budgets are in cents and runs
// cost fractions of a cent, so the sub-cent remainder is carried in
// agents.spend_remainder_micros: the cents charged always equal the sum of
// the runs' costs, rounded down. A new month starts from zero.
func (s *Store) RecordRunUsage(ctx context.Context, q db.Querier, run domain.Run, sessionID string, u domain.RunUsage) error {
	_, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET session_id = $2, input_tokens = $3, cached_input_tokens = $4,
		cache_creation_tokens = $5, output_tokens = $6, cost_micros = $7, updated_at = $8 WHERE id = $1`,
		run.ID, nullString(sessionID), u.InputTokens, u.CachedInputTokens, u.CacheCreationTokens, u.OutputTokens, u.CostMicros, s.Now())
	if err != nil {
		return fmt.Errorf("record run usage: %w", err)
	}
	if u.CostMicros <= 0 {
		return nil
	}
	// One statement, so concurrent charges of the same agent (replicas)
	// add up instead of overwriting each other; both dialects divide
	// integers by truncation.
	_, err = q.ExecContext(ctx, `UPDATE agents SET
		spent_monthly_cents = (CASE WHEN spend_period = $2 THEN spent_monthly_cents ELSE 0 END)
			+ ((CASE WHEN spend_period = $2 THEN spend_remainder_micros ELSE 0 END) + CAST($3 AS BIGINT)) / `+fmt.Sprint(microsPerCent)+`,
		spend_remainder_micros = ((CASE WHEN spend_period = $2 THEN spend_remainder_micros ELSE 0 END) + CAST($3 AS BIGINT)) % `+fmt.Sprint(microsPerCent)+`,
		spend_period = $2
		WHERE id = $1`, run.AgentID, s.Now().Format("2006-01"), u.CostMicros)
	if err != nil {
		return fmt.Errorf("charge agent budget: %w", err)
	}
	return nil
}
