package heartbeat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// queuedChannel is the PostgreSQL notification channel on which a replica
// that cannot start queued runs itself (it is at capacity, or draining)
// asks the others to look. Why not a scan every few seconds: an idle
// cluster would then issue statements for nothing, forever; the local
// path is driven by Notify, and the renewal tick (LeaseTTL/3) is the
// fallback for a notification that was lost.
const queuedChannel = "paperclip_run_queued"

// askEvery bounds how often a busy replica asks the others (askOthers).
const askEvery = 250 * time.Millisecond

// Start recovers orphaned runs and starts the scheduling loop; it returns
// once the first recovery pass is done. ctx bounds only that startup: the
// loop runs until Shutdown.
func (s *Service) Start(ctx context.Context) error {
	if err := s.linkBinary(); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	// With the database to itself, every running run is a dead
	// predecessor's. Shared, the loop sweeps once its renewals have worked
	// for a while (see loop).
	if s.opts.ExclusiveDatabase {
		if err := s.sweepOrphans(ctx, true); err != nil {
			return fmt.Errorf("heartbeat: recover orphaned runs: %w", err)
		}
	}
	// Run directories of a previous process (stopped before recording its
	// runs) still hold run tokens and CLI state: remove them.
	if err := s.sweepRunDirs(ctx); err != nil {
		s.log.Error("sweep run directories", "err", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.loop(lctx)
	go func() {
		defer close(s.listened)
		var wg sync.WaitGroup
		wg.Go(func() { s.listenCancels(lctx) })
		wg.Go(func() { s.listenQueued(lctx) })
		wg.Wait()
	}()
	s.Notify()
	return nil
}

func (s *Service) loop(ctx context.Context) {
	defer close(s.stopped)
	renew := time.NewTicker(s.opts.LeaseTTL / 3)
	defer renew.Stop()
	// renewingSince is when this runner's lease renewals last started to
	// succeed (zero while they fail). Why: after the database was
	// unreachable (restarted, or cut off), every replica's run leases may
	// have lapsed, live runs included, and each replica needs up to one
	// renewal period (TTL/3) after the database is back to renew its own.
	// A replica that swept at once would fail, and retry, runs that are
	// still running elsewhere. So orphans are swept only after renewals
	// have worked for two renewal periods; a run is then orphaned only if
	// its runner really stopped renewing.
	renewingSince := s.st.Now()
	for tick := 1; ; {
		local := false
		select {
		case <-ctx.Done():
			return
		case <-s.signal:
			local = true
		case <-s.remote:
		case <-renew.C:
			// Why the sweep and the fallback scan run every third tick
			// (once per LeaseTTL) only: they are for other replicas' runs
			// and lost notifications, and an idle cluster should issue
			// (almost) no statements; a run whose runner died is then
			// retried within two lease periods instead of 1⅓.
			tick++
			var scan bool
			renewingSince, scan = s.renewTick(ctx, renewingSince, tick%3 == 0)
			if !scan {
				continue
			}
		}
		full, err := s.schedule(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("schedule runs", "err", err)
		}
		// Only a local nudge is passed on: a replica that is full when the
		// others ask must not ask back, or two full replicas would keep
		// asking each other.
		if full && local {
			s.askOthers(ctx)
		}
	}
}

// renewTick is the scheduler's periodic work: renewing the leases of the
// runs executing here, looking for cancellations whose notification was
// missed and, when sweep is set, sweeping runs whose runner stopped. It
// returns the new renewingSince (see loop) and whether to look for queued
// runs now (sweep, or runs execute here). Why an idle replica skips the
// renewal and the cancellation scan: it has no run to renew or stop, and
// an idle cluster should issue (almost) no statements. While the
// database is not known to work (renewingSince is zero) the renewal runs
// anyway, as the check that it works again.
func (s *Service) renewTick(ctx context.Context, renewingSince time.Time, sweep bool) (time.Time, bool) {
	active, _ := s.activeCount()
	if active > 0 || renewingSince.IsZero() {
		if err := s.st.RenewRunLeases(ctx, s.st.DB, s.opts.RunnerID, s.st.Now().Add(s.opts.LeaseTTL)); err != nil {
			if ctx.Err() == nil {
				s.log.Error("renew run leases", "err", err)
			}
			return time.Time{}, false
		}
		if renewingSince.IsZero() {
			renewingSince = s.st.Now()
		}
	}
	// On a database of its own (SQLite) this process recovered every
	// orphan at start (Start), and none can appear since: no sweep.
	if sweep && !s.opts.ExclusiveDatabase && s.st.Now().Sub(renewingSince) >= 2*s.opts.LeaseTTL/3 {
		if err := s.sweepOrphans(ctx, false); err != nil {
			if ctx.Err() == nil {
				s.log.Error("recover orphaned runs", "err", err)
			}
			return time.Time{}, false
		}
	}
	if active > 0 {
		// Cancellations requested on other replicas, should their
		// notification have been missed.
		s.stopCancelled(ctx)
	}
	return renewingSince, sweep || active > 0
}

// askOthers tells the other replicas to look for queued runs, at most once
// per askEvery: this one cannot start them now. On SQLite it does nothing
// (one process).
func (s *Service) askOthers(ctx context.Context) {
	if time.Since(s.lastAsk) < askEvery {
		return
	}
	s.lastAsk = time.Now()
	if err := s.st.DB.Notify(ctx, queuedChannel, ""); err != nil && ctx.Err() == nil {
		s.log.Warn("ask other replicas to start queued runs", "err", err)
	}
}

// listenQueued follows the other replicas' asks (queuedChannel) on
// PostgreSQL. db.Follow also nudges after each (re)connect, since asks
// sent meanwhile are lost.
func (s *Service) listenQueued(ctx context.Context) {
	err := s.st.DB.Follow(ctx, queuedChannel, s.remote.Notify, func(err error) {
		s.log.Warn("queued-run listener stopped; reconnecting", "err", fmt.Sprint(err))
	})
	if err != nil && !errors.Is(err, db.ErrNoListen) {
		s.log.Error("queued-run listener", "err", err)
	}
}

func (s *Service) activeCount() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active), s.draining
}

// schedule starts as many queued runs as capacity allows. full reports
// that it stopped for want of capacity (or because the process drains):
// queued runs may be left that another replica could start.
func (s *Service) schedule(ctx context.Context) (full bool, err error) {
	n, draining := s.activeCount()
	if draining || n >= s.opts.MaxConcurrent {
		return true, nil
	}
	cands, err := s.st.RunCandidates(ctx, s.st.DB, 4*(s.opts.MaxConcurrent-n))
	if err != nil {
		return false, err
	}
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c.AgentID] {
			continue
		}
		seen[c.AgentID] = true
		if n, draining := s.activeCount(); draining || n >= s.opts.MaxConcurrent {
			return true, nil
		}
		if err := s.tryStart(ctx, c); err != nil {
			s.log.Error("start run", "run", c.ID, "err", err)
		}
	}
	return false, nil
}

// tryStart claims one queued run under its agent's lock and launches it.
func (s *Service) tryStart(ctx context.Context, cand domain.Run) error {
	// Reserve the run's place in the wait group before claiming it, under
	// the same lock Shutdown takes to set draining: WaitGroup.Add must never
	// race with Shutdown's Wait, and a draining scheduler claims nothing.
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return nil
	}
	s.wg.Add(1)
	s.mu.Unlock()
	launched := false
	defer func() {
		if !launched {
			s.wg.Done()
		}
	}()
	token := store.RandomToken("pcr_")
	var agent domain.Agent
	var run domain.Run
	started := false
	err := s.st.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.st.LockAgent(ctx, tx, cand.AgentID); err != nil {
			return err
		}
		busy, err := s.st.AgentHasRunningRun(ctx, tx, cand.AgentID)
		if err != nil || busy {
			return err
		}
		if agent, err = s.st.GetAgent(ctx, tx, cand.AgentID); err != nil {
			return err
		}
		if run, err = s.st.GetRun(ctx, tx, cand.ID); err != nil || run.Status != domain.RunQueued {
			return err
		}
		// Conditions are checked again at start: the agent may have been
		// paused, or the task moved on, while the run waited.
		reason, err := s.refusal(ctx, &issueReads{st: s.st, q: tx}, agent, run.IssueID, run.IssueStateGuard)
		if err != nil {
			return err
		}
		if reason != "" {
			if err := s.st.RefuseQueuedRun(ctx, tx, run.ID, reason); err != nil {
				return err
			}
			return s.st.Audit(ctx, tx, domain.SystemActor("", run.AgentID), run.CompanyID, "heartbeat.refused", "heartbeat_run", run.ID,
				map[string]string{"refusalReason": reason})
		}
		ok, err := s.st.StartRun(ctx, tx, run.ID, s.opts.RunnerID, store.HashToken(token), s.st.Now().Add(s.opts.LeaseTTL))
		if err != nil || !ok {
			return err
		}
		if run.IssueID != "" {
			if err := s.st.BindRunToIssue(ctx, tx, run.IssueID, run.ID); err != nil {
				return err
			}
		}
		started = true
		return nil
	})
	if err != nil || !started {
		return err
	}
	// The run is registered before it is read back: a cancellation
	// committed from now on either finds it here or is seen below.
	rctx, cancel := context.WithCancelCause(s.runCtx)
	s.mu.Lock()
	s.active[run.ID] = cancel
	s.mu.Unlock()
	runID := run.ID
	run, err = s.st.GetRun(ctx, s.st.DB, runID)
	if err != nil {
		// Nothing was started: the run's lease expires and it is recovered.
		cancel(nil)
		s.mu.Lock()
		delete(s.active, runID)
		s.mu.Unlock()
		return err
	}
	launched = true
	if run.CancelRequestedAt != nil {
		cancel(cancelCause(run.CancelReason))
	}
	if s.opts.Observer.RunStarted != nil && run.StartedAt != nil {
		s.opts.Observer.RunStarted(run.StartedAt.Sub(run.CreatedAt))
	}
	go func() {
		defer s.wg.Done()
		defer cancel(nil)
		s.execute(rctx, run, agent, token)
		s.mu.Lock()
		delete(s.active, run.ID)
		s.mu.Unlock()
		s.Notify()
	}()
	return nil
}

func (s *Service) execute(ctx context.Context, run domain.Run, agent domain.Agent, token string) {
	spec := RunSpec{Run: run, Agent: agent, Token: token, APIURL: s.opts.APIURL, ExtraEnv: map[string]string{}}
	res := s.prepareAndRun(ctx, &spec)
	// Record the outcome even when the server is shutting down.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeDeadline)
	defer cancel()
	// Every secret the run held is masked in its log (viewers read it,
	// backups keep it) and in its error: vaulted values, the adapter's
	// own (the instance's passEnv credentials) and the run token.
	held := append(slices.Collect(maps.Values(spec.Secrets)), res.Secrets...)
	if spec.Token != "" {
		held = append(held, spec.Token)
	}
	logText := maskSecrets(sanitizeLog(res.Log), held)
	res.Error = maskSecrets(res.Error, held)
	err := retryOutcome(fctx, func() error {
		return s.st.Tx(fctx, func(tx *sql.Tx) error {
			ok, err := s.st.FinishRun(fctx, tx, run.ID, s.opts.RunnerID, res.Status, res.ExitCode, res.Error)
			if err != nil || !ok {
				return err
			}
			if err := s.st.PutRunLog(fctx, tx, run.ID, logText, res.LogSize, res.Truncated); err != nil {
				return err
			}
			if run.IssueID != "" {
				if err := s.st.ReleaseIssueCheckout(fctx, tx, run.IssueID, run.ID); err != nil {
					return err
				}
			}
			by := domain.SystemActor("", run.AgentID)
			by.RunID = run.ID
			return s.st.Audit(fctx, tx, by, run.CompanyID, "heartbeat.finished", "heartbeat_run", run.ID,
				map[string]any{"status": res.Status, "exitCode": res.ExitCode, "error": res.Error})
		})
	})
	if err != nil {
		s.log.Error("record run outcome", "run", run.ID, "err", err)
	}
	// The run's own files go with it: its MCP configuration holds the run
	// token, its CODEX_HOME and HOME what the CLI kept. A directory left
	// by a crash is swept at the next start (sweepRunDirs).
	if err := removeRunDir(spec.RunDir); err != nil {
		s.log.Error("remove run directory", "run", run.ID, "err", err)
	}
	if s.opts.Observer.RunFinished != nil && run.StartedAt != nil {
		s.opts.Observer.RunFinished(res.Status, time.Since(*run.StartedAt))
	}
	s.log.Info("run finished", "run", run.ID, "agent", run.AgentID, "status", res.Status)
}

// outcomeDeadline bounds how long a finished run's outcome is retried
// while the database is unreachable.
const outcomeDeadline = 90 * time.Second

// retryOutcome runs record until it succeeds or ctx ends, waiting
// 250 ms, then twice as long each time up to 5 s, between attempts.
// Why: a run that ends while the database is unreachable (restarted, or
// its connections cut) would otherwise stay "running" once it left
// s.active, with nobody renewing its lease, and another replica would
// fail it as an orphan and run its wake a second time. Until its outcome
// is stored the run stays in s.active, so this runner keeps renewing its
// lease.
func retryOutcome(ctx context.Context, record func() error) error {
	wait := 250 * time.Millisecond
	for {
		err := record()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (s *Service) prepareAndRun(ctx context.Context, spec *RunSpec) Result {
	if ctx.Err() != nil {
		return Result{Status: domain.RunCancelled, Error: cancelMessage(ctx)}
	}
	if err := s.resolveEnvironment(ctx, spec); err != nil {
		return Result{Status: domain.RunFailed, Error: err.Error()}
	}
	if s.opts.Secrets != nil {
		secrets, err := s.opts.Secrets(ctx, spec.Agent)
		if err != nil {
			return Result{Status: domain.RunFailed, Error: "resolve the agent's adapter secrets: " + err.Error()}
		}
		spec.Secrets = secrets
	}
	if err := s.prepareDirs(ctx, spec); err != nil {
		return Result{Status: domain.RunFailed, Error: err.Error()}
	}
	if spec.Run.IssueID != "" {
		// Only for the sandbox bridge's task routes: without it (the task
		// just deleted, say) the bridge still takes the task's UUID.
		if is, err := s.st.GetIssue(ctx, s.st.DB, spec.Run.IssueID); err == nil && is.CompanyID == spec.Run.CompanyID {
			spec.TaskIdentifier = is.Identifier
		}
	}
	// Checked again where the run executes: the environment the start
	// decision saw may have changed since.
	if need := sandboxNeed(spec.Agent, s.opts.Adapters[spec.Agent.AdapterType], spec.Isolated); need != "" && !spec.Sandboxed() {
		return Result{Status: domain.RunFailed, Error: need}
	}
	if s.opts.Prepare != nil {
		if err := s.opts.Prepare(ctx, spec); err != nil {
			return Result{Status: domain.RunFailed, Error: "prepare run: " + err.Error()}
		}
	}
	adapter, ok := s.opts.Adapters[spec.Agent.AdapterType]
	if !ok {
		return Result{Status: domain.RunFailed, Error: "no adapter for type " + spec.Agent.AdapterType}
	}
	return adapter.Run(ctx, *spec, s.opts.LogMaxBytes)
}

// sanitizeLog makes captured output storable as text on both databases
// (PostgreSQL rejects NUL bytes and invalid UTF-8).
func sanitizeLog(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ReplaceAll(s, "\x00", "")
}

// sweepOrphans fails runs whose runner died and queues one retry of each
// orphaned wake (only for first attempts). With all=true every running run
// not owned by this process is orphaned (exclusive database at start).
func (s *Service) sweepOrphans(ctx context.Context, all bool) error {
	runs, err := s.st.OrphanedRuns(ctx, s.st.DB, s.st.Now(), all, s.opts.RunnerID)
	if err != nil {
		return err
	}
	for _, r := range runs {
		err := s.st.Tx(ctx, func(tx *sql.Tx) error {
			ok, err := s.st.FailOrphanedRun(ctx, tx, r.ID, "runner lost: the process executing this run stopped")
			if err != nil || !ok {
				return err
			}
			by := domain.SystemActor("", r.AgentID)
			by.RunID = r.ID
			if err := s.st.Audit(ctx, tx, by, r.CompanyID, "heartbeat.orphaned", "heartbeat_run", r.ID, map[string]any{"attempt": r.Attempt}); err != nil {
				return err
			}
			if r.Attempt > 1 {
				return nil
			}
			retry := domain.Run{CompanyID: r.CompanyID, AgentID: r.AgentID, IssueID: r.IssueID, Status: domain.RunQueued,
				WakeSource: r.WakeSource, WakeReason: r.WakeReason, WakeCommentID: r.WakeCommentID, Payload: r.Payload,
				ContextSnapshot: r.ContextSnapshot, IssueStateGuard: r.IssueStateGuard, Attempt: r.Attempt + 1,
				RetryOfRunID: r.ID, RequestedByKind: "system", RequestedByID: "heartbeat"}
			_, err = s.st.InsertRun(ctx, tx, &retry)
			return err
		})
		if err != nil {
			return fmt.Errorf("recover run %s: %w", r.ID, err)
		}
		s.log.Warn("orphaned run failed and retried", "run", r.ID, "attempt", r.Attempt)
	}
	if len(runs) > 0 {
		s.Notify()
	}
	return nil
}

// Shutdown stops starting runs and waits for running ones to finish; when
// ctx ends first, the remaining runs are cancelled (their processes are
// stopped and the runs recorded as cancelled) before it returns. Then it
// stops the scheduling loop and waits for it.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	// Runs still queued here are the others' to start now.
	if err := s.st.DB.Notify(ctx, queuedChannel, ""); err != nil && ctx.Err() == nil {
		s.log.Warn("ask other replicas to start queued runs", "err", err)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.runCancel()
		<-done
		err = errors.New("heartbeat: shutdown grace period ended; remaining runs cancelled")
	}
	if s.cancel != nil {
		s.cancel()
		for _, c := range []chan struct{}{s.stopped, s.listened} {
			select {
			case <-c:
			case <-ctx.Done():
			}
		}
	}
	return err
}
