package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/store"
)

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
// base is not a git checkout (docs/architecture.md, "Sandboxed runs").
var ErrGitWorktreeBase = errors.New("workspace_validation_failed: git_worktree_base_not_git_checkout")

// errMismatchedWorkspace means a task directory's marker names another
// company or task.
var errMismatchedWorkspace = errors.New("mismatched workspace reuse")

// workspaceMarker records which company and task (or agent, for runs
// without a task) own a private directory, and whether sandboxed or host
// runs work in it.
type workspaceMarker struct {
	CompanyID string `json:"companyId"`
	TaskID    string `json:"taskId,omitempty"`
	AgentID   string `json:"agentId,omitempty"`
	Mode      string `json:"mode"`
}

// Execution modes of private directories: the first component under the
// workspaces root. Sandboxed and host runs never share a directory.
const (
	modeHost    = "host"
	modeSandbox = "sandbox"
)

// TaskDirectory is the private directory of a task (name is the task id,
// or "agent-<agentId>" for runs without a task) under the workspaces root:
// <workspaces>/sandbox/<companyId>/<name> for sandboxed runs and
// <workspaces>/host/<companyId>/<name> for runs on the host.
//
// Why two trees: whatever a sandboxed run writes (a Python .pth under
// $HOME/.local, a .claude/settings.json hook, a .git/config with
// core.fsmonitor) would execute as the server's user if a host run later
// worked, or had its HOME, in the same directory. A task reassigned from a
// sandboxed agent to a host agent therefore starts in a fresh directory;
// the two never share one (docs/security.md, "Sandboxed and host runs
// never share a directory").
func TaskDirectory(workspaces, companyID, name string, sandboxed bool) string {
	return filepath.Join(workspaces, runMode(sandboxed), companyID, name)
}

func runMode(sandboxed bool) string {
	if sandboxed {
		return modeSandbox
	}
	return modeHost
}

// markerPath is the marker's path relative to the private directory.
const markerPath = ".paperclip/workspace.json"

// isolatedMode is the executionWorkspaceSettings mode of tasks that must
// work in their own directory (inbound email tasks of low-trust agents).
const isolatedMode = "isolated_workspace"

// isolated reports whether a task's execution settings ask for an
// isolated workspace.
func isolated(is domain.Issue) bool {
	var ws struct {
		Mode string `json:"mode"`
	}
	return len(is.ExecutionWorkspaceSettings) > 0 && json.Unmarshal(is.ExecutionWorkspaceSettings, &ws) == nil && ws.Mode == isolatedMode
}

// prepareDirs chooses and prepares the run's working directory and creates
// its private run directory (skills, bridge).
//
// A task's project may configure a workspace (local_path or git_worktree);
// that explicit strategy must then be usable, and is never silently
// replaced. Every other task, including a low-trust sandbox task whose
// project has no workspace, works in a private directory (TaskDirectory:
// one for sandboxed runs, another for host runs): 0700, free of symlinks,
// marked with its owner, and kept across runs and reassignment. Runs
// without a task use the name agent-<agentId> the same way. A task asking
// for an isolated workspace never works in a shared local_path directory,
// nor does a sandboxed agent no instance administrator approved. A
// sandboxed run's private directory belongs to the sandbox identity; a
// host run gets a fresh HOME of its own in its run directory.
func (s *Service) prepareDirs(ctx context.Context, spec *RunSpec) error {
	if s.opts.WorkspacesDir == "" {
		return nil
	}
	spec.Hidden = []string{filepath.Clean(s.opts.WorkspacesDir)}
	if s.opts.RunsDir != "" {
		spec.Hidden = append(spec.Hidden, filepath.Clean(s.opts.RunsDir))
	}
	for _, h := range s.opts.Hidden {
		if h != "" {
			spec.Hidden = append(spec.Hidden, filepath.Clean(h))
		}
	}
	spec.SandboxUser, spec.Binary, spec.BinDir = s.opts.SandboxUser, s.opts.Binary, s.binDir()
	spec.RunDir = filepath.Join(s.opts.RunsDir, spec.Run.ID)
	spec.SkillsDir = filepath.Join(spec.RunDir, "skills")
	if err := os.MkdirAll(s.opts.RunsDir, 0o700); err != nil {
		return fmt.Errorf("prepare run directory: %w", err)
	}
	if err := os.Mkdir(spec.RunDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("prepare run directory: %w", err)
	}
	// The skills directory is readable by everyone who can reach it: the
	// sandbox identity binds it read-only; the run directory around it
	// (0700) keeps other host users out.
	if err := os.Mkdir(spec.SkillsDir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("prepare run directory: %w", err)
	}
	if err := os.Chmod(spec.SkillsDir, 0o755); err != nil {
		return fmt.Errorf("prepare run directory: %w", err)
	}
	if !spec.Sandboxed() {
		// A host run's HOME is its own, fresh and private, never a
		// directory an agent wrote before (see TaskDirectory).
		spec.Home = filepath.Join(spec.RunDir, "home")
		if err := os.Mkdir(spec.Home, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("prepare run directory: %w", err)
		}
	}
	run := spec.Run
	mode := runMode(spec.Sandboxed())
	if run.IssueID == "" {
		dir, err := s.privateDir(run.CompanyID, "agent-"+run.AgentID, workspaceMarker{CompanyID: run.CompanyID, AgentID: run.AgentID, Mode: mode})
		spec.Workdir = dir
		return s.ownWorkdir(spec, err)
	}
	issue, ws, err := s.projectWorkspace(ctx, run)
	if err != nil {
		return err
	}
	spec.Isolated = isolated(issue)
	if ws == nil {
		dir, err := s.privateDir(run.CompanyID, run.IssueID, workspaceMarker{CompanyID: run.CompanyID, TaskID: run.IssueID, Mode: mode})
		spec.Workdir = dir
		return s.ownWorkdir(spec, err)
	}
	if err := s.checkProjectPath(ws.Path); err != nil {
		return err
	}
	switch ws.Strategy {
	case strategyLocalPath:
		if spec.Isolated {
			return fmt.Errorf("workspace_validation_failed: the task requires an isolated workspace, but its project's workspace %q is a shared local_path directory", ws.Path)
		}
		if spec.Sandboxed() && !spec.Agent.HostExecutionApproved {
			// The project directory is shared with host runs: a
			// member-configured agent must not be able to plant anything
			// there that a host run would execute.
			return fmt.Errorf("%s: project workspace %q is a local_path directory shared with host runs; "+
				"an agent configured by a member (not approved by an instance administrator) may not work in it", RefusedSharedDirUnapproved, ws.Path)
		}
		fi, err := os.Stat(ws.Path)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("workspace_validation_failed: project workspace %q is not an existing directory", ws.Path)
		}
		spec.Workdir = filepath.Clean(ws.Path)
		return nil
	case strategyGitWorktree:
		dir, created, err := s.gitWorktree(ctx, run, ws.Path, mode, spec.RunDir)
		spec.Workdir = dir
		if err == nil && created && spec.Sandboxed() {
			// The worktree was checked out by the server; the sandbox
			// identity must be able to work in it.
			err = spec.SandboxUser.OwnTree(dir)
		}
		if err == nil {
			err = s.ownWorkdir(spec, nil)
		}
		return err
	}
	return fmt.Errorf("workspace_validation_failed: unsupported project workspace strategy %q", ws.Strategy)
}

// ownWorkdir gives a sandboxed run's private task directory (and, for a
// worktree, the task directory around it) to the sandbox identity.
func (s *Service) ownWorkdir(spec *RunSpec, err error) error {
	if err != nil || !spec.Sandboxed() {
		return err
	}
	if err := spec.SandboxUser.Own(spec.Workdir); err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	return nil
}

// checkProjectPath refuses a project workspace path that is relative, or
// lies inside (or contains) the Paperclip home or anything hidden from
// sandboxes: a project may not point a run at the database, the master
// key or another task's (or company's) workspace.
func (s *Service) checkProjectPath(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("workspace_validation_failed: project workspace path %q must be absolute", path)
	}
	p := filepath.Clean(path)
	guarded := append([]string{s.opts.Home, s.opts.WorkspacesDir, s.opts.RunsDir}, s.opts.Hidden...)
	for _, g := range guarded {
		if g == "" {
			continue
		}
		g = filepath.Clean(g)
		if sandbox.Within(p, g) || sandbox.Within(g, p) {
			return fmt.Errorf("workspace_validation_failed: project workspace %q overlaps the Paperclip home; choose a directory outside it", path)
		}
	}
	return nil
}

// projectWorkspace returns the run's task and the explicit workspace
// configuration of its project, or nil when there is none.
func (s *Service) projectWorkspace(ctx context.Context, run domain.Run) (domain.Issue, *domain.ProjectWorkspace, error) {
	issue, err := s.st.GetIssue(ctx, s.st.DB, run.IssueID)
	if err != nil {
		return issue, nil, fmt.Errorf("prepare workspace: load task: %w", err)
	}
	if issue.CompanyID != run.CompanyID {
		return issue, nil, errors.New("prepare workspace: the task belongs to another company")
	}
	if issue.ProjectID == "" {
		return issue, nil, nil
	}
	p, err := s.st.GetProject(ctx, s.st.DB, issue.ProjectID)
	if err != nil {
		return issue, nil, fmt.Errorf("prepare workspace: load project: %w", err)
	}
	if p.CompanyID != run.CompanyID {
		return issue, nil, errors.New("prepare workspace: the task's project belongs to another company")
	}
	if p.Workspace == nil || p.Workspace.Strategy == "" {
		return issue, nil, nil
	}
	return issue, p.Workspace, nil
}

// gitWorktree returns the task's worktree of the git checkout at base,
// creating it under the task's private directory of mode on first use
// (created). A sandboxed run gets a worktree of its own in its own
// directory; the project's checkout itself is never mounted into a
// sandbox.
func (s *Service) gitWorktree(ctx context.Context, run domain.Run, base, mode, runDir string) (wt string, created bool, err error) {
	if _, err := os.Lstat(filepath.Join(base, ".git")); err != nil {
		return "", false, fmt.Errorf("%w: project workspace %q is not a git checkout", ErrGitWorktreeBase, base)
	}
	dir, err := s.privateDir(run.CompanyID, run.IssueID, workspaceMarker{CompanyID: run.CompanyID, TaskID: run.IssueID, Mode: mode})
	if err != nil {
		return "", false, err
	}
	wt = filepath.Join(dir, "worktree")
	if fi, err := os.Lstat(wt); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return "", false, fmt.Errorf("workspace_validation_failed: task worktree %s is not a directory", wt)
		}
		return wt, false, nil
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return "", false, errors.New("workspace_validation_failed: git is required for git_worktree workspaces but was not found")
	}
	// Hooks of the base repository are not run: this executes on the host,
	// outside any sandbox. HOME is the run's own directory, never the task
	// directory (a sandboxed agent may have planted a .gitconfig there),
	// and no global configuration is read.
	cmd := exec.CommandContext(ctx, git, "-c", "core.hooksPath=/dev/null", "-C", base, "worktree", "add", "--detach", wt)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + runDir, "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_TERMINAL_PROMPT=0"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("workspace_validation_failed: git worktree add failed: %w: %s", err, strings.TrimSpace(sanitizeLog(out)))
	}
	return wt, true, nil
}

// privateDir returns TaskDirectory(<workspaces>, companyID, name, owner's
// mode), creating each missing component with mode 0700. An existing component that is a symlink, or not
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
	for _, seg := range []string{owner.Mode, companyID, name} {
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
		return compareMarker(dir, raw, owner)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("prepare workspace: read marker: %w", err)
	}
	if err := root.MkdirAll(filepath.Dir(markerPath), 0o700); err != nil {
		return fmt.Errorf("prepare workspace: %w", err)
	}
	// Why a temporary file and a hard link: two runs on one task (two
	// agents, or two replicas) may prepare the directory at once. Created
	// in place, the loser of O_EXCL failed its run, and a reader could see
	// the winner's file still empty and call it another task's. The link
	// makes the marker appear whole or not at all, and exclusively: who
	// loses reads the winner's marker and compares it like any other.
	tmp := fmt.Sprintf("%s.%d-%s.tmp", markerPath, os.Getpid(), store.NewID())
	data, _ := json.Marshal(owner)
	err = root.WriteFile(tmp, append(data, '\n'), 0o600)
	if err == nil {
		err = root.Link(tmp, markerPath)
	}
	_ = root.Remove(tmp)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrExist):
		raw, err := root.ReadFile(markerPath)
		if err != nil {
			return fmt.Errorf("prepare workspace: read marker: %w", err)
		}
		return compareMarker(dir, raw, owner)
	default:
		return fmt.Errorf("prepare workspace: write marker: %w", err)
	}
}

// compareMarker refuses a directory whose marker names another owner.
func compareMarker(dir string, raw []byte, owner workspaceMarker) error {
	var got workspaceMarker
	if json.Unmarshal(raw, &got) != nil || got != owner {
		return fmt.Errorf("prepare workspace: %w: %s belongs to another company or task", errMismatchedWorkspace, dir)
	}
	return nil
}

// binDir is the host directory that holds paperclipai for host runs, or ""
// when no binary is configured.
func (s *Service) binDir() string {
	switch {
	case s.opts.Binary == "":
		return ""
	case s.opts.BinDir != "":
		return filepath.Clean(s.opts.BinDir)
	case s.opts.RunsDir != "":
		return filepath.Join(filepath.Dir(filepath.Clean(s.opts.RunsDir)), "bin")
	}
	return ""
}

// linkBinary points <binDir>/paperclipai at the server's executable, so
// the agent CLI of the skills is on every host run's PATH. The link is
// replaced atomically: runs starting meanwhile see the old or new one.
func (s *Service) linkBinary() error {
	dir := s.binDir()
	if dir == "" {
		return nil
	}
	target, err := filepath.Abs(s.opts.Binary)
	if err != nil {
		return fmt.Errorf("link paperclipai: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("link paperclipai: %w", err)
	}
	tmp := filepath.Join(dir, ".paperclipai-"+store.NewID())
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("link paperclipai: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "paperclipai")); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("link paperclipai: %w", err)
	}
	return nil
}
