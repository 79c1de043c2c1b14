package heartbeat_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// wsEnv is a heartbeat service whose home and workspaces root the test
// can see.
type wsEnv struct {
	*env
	home, workspaces string
}

func newWSEnv(t *testing.T, d *db.DB) *wsEnv {
	t.Helper()
	home := t.TempDir()
	ws := filepath.Join(home, "workspaces")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	user, err := sandbox.HostIdentity()
	if err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, d, "WS", heartbeat.Options{WorkspacesDir: ws, RunsDir: filepath.Join(home, "instance", "runs"),
		Home: home, Hidden: []string{filepath.Join(home, "instance")}, SandboxUser: user})
	return &wsEnv{env: e, home: home, workspaces: ws}
}

// environment creates an environment of the company.
func (e *wsEnv) environment(t *testing.T, driver, status string) string {
	t.Helper()
	en := domain.Environment{CompanyID: e.company, Name: driver, Driver: driver, Status: status}
	if driver == "sandbox" {
		en.Provider = "bubblewrap"
	}
	if err := e.st.CreateEnvironment(context.Background(), e.st.DB, &en); err != nil {
		t.Fatal(err)
	}
	return en.ID
}

// shAgent is a process agent running script with /bin/sh, optionally in an
// environment.
func (e *wsEnv) shAgent(t *testing.T, envID, script string) domain.Agent {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"command": "/bin/sh", "args": []string{"-c", script}, "timeoutSec": 30})
	a := domain.Agent{CompanyID: e.company, Name: "a", AdapterType: "process", AdapterConfig: raw, EnvironmentID: envID,
		HostExecutionApproved: true}
	if envID != "" {
		a.Permissions.TrustPreset = domain.TrustLowTrustReview
	}
	if err := e.st.CreateAgent(context.Background(), e.st.DB, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// task creates a task assigned to agent in project (optional) with the
// isolated execution settings inbound low-trust tasks carry.
func (e *wsEnv) task(t *testing.T, agentID, projectID string) domain.Issue {
	t.Helper()
	return e.newTask(t, agentID, projectID, json.RawMessage(`{"mode":"isolated_workspace"}`))
}

// plainTask is task without execution settings (a board-created task).
func (e *wsEnv) plainTask(t *testing.T, agentID, projectID string) domain.Issue {
	t.Helper()
	return e.newTask(t, agentID, projectID, nil)
}

func (e *wsEnv) newTask(t *testing.T, agentID, projectID string, settings json.RawMessage) domain.Issue {
	t.Helper()
	is := domain.Issue{CompanyID: e.company, Title: "t", AssigneeAgentID: agentID, Status: domain.IssueTodo, ProjectID: projectID,
		ExecutionWorkspaceSettings: settings}
	if _, err := e.st.CreateIssue(context.Background(), e.st.DB, &is); err != nil {
		t.Fatal(err)
	}
	return is
}

func (e *wsEnv) project(t *testing.T, ws *domain.ProjectWorkspace) string {
	t.Helper()
	p := domain.Project{CompanyID: e.company, Name: "p", Workspace: ws}
	if err := e.st.CreateProject(context.Background(), e.st.DB, &p); err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// run wakes agent on task and waits for the run's end.
func (e *wsEnv) run(t *testing.T, agentID, taskID string) (domain.Run, string) {
	t.Helper()
	r, _, err := e.svc.Wakeup(context.Background(), agentID, heartbeat.WakeRequest{Reason: "test", IssueID: taskID})
	if err != nil {
		t.Fatal(err)
	}
	r = e.wait(t, r.ID)
	log, _, _, _ := e.st.GetRunLog(context.Background(), e.st.DB, r.ID)
	return r, log
}

func mustFail(t *testing.T, r domain.Run, want string) {
	t.Helper()
	if r.Status != domain.RunFailed || !strings.Contains(r.Error, want) {
		t.Fatalf("run %s (%q), want failed with %q", r.Status, r.Error, want)
	}
}

// TestPrivateTaskDirectory: a task without a configured workspace runs in
// <workspaces>/<company>/<task>, created 0700 with an owner marker, and its
// files survive the next run and a reassignment to another agent.
func TestPrivateTaskDirectory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newWSEnv(t, d)
		script := `pwd; if [ -f note ]; then echo "note:$(cat note)"; fi; echo "$PAPERCLIP_AGENT_ID" > note`
		a1, a2 := e.shAgent(t, "", script), e.shAgent(t, "", script)
		task := e.plainTask(t, a1.ID, e.project(t, nil))
		dir := heartbeat.TaskDirectory(e.workspaces, e.company, task.ID, false)
		r, log := e.run(t, a1.ID, task.ID)
		if r.Status != domain.RunSucceeded || !strings.HasPrefix(log, dir+"\n") || strings.Contains(log, "note:") {
			t.Fatalf("first run %s %q: %s", r.Status, r.Error, log)
		}
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("task directory: %v %v", fi, err)
		}
		var marker map[string]string
		raw, _ := os.ReadFile(filepath.Join(dir, ".paperclip", "workspace.json"))
		if json.Unmarshal(raw, &marker) != nil || marker["companyId"] != e.company || marker["taskId"] != task.ID || marker["mode"] != "host" {
			t.Fatalf("marker %s", raw)
		}
		// Reassignment: another agent works on in the same directory.
		task.AssigneeAgentID = a2.ID
		if err := e.st.UpdateIssue(context.Background(), d, &task); err != nil {
			t.Fatal(err)
		}
		r, log = e.run(t, a2.ID, task.ID)
		if r.Status != domain.RunSucceeded || !strings.Contains(log, "note:"+a1.ID) {
			t.Fatalf("after reassignment %s %q: %s", r.Status, r.Error, log)
		}
	})
}

// TestUnsafeTaskDirectoriesRefused: a symlinked company or task directory,
// a symlinked control directory, and a directory marked for another task
// all fail the run instead of being used.
func TestUnsafeTaskDirectoriesRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newWSEnv(t, d)
		a := e.shAgent(t, "", "echo ran")
		elsewhere := t.TempDir()

		linked := e.plainTask(t, a.ID, "")
		if err := os.MkdirAll(filepath.Dir(heartbeat.TaskDirectory(e.workspaces, e.company, "x", false)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, heartbeat.TaskDirectory(e.workspaces, e.company, linked.ID, false)); err != nil {
			t.Fatal(err)
		}
		r, log := e.run(t, a.ID, linked.ID)
		mustFail(t, r, "is a symlink")
		if log != "" {
			t.Fatalf("the agent ran: %q", log)
		}

		mismatched := e.plainTask(t, a.ID, "")
		dir := filepath.Join(heartbeat.TaskDirectory(e.workspaces, e.company, mismatched.ID, false), ".paperclip")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		other, _ := json.Marshal(map[string]string{"companyId": e.company, "taskId": linked.ID})
		if err := os.WriteFile(filepath.Join(dir, "workspace.json"), other, 0o600); err != nil {
			t.Fatal(err)
		}
		r, _ = e.run(t, a.ID, mismatched.ID)
		mustFail(t, r, "mismatched workspace reuse")

		control := e.plainTask(t, a.ID, "")
		if err := os.MkdirAll(heartbeat.TaskDirectory(e.workspaces, e.company, control.ID, false), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(heartbeat.TaskDirectory(e.workspaces, e.company, control.ID, false), ".paperclip")); err != nil {
			t.Fatal(err)
		}
		r, _ = e.run(t, a.ID, control.ID)
		mustFail(t, r, "is not a directory")
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Fatalf("the server wrote through a symlink: %v", entries)
		}

		// A symlinked company directory is refused too. The second home
		// gets a database of its own: on the shared one the first
		// home's scheduler could claim the run and start it in its own,
		// unlinked, workspaces.
		own := dbtest.OpenSQLite(t)
		if d.Dialect == db.Postgres {
			own = dbtest.OpenPostgres(t)
		}
		d2 := newWSEnv(t, own)
		b := d2.shAgent(t, "", "echo ran")
		if err := os.MkdirAll(filepath.Join(d2.workspaces, "host"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Dir(heartbeat.TaskDirectory(d2.workspaces, d2.company, "x", false))); err != nil {
			t.Fatal(err)
		}
		r, _ = d2.run(t, b.ID, d2.plainTask(t, b.ID, "").ID)
		mustFail(t, r, "is a symlink")
	})
}

// TestProjectWorkspaces: an explicit workspace strategy applies and must be
// usable; it is never replaced by the private directory. A task asking for
// an isolated workspace never runs in a shared local_path directory, and
// no project path may point into the Paperclip home (another task's or
// company's workspace, the instance directory).
func TestProjectWorkspaces(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newWSEnv(t, d)
		a := e.shAgent(t, "", "pwd")

		plain := t.TempDir()
		r, _ := e.run(t, a.ID, e.plainTask(t, a.ID, e.project(t, &domain.ProjectWorkspace{Strategy: "git_worktree", Path: plain})).ID)
		mustFail(t, r, "git_worktree_base_not_git_checkout")

		r, _ = e.run(t, a.ID, e.plainTask(t, a.ID, e.project(t, &domain.ProjectWorkspace{Strategy: "local_path", Path: filepath.Join(plain, "missing")})).ID)
		mustFail(t, r, "is not an existing directory")

		shared := e.project(t, &domain.ProjectWorkspace{Strategy: "local_path", Path: plain})
		r, log := e.run(t, a.ID, e.plainTask(t, a.ID, shared).ID)
		if r.Status != domain.RunSucceeded || log != plain+"\n" {
			t.Fatalf("local_path run %s %q: %q", r.Status, r.Error, log)
		}
		// A task asking for an isolated workspace never runs on the host.
		r, log = e.run(t, a.ID, e.task(t, a.ID, shared).ID)
		if r.Status != domain.RunRefused || r.RefusalReason != heartbeat.RefusedIsolatedNoSandbox || log != "" {
			t.Fatalf("isolated task of a host agent: %s %q %q", r.Status, r.RefusalReason, log)
		}

		other := filepath.Join(e.workspaces, testkit.NewUUID(), testkit.NewUUID())
		if err := os.MkdirAll(other, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{other, e.workspaces, filepath.Join(e.home, "instance"), filepath.Dir(e.home)} {
			r, log = e.run(t, a.ID, e.plainTask(t, a.ID, e.project(t, &domain.ProjectWorkspace{Strategy: "local_path", Path: p})).ID)
			mustFail(t, r, "overlaps the Paperclip home")
			if log != "" {
				t.Fatalf("a run worked in %s: %q", p, log)
			}
		}

		if _, err := exec.LookPath("git"); err != nil {
			t.Log("git not installed: skipping the git_worktree success case")
			return
		}
		repo := t.TempDir()
		for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init"}} {
			if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		task := e.plainTask(t, a.ID, e.project(t, &domain.ProjectWorkspace{Strategy: "git_worktree", Path: repo}))
		r, log = e.run(t, a.ID, task.ID)
		want := filepath.Join(heartbeat.TaskDirectory(e.workspaces, e.company, task.ID, false), "worktree")
		if r.Status != domain.RunSucceeded || log != want+"\n" {
			t.Fatalf("git_worktree run %s %q: %q", r.Status, r.Error, log)
		}
		if _, err := os.Stat(filepath.Join(want, ".git")); err != nil {
			t.Fatalf("worktree not created: %v", err)
		}
	})
}

// TestSandboxedTaskRuns is the seed's regression at the scheduler level: a
// low-trust task with isolated execution in a project without a workspace
// runs inside the sandbox in its private directory; files persist; the run
// sees neither the workspaces root nor other tasks; an inactive sandbox
// environment or a missing bwrap fails the run instead of running it
// unconfined; a timed-out sandbox is killed.
func TestSandboxedTaskRuns(t *testing.T) {
	testkit.RequireBwrap(t)
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newWSEnv(t, d)
		sb := e.environment(t, "sandbox", "active")
		neighbour := heartbeat.TaskDirectory(e.workspaces, e.company, "neighbour", true)
		if err := os.MkdirAll(neighbour, 0o700); err != nil {
			t.Fatal(err)
		}
		a := e.shAgent(t, sb, `set -e; pwd; [ "$HOME" = "$(pwd)" ]; `+
			`if ls "`+neighbour+`" 2>/dev/null; then echo LEAK; fi; `+
			`if [ -f kept ]; then echo "kept:$(cat kept)"; else echo "$PAPERCLIP_RUN_ID" > kept; fi; `+
			`echo "api:$PAPERCLIP_API_URL"`)
		task := e.task(t, a.ID, e.project(t, nil))
		dir := heartbeat.TaskDirectory(e.workspaces, e.company, task.ID, true)
		first, log := e.run(t, a.ID, task.ID)
		if first.Status != domain.RunSucceeded || !strings.HasPrefix(log, dir+"\n") || strings.Contains(log, "LEAK") {
			t.Fatalf("sandboxed run %s %q: %s", first.Status, first.Error, log)
		}
		// The private task directory belongs to the sandbox identity (an
		// unprivileged user when the server is root).
		user, _ := sandbox.HostIdentity()
		if fi, err := os.Stat(dir); err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != user.UID {
			t.Fatalf("task directory %v %v, want it owned by %+v", fi, err, user)
		}
		// No bridge configured in this service: no API URL either.
		if !strings.Contains(log, "api:\n") {
			t.Fatalf("sandboxed run without a bridge got an API URL: %s", log)
		}
		r, log := e.run(t, a.ID, task.ID)
		if r.Status != domain.RunSucceeded || !strings.Contains(log, "kept:"+first.ID) {
			t.Fatalf("second sandboxed run %s %q: %s", r.Status, r.Error, log)
		}

		// An isolated task never works in a shared local_path directory.
		r, log = e.run(t, a.ID, e.task(t, a.ID, e.project(t, &domain.ProjectWorkspace{Strategy: "local_path", Path: t.TempDir()})).ID)
		mustFail(t, r, "requires an isolated workspace")
		if log != "" {
			t.Fatalf("the isolated task ran in the shared directory: %q", log)
		}

		slow := e.shAgent(t, sb, "sleep 30")
		var cfg map[string]any
		_ = json.Unmarshal(slow.AdapterConfig, &cfg)
		cfg["timeoutSec"] = 1
		slow.AdapterConfig, _ = json.Marshal(cfg)
		if err := e.st.UpdateAgent(context.Background(), d, &slow); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r, _ = e.run(t, slow.ID, e.task(t, slow.ID, "").ID)
		if r.Status != domain.RunTimedOut || time.Since(start) > 15*time.Second {
			t.Fatalf("sandbox timeout: %s after %s", r.Status, time.Since(start))
		}

		inactive := e.shAgent(t, e.environment(t, "sandbox", "inactive"), "echo ran")
		r, _ = e.run(t, inactive.ID, e.task(t, inactive.ID, "").ID)
		if r.Status != domain.RunRefused || r.RefusalReason != heartbeat.RefusedLowTrustNoSandbox {
			t.Fatalf("low-trust run in an inactive sandbox: %s %q %q", r.Status, r.RefusalReason, r.Error)
		}

		t.Setenv("PATH", t.TempDir())
		r, _ = e.run(t, a.ID, task.ID)
		mustFail(t, r, "bubblewrap (bwrap) is required for sandbox environments")
	})
}
