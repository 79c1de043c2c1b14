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

const runCols = `id, company_id, agent_id, issue_id, status, wake_source, wake_reason, wake_comment_id, idempotency_key,
	payload, context_snapshot, issue_state_guard, refusal_reason, error, exit_code, attempt, retry_of_run_id,
	requested_by_kind, requested_by_id, created_at, started_at, finished_at, updated_at, cancel_requested_at, cancel_reason,
	session_id, input_tokens, cached_input_tokens, cache_creation_tokens, output_tokens, cost_micros`

func scanRun(row rowScanner) (domain.Run, error) {
	var r domain.Run
	var issue, comment, idem, refusal, errText, retryOf sql.NullString
	var payload, snapshot, guard []byte
	var exit sql.NullInt64
	var started, finished, cancelAt sql.NullTime
	var cancelReason, session sql.NullString
	var in, cached, created, out, cost sql.NullInt64
	err := row.Scan(&r.ID, &r.CompanyID, &r.AgentID, &issue, &r.Status, &r.WakeSource, &r.WakeReason, &comment, &idem,
		&payload, &snapshot, &guard, &refusal, &errText, &exit, &r.Attempt, &retryOf,
		&r.RequestedByKind, &r.RequestedByID, &r.CreatedAt, &started, &finished, &r.UpdatedAt, &cancelAt, &cancelReason,
		&session, &in, &cached, &created, &out, &cost)
	if err != nil {
		return r, err
	}
	r.SessionID = session.String
	if cost.Valid {
		r.Usage = &domain.RunUsage{InputTokens: in.Int64, CachedInputTokens: cached.Int64, CacheCreationTokens: created.Int64,
			OutputTokens: out.Int64, CostMicros: cost.Int64, CostUSD: float64(cost.Int64) / 1e6}
	}
	r.IssueID, r.WakeCommentID, r.IdempotencyKey = issue.String, comment.String, idem.String
	r.RefusalReason, r.Error, r.RetryOfRunID = refusal.String, errText.String, retryOf.String
	r.Payload, r.ContextSnapshot = rawJSON(payload), rawJSON(snapshot)
	if len(guard) > 0 && string(guard) != "null" {
		r.IssueStateGuard = &domain.IssueStateGuard{}
		if err := json.Unmarshal(guard, r.IssueStateGuard); err != nil {
			return r, fmt.Errorf("decode issue state guard: %w", err)
		}
	}
	if exit.Valid {
		v := int(exit.Int64)
		r.ExitCode = &v
	}
	r.StartedAt, r.FinishedAt, r.CancelRequestedAt = timePtr(started), timePtr(finished), timePtr(cancelAt)
	r.CancelReason = cancelReason.String
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// InsertRun inserts r (queued or refused). When r carries an idempotency key
// already used for the agent, nothing is inserted and the existing run is
// returned with created=false.
func (s *Store) InsertRun(ctx context.Context, q db.Querier, r *domain.Run) (created bool, err error) {
	return s.execInsertRun(ctx, q, r, s.runArgs(r))
}

// execInsertRun runs insertRunSQL with args (runArgs of r) and, when the
// key was already used, loads the existing run into r.
func (s *Store) execInsertRun(ctx context.Context, q db.Querier, r *domain.Run, args []any) (created bool, err error) {
	res, err := q.ExecContext(ctx, insertRunSQL, args...)
	if err != nil {
		return false, fmt.Errorf("insert run: %w", err)
	}
	return insertedOrExisting(res, r, func() (domain.Run, error) {
		return s.RunByIdempotencyKey(ctx, q, r.AgentID, r.IdempotencyKey)
	})
}

const insertRunSQL = `INSERT INTO heartbeat_runs (id, company_id, agent_id, issue_id, status, wake_source, wake_reason,
		wake_comment_id, idempotency_key, payload, context_snapshot, issue_state_guard, refusal_reason, attempt, retry_of_run_id,
		requested_by_kind, requested_by_id, created_at, finished_at, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$18)
		ON CONFLICT (agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`

// runArgs gives r its id and times and returns the arguments of
// insertRunSQL.
func (s *Store) runArgs(r *domain.Run) []any {
	r.ID = NewID()
	r.CreatedAt = s.Now()
	r.UpdatedAt = r.CreatedAt
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	var guard any
	if r.IssueStateGuard != nil {
		guard = mustJSON(r.IssueStateGuard)
	}
	var finished any
	if r.Status == domain.RunRefused {
		finished = r.CreatedAt
		r.FinishedAt = &r.CreatedAt
	}
	return []any{r.ID, r.CompanyID, r.AgentID, nullString(r.IssueID), r.Status, r.WakeSource, r.WakeReason, nullString(r.WakeCommentID),
		nullString(r.IdempotencyKey), nullJSON(r.Payload), nullJSON(r.ContextSnapshot), guard, nullString(r.RefusalReason),
		r.Attempt, nullString(r.RetryOfRunID), r.RequestedByKind, r.RequestedByID, r.CreatedAt, finished}
}

// InsertRunAudited is InsertRun that also appends the audit entries of a
// new run: audit builds them from r as it is about to be inserted (id and
// times set), before the insert. When the key was already used nothing is
// appended and r is the existing run (created=false). On PostgreSQL the
// run and its entries are one round trip.
func (s *Store) InsertRunAudited(ctx context.Context, q db.Querier, r *domain.Run, audit func(domain.Run) ([]*domain.Activity, error)) (created bool, err error) {
	args := s.runArgs(r)
	acts, err := audit(*r)
	if err != nil {
		return false, err
	}
	if s.DB.Dialect != db.Postgres || len(acts) == 0 {
		created, err := s.execInsertRun(ctx, q, r, args)
		if err != nil || !created {
			return created, err
		}
		return true, s.InsertActivities(ctx, q, acts...)
	}
	// Why one statement is safe: the entries are selected FROM the run
	// insert's RETURNING, so they are written exactly when the run is
	// (a conflicting key inserts neither), and nothing else in it reads
	// what another part writes. The count of runs says which happened.
	var sb strings.Builder
	sb.WriteString(`WITH r AS (` + insertRunSQL + ` RETURNING id), a AS (INSERT INTO activity_log (` + activityCols + `) `)
	for i, a := range acts {
		if i > 0 {
			sb.WriteString(` UNION ALL `)
		}
		n := len(args)
		// Explicit types: a parameter in a SELECT list is otherwise text.
		fmt.Fprintf(&sb, `SELECT $%d::text, $%d::text, $%d::text, $%d::text, $%d::text, $%d::text, $%d::text, $%d::text, $%d::text, $%d::jsonb, $%d::timestamptz FROM r`,
			n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9, n+10, n+11)
		args = append(args, activityArgs(s, a)...)
	}
	sb.WriteString(`) SELECT COUNT(*) FROM r`)
	var n int
	if err := q.QueryRowContext(ctx, sb.String(), args...).Scan(&n); err != nil {
		return false, fmt.Errorf("insert run: %w", err)
	}
	if n == 1 {
		return true, nil
	}
	cur, err := s.RunByIdempotencyKey(ctx, q, r.AgentID, r.IdempotencyKey)
	if err != nil {
		return false, err
	}
	*r = cur
	return false, nil
}

// RunByIdempotencyKey returns the agent's run created with key.
func (s *Store) RunByIdempotencyKey(ctx context.Context, q db.Querier, agentID, key string) (domain.Run, error) {
	return queryOne(ctx, q, "run by idempotency key", scanRun,
		`SELECT `+runCols+` FROM heartbeat_runs WHERE agent_id = $1 AND idempotency_key = $2`, agentID, key)
}

// GetRun returns a run by id.
func (s *Store) GetRun(ctx context.Context, q db.Querier, id string) (domain.Run, error) {
	return queryOne(ctx, q, "get run", scanRun, `SELECT `+runCols+` FROM heartbeat_runs WHERE id = $1`, id)
}

// QueuedRunFor returns the agent's oldest queued run for issueID, for wake
// coalescing.
func (s *Store) QueuedRunFor(ctx context.Context, q db.Querier, agentID, issueID string) (domain.Run, error) {
	return queryOne(ctx, q, "queued run", scanRun, `SELECT `+runCols+` FROM heartbeat_runs
		WHERE agent_id = $1 AND status = 'queued' AND COALESCE(issue_id, '') = $2 ORDER BY created_at LIMIT 1`, agentID, issueID)
}

// ListRuns returns a company's runs, newest first, optionally by agent/issue.
func (s *Store) ListRuns(ctx context.Context, q db.Querier, companyID, agentID, issueID string, limit int) ([]domain.Run, error) {
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
	if limit <= 0 || limit > 500 {
		limit = 200
	}
	return queryAll(ctx, q, "list runs", scanRun, `SELECT `+runCols+` FROM heartbeat_runs WHERE `+
		strings.Join(where, " AND ")+fmt.Sprintf(` ORDER BY created_at DESC, id LIMIT %d`, limit), args...)
}

// RunCandidates returns the oldest queued runs whose agent has no running
// run (the scheduler re-checks under the agent lock before claiming).
func (s *Store) RunCandidates(ctx context.Context, q db.Querier, limit int) ([]domain.Run, error) {
	return queryAll(ctx, q, "run candidates", scanRun, `SELECT `+runCols+` FROM heartbeat_runs r
		WHERE r.status = 'queued' AND NOT EXISTS (
			SELECT 1 FROM heartbeat_runs x WHERE x.agent_id = r.agent_id AND x.status = 'running')
		ORDER BY r.created_at, r.id LIMIT $1`, limit)
}

// AgentHasRunningRun reports whether the agent has a run in status running.
func (s *Store) AgentHasRunningRun(ctx context.Context, q db.Querier, agentID string) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM heartbeat_runs WHERE agent_id = $1 AND status = 'running'`, agentID).Scan(&n); err != nil {
		return false, fmt.Errorf("agent running runs: %w", err)
	}
	return n > 0, nil
}

// StartRun moves a queued run to running for runnerID with a lease and the
// hash of its run-scoped token. It reports false when the run was no longer
// queued (another scheduler claimed or cancelled it).
func (s *Store) StartRun(ctx context.Context, q db.Querier, runID, runnerID, tokenHash string, leaseUntil time.Time) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET status = 'running', started_at = $2, updated_at = $2,
		runner_id = $3, token_hash = $4, lease_expires_at = $5 WHERE id = $1 AND status = 'queued'`,
		runID, now, runnerID, tokenHash, leaseUntil.UTC())
	if err != nil {
		return false, fmt.Errorf("start run: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RefuseQueuedRun marks a queued run refused with a reason.
func (s *Store) RefuseQueuedRun(ctx context.Context, q db.Querier, runID, reason string) error {
	now := s.Now()
	_, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET status = 'refused', refusal_reason = $2, finished_at = $3, updated_at = $3
		WHERE id = $1 AND status = 'queued'`, runID, reason, now)
	if err != nil {
		return fmt.Errorf("refuse run: %w", err)
	}
	return nil
}

// FinishRun records a running run's outcome, clears its token (the token
// dies with the run) and reports false if this runner no longer owns it.
func (s *Store) FinishRun(ctx context.Context, q db.Querier, runID, runnerID, status string, exitCode *int, errText string) (bool, error) {
	now := s.Now()
	var exit any
	if exitCode != nil {
		exit = *exitCode
	}
	res, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET status = $3, exit_code = $4, error = $5, finished_at = $6,
		updated_at = $6, token_hash = NULL, lease_expires_at = NULL
		WHERE id = $1 AND runner_id = $2 AND status = 'running'`, runID, runnerID, status, exit, nullString(errText), now)
	if err != nil {
		return false, fmt.Errorf("finish run: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RenewRunLeases extends the leases of all of runnerID's running runs.
func (s *Store) RenewRunLeases(ctx context.Context, q db.Querier, runnerID string, until time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET lease_expires_at = $2 WHERE runner_id = $1 AND status = 'running'`,
		runnerID, until.UTC())
	if err != nil {
		return fmt.Errorf("renew run leases: %w", err)
	}
	return nil
}

// OrphanedRuns returns running runs whose lease expired before now, or
// (allRunning) every running run not owned by exceptRunner.
func (s *Store) OrphanedRuns(ctx context.Context, q db.Querier, now time.Time, allRunning bool, exceptRunner string) ([]domain.Run, error) {
	if allRunning {
		return queryAll(ctx, q, "orphaned runs", scanRun, `SELECT `+runCols+` FROM heartbeat_runs
			WHERE status = 'running' AND COALESCE(runner_id, '') <> $1`, exceptRunner)
	}
	return queryAll(ctx, q, "orphaned runs", scanRun, `SELECT `+runCols+` FROM heartbeat_runs
		WHERE status = 'running' AND lease_expires_at < $1`, now.UTC())
}

// FailOrphanedRun ends a running run whose runner died: failed with
// reason, or cancelled when its cancellation had been requested. It reports
// false when the run was no longer running.
func (s *Store) FailOrphanedRun(ctx context.Context, q db.Querier, runID, reason string) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET
		status = CASE WHEN cancel_requested_at IS NULL THEN 'failed' ELSE 'cancelled' END,
		error = CASE WHEN cancel_requested_at IS NULL THEN $2 ELSE cancel_reason END,
		finished_at = $3, updated_at = $3, token_hash = NULL, lease_expires_at = NULL WHERE id = $1 AND status = 'running'`,
		runID, reason, now)
	if err != nil {
		return false, fmt.Errorf("fail orphaned run: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RunByTokenHash returns the running run whose token hashes to hash. Tokens
// of finished runs are cleared, so they never match.
func (s *Store) RunByTokenHash(ctx context.Context, q db.Querier, hash string) (domain.Run, error) {
	return queryOne(ctx, q, "run by token", scanRun, `SELECT `+runCols+` FROM heartbeat_runs WHERE token_hash = $1 AND status = 'running'`, hash)
}

// PutRunLog stores a run's captured output.
func (s *Store) PutRunLog(ctx context.Context, q db.Querier, runID, content string, size int64, truncated bool) error {
	_, err := q.ExecContext(ctx, `INSERT INTO heartbeat_run_logs (run_id, content, size_bytes, truncated) VALUES ($1, $2, $3, $4)
		ON CONFLICT (run_id) DO UPDATE SET content = excluded.content, size_bytes = excluded.size_bytes, truncated = excluded.truncated`,
		runID, content, size, truncated)
	if err != nil {
		return fmt.Errorf("put run log: %w", err)
	}
	return nil
}

// GetRunLog returns a run's captured output.
func (s *Store) GetRunLog(ctx context.Context, q db.Querier, runID string) (content string, size int64, truncated bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT content, size_bytes, truncated FROM heartbeat_run_logs WHERE run_id = $1`, runID).
		Scan(&content, &size, &truncated)
	if err == sql.ErrNoRows {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("get run log: %w", err)
	}
	return content, size, truncated, nil
}
