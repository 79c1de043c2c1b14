package heartbeat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// cancelChannel is the PostgreSQL notification channel that tells every
// replica to look for cancellation requests of its runs.
const cancelChannel = "paperclip_run_cancel"

// ErrRunFinished means a run to cancel had already finished.
var ErrRunFinished = errors.New("the run has already finished")

// cancelCause is the context cause (and recorded error) of a cancelled run.
func cancelCause(reason string) error {
	if reason == "" {
		return errors.New("run cancelled")
	}
	return errors.New("run cancelled: " + reason)
}

// CancelRunTx asks, inside the caller's transaction, for a run to end: a
// queued run is cancelled at once; a running run loses its token with the
// commit and is marked for cancellation. Call Interrupt with the run after
// commit, so the replica executing it stops its process. It returns
// ErrRunFinished for a run in a final state.
func (s *Service) CancelRunTx(ctx context.Context, tx *sql.Tx, run domain.Run, reason string, by domain.ActivityActor) error {
	switch run.Status {
	case domain.RunQueued:
		ok, err := s.st.CancelQueuedRun(ctx, tx, run.ID, cancelCause(reason).Error())
		if err != nil {
			return err
		}
		if !ok {
			// Claimed by a scheduler meanwhile (we read it outside the
			// lock): it is running now.
			run.Status = domain.RunRunning
			return s.CancelRunTx(ctx, tx, run, reason, by)
		}
	case domain.RunRunning:
		ok, err := s.st.RequestRunCancel(ctx, tx, run.ID, reason)
		if err != nil {
			return err
		}
		if !ok {
			return ErrRunFinished
		}
		if err := s.st.DB.NotifyTx(ctx, tx, cancelChannel); err != nil {
			return err
		}
	default:
		return ErrRunFinished
	}
	by.AgentID = run.AgentID
	return s.st.Audit(ctx, tx, by, run.CompanyID, "heartbeat.cancelled", "heartbeat_run", run.ID,
		map[string]string{"reason": reason, "status": run.Status})
}

// CancelAgentRunsTx is CancelRunTx for every running run of an agent (the
// agent is being paused or terminated). It returns the runs to Interrupt
// after commit.
func (s *Service) CancelAgentRunsTx(ctx context.Context, tx *sql.Tx, agentID, reason string, by domain.ActivityActor) ([]string, error) {
	runs, err := s.st.RunningRunsOfAgent(ctx, tx, agentID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range runs {
		if err := s.CancelRunTx(ctx, tx, r, reason, by); err != nil && !errors.Is(err, ErrRunFinished) {
			return nil, err
		}
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// Interrupt stops the processes of runs whose cancellation was committed,
// when they execute in this process (SIGTERM, then SIGKILL after the
// adapter's grace period); other replicas learn of it by notification or
// at their next lease renewal.
func (s *Service) Interrupt(ctx context.Context, runIDs ...string) {
	for _, id := range runIDs {
		s.mu.Lock()
		cancel, ok := s.active[id]
		s.mu.Unlock()
		if !ok {
			continue
		}
		r, err := s.st.GetRun(ctx, s.st.DB, id)
		if err != nil || r.CancelRequestedAt == nil {
			continue
		}
		cancel(cancelCause(r.CancelReason))
	}
}

// stopCancelled interrupts every run of this process whose cancellation
// was requested (possibly on another replica).
func (s *Service) stopCancelled(ctx context.Context) {
	runs, err := s.st.CancelRequestedRuns(ctx, s.st.DB, s.opts.RunnerID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("look for cancelled runs", "err", err)
		}
		return
	}
	for _, r := range runs {
		s.mu.Lock()
		cancel, ok := s.active[r.ID]
		s.mu.Unlock()
		if ok {
			cancel(cancelCause(r.CancelReason))
		}
	}
}

// listenCancels follows cancellation notifications on PostgreSQL, so a run
// cancelled through another replica stops at once; db.Follow reconnects
// after a failure (within about a second of the database being back) and
// looks for cancelled runs after each (re)connect, since notifications
// sent meanwhile are lost. SQLite has one process, which interrupts its
// own runs directly.
func (s *Service) listenCancels(ctx context.Context) {
	err := s.st.DB.Follow(ctx, cancelChannel, func() { s.stopCancelled(ctx) }, func(err error) {
		s.log.Warn("run cancellation listener stopped; reconnecting", "err", fmt.Sprint(err))
	})
	if err != nil && !errors.Is(err, db.ErrNoListen) {
		s.log.Error("run cancellation listener", "err", err)
	}
}
