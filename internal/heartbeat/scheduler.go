package heartbeat

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// pollInterval is the fallback scan for runs queued by other replicas; the
// local path is driven by Notify and never waits for it.
const pollInterval = 2 * time.Second

// Start recovers orphaned runs and starts the scheduling loop; it returns
// once the first recovery pass is done.
func (s *Service) Start(ctx context.Context) error {
	if err := s.sweepOrphans(ctx, s.opts.ExclusiveDatabase); err != nil {
		return fmt.Errorf("heartbeat: recover orphaned runs: %w", err)
	}
	go s.loop(ctx)
	s.Notify()
	return nil
}

func (s *Service) loop(ctx context.Context) {
	defer close(s.stopped)
	renew := time.NewTicker(s.opts.LeaseTTL / 3)
	defer renew.Stop()
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.signal:
		case <-poll.C:
		case <-renew.C:
			if err := s.st.RenewRunLeases(ctx, s.st.DB, s.opts.RunnerID, s.st.Now().Add(s.opts.LeaseTTL)); err != nil && ctx.Err() == nil {
				s.log.Error("renew run leases", "err", err)
			}
			if err := s.sweepOrphans(ctx, false); err != nil && ctx.Err() == nil {
				s.log.Error("recover orphaned runs", "err", err)
			}
		}
		if err := s.schedule(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("schedule runs", "err", err)
		}
	}
}

func (s *Service) activeCount() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active), s.draining
}

// schedule starts as many queued runs as capacity allows.
func (s *Service) schedule(ctx context.Context) error {
	n, draining := s.activeCount()
	if draining || n >= s.opts.MaxConcurrent {
		return nil
	}
	cands, err := s.st.RunCandidates(ctx, s.st.DB, 4*(s.opts.MaxConcurrent-n))
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c.AgentID] {
			continue
		}
		seen[c.AgentID] = true
		if n, draining := s.activeCount(); draining || n >= s.opts.MaxConcurrent {
			return nil
		}
		if err := s.tryStart(ctx, c); err != nil {
			s.log.Error("start run", "run", c.ID, "err", err)
		}
	}
	return nil
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
		reason, err := s.refusal(ctx, tx, agent, run.IssueStateGuard)
		if err != nil {
			return err
		}
		if reason != "" {
			if err := s.st.RefuseQueuedRun(ctx, tx, run.ID, reason); err != nil {
				return err
			}
			details, _ := json.Marshal(map[string]string{"refusalReason": reason})
			return s.st.InsertActivity(ctx, tx, &domain.Activity{CompanyID: run.CompanyID, ActorKind: "system",
				AgentID: run.AgentID, Action: "heartbeat.refused", EntityType: "heartbeat_run", EntityID: run.ID, Details: details})
		}
		ok, err := s.st.StartRun(ctx, tx, run.ID, s.opts.RunnerID, store.HashToken(token), s.st.Now().Add(s.opts.LeaseTTL))
		if err != nil || !ok {
			return err
		}
		if run.IssueID != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE issues SET checkout_run_id = $2, execution_run_id = $2 WHERE id = $1`, run.IssueID, run.ID); err != nil {
				return fmt.Errorf("bind run to task: %w", err)
			}
		}
		started = true
		return nil
	})
	if err != nil || !started {
		return err
	}
	run, err = s.st.GetRun(ctx, s.st.DB, run.ID)
	if err != nil {
		return err
	}
	if s.opts.Observer.RunStarted != nil && run.StartedAt != nil {
		s.opts.Observer.RunStarted(run.StartedAt.Sub(run.CreatedAt))
	}
	rctx, cancel := context.WithCancel(s.runCtx)
	s.mu.Lock()
	s.active[run.ID] = cancel
	s.mu.Unlock()
	launched = true
	go func() {
		defer s.wg.Done()
		defer cancel()
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
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	logText := sanitizeLog(res.Log)
	err := s.st.Tx(fctx, func(tx *sql.Tx) error {
		ok, err := s.st.FinishRun(fctx, tx, run.ID, s.opts.RunnerID, res.Status, res.ExitCode, res.Error)
		if err != nil || !ok {
			return err
		}
		if err := s.st.PutRunLog(fctx, tx, run.ID, logText, res.LogSize, res.Truncated); err != nil {
			return err
		}
		if run.IssueID != "" {
			if _, err := tx.ExecContext(fctx, `UPDATE issues SET checkout_run_id = NULL WHERE id = $1 AND checkout_run_id = $2`, run.IssueID, run.ID); err != nil {
				return fmt.Errorf("release task checkout: %w", err)
			}
		}
		details, _ := json.Marshal(map[string]any{"status": res.Status, "exitCode": res.ExitCode, "error": res.Error})
		return s.st.InsertActivity(fctx, tx, &domain.Activity{CompanyID: run.CompanyID, ActorKind: "system", AgentID: run.AgentID,
			RunID: run.ID, Action: "heartbeat.finished", EntityType: "heartbeat_run", EntityID: run.ID, Details: details})
	})
	if err != nil {
		s.log.Error("record run outcome", "run", run.ID, "err", err)
	}
	if s.opts.Observer.RunFinished != nil && run.StartedAt != nil {
		s.opts.Observer.RunFinished(res.Status, time.Since(*run.StartedAt))
	}
	s.log.Info("run finished", "run", run.ID, "agent", run.AgentID, "status", res.Status)
}

func (s *Service) prepareAndRun(ctx context.Context, spec *RunSpec) Result {
	if err := s.resolveEnvironment(ctx, spec); err != nil {
		return Result{Status: domain.RunFailed, Error: err.Error()}
	}
	if err := s.prepareDirs(ctx, spec); err != nil {
		return Result{Status: domain.RunFailed, Error: err.Error()}
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

// resolveEnvironment loads the agent's execution environment into spec. A
// sandbox environment that is not active fails the run: falling back to an
// unconfined local process would silently drop the isolation the operator
// chose (low-trust email agents depend on it).
func (s *Service) resolveEnvironment(ctx context.Context, spec *RunSpec) error {
	if spec.Agent.EnvironmentID == "" {
		return nil
	}
	env, err := s.st.GetEnvironment(ctx, s.st.DB, spec.Agent.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && env.CompanyID != spec.Run.CompanyID) {
		return fmt.Errorf("environment %s of the agent was not found in its company", spec.Agent.EnvironmentID)
	}
	if err != nil {
		return fmt.Errorf("load environment: %w", err)
	}
	if env.Driver == envDriverSandbox && env.Status != envStatusActive {
		return fmt.Errorf("sandbox environment %q (%s) is not active (status %s)", env.Name, env.ID, env.Status)
	}
	spec.Environment = &env
	return nil
}

// Project workspace strategies (domain.ProjectWorkspace.Strategy).
const (
	strategyLocalPath   = "local_path"
	strategyGitWorktree = "git_worktree"
)

// ErrGitWorktreeBase is the failure of a git_worktree project workspace whose
// base is not a git checkout (reference §12).
var ErrGitWorktreeBase = errors.New("workspace_validation_failed: git_worktree_base_not_git_checkout")

// errMismatchedWorkspace means a task directory's marker names another
// company or task.
var errMismatchedWorkspace = errors.New("mismatched workspace reuse")

// workspaceMarker records which company and task (or agent, for runs
// without a task) own a private directory.
type workspaceMarker struct {
	CompanyID string `json:"companyId"`
	TaskID    string `json:"taskId,omitempty"`
	AgentID   string `json:"agentId,omitempty"`
}

// markerPath is the marker's path relative to the private directory.
const markerPath = ".paperclip/workspace.json"

// prepareDirs chooses and prepares the run's working directory and creates
// its skills directory.
//
// A task's project may configure a workspace (local_path or git_worktree);
// that explicit strategy must then be usable, and is never silently
// replaced. Every other task, including a low-trust sandbox task whose
// project has no workspace, works in a private directory
// <workspaces>/<companyId>/<taskId>: 0700, free of symlinks, marked with its
// owner, and kept across runs and reassignment. Runs without a task use
// <workspaces>/<companyId>/agent-<agentId> the same way.
func (s *Service) prepareDirs(ctx context.Context, spec *RunSpec) error {
	if s.opts.WorkspacesDir == "" {
		return nil
	}
	spec.Hidden = []string{filepath.Clean(s.opts.WorkspacesDir)}
	if s.opts.RunsDir != "" {
		spec.Hidden = append(spec.Hidden, filepath.Clean(s.opts.RunsDir))
	}
	spec.SkillsDir = filepath.Join(s.opts.RunsDir, spec.Run.ID, "skills")
	if err := os.MkdirAll(spec.SkillsDir, 0o700); err != nil {
		return fmt.Errorf("prepare run directory: %w", err)
	}
	run := spec.Run
	if run.IssueID == "" {
		dir, err := s.privateDir(run.CompanyID, "agent-"+run.AgentID, workspaceMarker{CompanyID: run.CompanyID, AgentID: run.AgentID})
		spec.Workdir = dir
		return err
	}
	ws, err := s.projectWorkspace(ctx, run)
	if err != nil {
		return err
	}
	if ws == nil {
		dir, err := s.privateDir(run.CompanyID, run.IssueID, workspaceMarker{CompanyID: run.CompanyID, TaskID: run.IssueID})
		spec.Workdir = dir
		return err
	}
	switch ws.Strategy {
	case strategyLocalPath:
		if !filepath.IsAbs(ws.Path) {
			return fmt.Errorf("workspace_validation_failed: project workspace path %q must be absolute", ws.Path)
		}
		fi, err := os.Stat(ws.Path)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("workspace_validation_failed: project workspace %q is not an existing directory", ws.Path)
		}
		spec.Workdir = filepath.Clean(ws.Path)
		return nil
	case strategyGitWorktree:
		dir, err := s.gitWorktree(ctx, run, ws.Path)
		spec.Workdir = dir
		return err
	}
	return fmt.Errorf("workspace_validation_failed: unsupported project workspace strategy %q", ws.Strategy)
}

// projectWorkspace returns the explicit workspace configuration of the
// run's task's project, or nil when there is none.
func (s *Service) projectWorkspace(ctx context.Context, run domain.Run) (*domain.ProjectWorkspace, error) {
	issue, err := s.st.GetIssue(ctx, s.st.DB, run.IssueID)
	if err != nil {
		return nil, fmt.Errorf("prepare workspace: load task: %w", err)
	}
	if issue.CompanyID != run.CompanyID {
		return nil, errors.New("prepare workspace: the task belongs to another company")
	}
	if issue.ProjectID == "" {
		return nil, nil
	}
	p, err := s.st.GetProject(ctx, s.st.DB, issue.ProjectID)
	if err != nil {
		return nil, fmt.Errorf("prepare workspace: load project: %w", err)
	}
	if p.CompanyID != run.CompanyID {
		return nil, errors.New("prepare workspace: the task's project belongs to another company")
	}
	if p.Workspace == nil || p.Workspace.Strategy == "" {
		return nil, nil
	}
	return p.Workspace, nil
}

// gitWorktree returns the task's worktree of the git checkout at base,
// creating it under the task's private directory on first use.
func (s *Service) gitWorktree(ctx context.Context, run domain.Run, base string) (string, error) {
	if !filepath.IsAbs(base) {
		return "", fmt.Errorf("%w: project workspace path %q must be absolute", ErrGitWorktreeBase, base)
	}
	if _, err := os.Lstat(filepath.Join(base, ".git")); err != nil {
		return "", fmt.Errorf("%w: project workspace %q is not a git checkout", ErrGitWorktreeBase, base)
	}
	dir, err := s.privateDir(run.CompanyID, run.IssueID, workspaceMarker{CompanyID: run.CompanyID, TaskID: run.IssueID})
	if err != nil {
		return "", err
	}
	wt := filepath.Join(dir, "worktree")
	if fi, err := os.Lstat(wt); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return "", fmt.Errorf("workspace_validation_failed: task worktree %s is not a directory", wt)
		}
		return wt, nil
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return "", errors.New("workspace_validation_failed: git is required for git_worktree workspaces but was not found")
	}
	// Hooks of the base repository are not run: this executes on the host,
	// outside any sandbox.
	cmd := exec.CommandContext(ctx, git, "-c", "core.hooksPath=/dev/null", "-C", base, "worktree", "add", "--detach", wt)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_TERMINAL_PROMPT=0"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("workspace_validation_failed: git worktree add failed: %w: %s", err, strings.TrimSpace(sanitizeLog(out)))
	}
	return wt, nil
}

// privateDir returns <workspaces>/<companyID>/<name>, creating each missing
// component with mode 0700. An existing component that is a symlink, or not
// a directory, is refused: a link could point the run (and the server's
// own writes, such as the marker) at another task or at the Paperclip home.
// The marker must name owner; a directory marked for another company or
// task is refused rather than shared.
func (s *Service) privateDir(companyID, name string, owner workspaceMarker) (string, error) {
	root := filepath.Clean(s.opts.WorkspacesDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("prepare workspace: %w", err)
	}
	dir := root
	for _, seg := range []string{companyID, name} {
		// Ids come from the database, but never let one climb the tree.
		if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, `/\`) {
			return "", fmt.Errorf("prepare workspace: invalid path component %q", seg)
		}
		dir = filepath.Join(dir, seg)
		if err := ensurePrivateDir(dir); err != nil {
			return "", err
		}
	}
	if err := checkMarker(dir, owner); err != nil {
		return "", err
	}
	return dir, nil
}

func ensurePrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("prepare workspace: %w", err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("prepare workspace: %s is a symlink; refusing to use it as a task directory", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("prepare workspace: %s is not a directory", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("prepare workspace: %w", err)
		}
	}
	return nil
}

// checkMarker reads or writes the directory's owner marker. The directory
// is writable by its agent, so access goes through os.Root: a planted
// symlink cannot redirect the server's read or write outside it.
func checkMarker(dir string, owner workspaceMarker) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	defer root.Close()
	if fi, err := root.Lstat(filepath.Dir(markerPath)); err == nil && (fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir()) {
		return fmt.Errorf("prepare workspace: %s/%s is not a directory", dir, filepath.Dir(markerPath))
	}
	raw, err := root.ReadFile(markerPath)
	switch {
	case err == nil:
		var got workspaceMarker
		if json.Unmarshal(raw, &got) != nil || got != owner {
			return fmt.Errorf("prepare workspace: %w: %s belongs to another company or task", errMismatchedWorkspace, dir)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("prepare workspace: read marker: %w", err)
	}
	if err := root.MkdirAll(filepath.Dir(markerPath), 0o700); err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	data, _ := json.Marshal(owner)
	f, err := root.OpenFile(markerPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("prepare workspace: write marker: %w", err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("prepare workspace: write marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("prepare workspace: write marker: %w", err)
	}
	return nil
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
			details, _ := json.Marshal(map[string]any{"attempt": r.Attempt})
			if err := s.st.InsertActivity(ctx, tx, &domain.Activity{CompanyID: r.CompanyID, ActorKind: "system", AgentID: r.AgentID,
				RunID: r.ID, Action: "heartbeat.orphaned", EntityType: "heartbeat_run", EntityID: r.ID, Details: details}); err != nil {
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
// stopped and the runs recorded as cancelled) before it returns.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.runCancel()
		<-done
		return errors.New("heartbeat: shutdown grace period ended; remaining runs cancelled")
	}
}

// Cancel stops a run executing in this process, if any.
func (s *Service) Cancel(runID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.active[runID]; ok {
		c()
		return true
	}
	return false
}
