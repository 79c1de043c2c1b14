package store

import (
	"context"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// CancelQueuedRun cancels a run that has not started, with reason as its
// error. It reports false when the run was no longer queued.
func (s *Store) CancelQueuedRun(ctx context.Context, q db.Querier, runID, reason string) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET status = 'cancelled', error = $2, finished_at = $3, updated_at = $3
		WHERE id = $1 AND status = 'queued'`, runID, reason, now)
	if err != nil {
		return false, fmt.Errorf("cancel queued run: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RequestRunCancel marks a running run for cancellation and clears its
// token hash, so the run's token stops authenticating with this commit,
// before its process has stopped. The first request's time and reason are
// kept. It reports false when the run was not running.
func (s *Store) RequestRunCancel(ctx context.Context, q db.Querier, runID, reason string) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE heartbeat_runs SET token_hash = NULL,
		cancel_requested_at = COALESCE(cancel_requested_at, $2), cancel_reason = COALESCE(cancel_reason, $3), updated_at = $2
		WHERE id = $1 AND status = 'running'`, runID, now, reason)
	if err != nil {
		return false, fmt.Errorf("request run cancel: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RunningRunsOfAgent returns the agent's running runs.
func (s *Store) RunningRunsOfAgent(ctx context.Context, q db.Querier, agentID string) ([]domain.Run, error) {
	return queryAll(ctx, q, "running runs of agent", scanRun, `SELECT `+runCols+` FROM heartbeat_runs
		WHERE agent_id = $1 AND status = 'running'`, agentID)
}

// CancelRequestedRuns returns runnerID's running runs whose cancellation
// was requested.
func (s *Store) CancelRequestedRuns(ctx context.Context, q db.Querier, runnerID string) ([]domain.Run, error) {
	return queryAll(ctx, q, "cancel-requested runs", scanRun, `SELECT `+runCols+` FROM heartbeat_runs
		WHERE runner_id = $1 AND status = 'running' AND cancel_requested_at IS NOT NULL`, runnerID)
}
