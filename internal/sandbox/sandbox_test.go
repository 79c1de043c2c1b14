package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

const wait = 60 * time.Second

// toolDir returns a directory outside the Paperclip home holding the agent
// script (the adapter's command), the way an operator would install an
// agent command: readable and executable by the sandbox user.
func toolDir(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// agentScript probes the sandbox from inside and uses the bridge. Every
// check prints FAIL and exits non-zero, so the run's status and log tell
// the test what happened.
const agentScript = `#!/bin/sh
fail() { echo "FAIL: $*"; exit 1; }
# The server's own binary is on PATH as paperclipai.
[ "$(command -v paperclipai)" = /run/paperclip/bin/paperclipai ] || fail "paperclipai on PATH: $(command -v paperclipai)"
PC=paperclipai

# The Paperclip home: no master key, database or other tasks.
[ -e "$PROBE_KEY" ] && fail "master key visible"
cat "$PROBE_KEY" >/dev/null 2>&1 && fail "master key readable"
[ -n "$(ls -A "$PROBE_HOME/instance" 2>/dev/null)" ] && fail "instance directory visible"
[ -e "$PROBE_OTHER_TASK" ] && fail "another task's directory visible"
# Writes outside the task directory do not reach the host.
touch "$PROBE_HOME/escape" 2>/dev/null
touch "$(dirname "$0")/escape" 2>/dev/null && fail "command directory writable"
touch /usr/escape 2>/dev/null && fail "/usr writable"
echo private > /tmp/private || fail "private /tmp not writable"
# No network, not even the control plane's own loopback listener.
PAPERCLIP_API_URL="$PROBE_API" "$PC" api GET /health >/dev/null 2>&1 && fail "network reachable"
[ "$HOME" = "$(pwd)" ] || fail "HOME $HOME is not the working directory $(pwd)"
[ -d "$PAPERCLIP_SKILLS_DIR" ] || fail "no skills directory at $PAPERCLIP_SKILLS_DIR"
touch "$PAPERCLIP_SKILLS_DIR/x" 2>/dev/null && fail "skills directory writable"

# Files persist across runs of the same task.
if [ -f keep.txt ]; then echo "kept:$(cat keep.txt)"; else echo "$PAPERCLIP_RUN_ID" > keep.txt; echo "first run"; fi

# The bridge: the task, its comments and the email thread, as the run.
"$PC" api GET "/issues/$PAPERCLIP_TASK_ID" >/dev/null || fail "read task"
"$PC" api POST "/issues/$PAPERCLIP_TASK_ID/comments" --data '{"body":"hello from the sandbox"}' >/dev/null || fail "comment"
"$PC" email inboxes > inboxes.json || fail "email inboxes"
grep -q "$PROBE_ADDRESS" inboxes.json || fail "inbox list lacks the address: $(cat inboxes.json)"
"$PC" email thread "$PAPERCLIP_TASK_ID" > thread.json || fail "email thread"
grep -q "the secret plan" thread.json || fail "thread lacks the message: $(cat thread.json)"
# Another task's thread is not reachable, even in the same company.
out=$("$PC" api GET "/companies/$PAPERCLIP_COMPANY_ID/email/tasks/$PROBE_OTHER_TASK_ID" 2>&1) && fail "other thread reachable: $out"
echo "$out" | grep -q "not available inside the sandbox (HTTP 403)" || fail "other thread answer: $out"
# No other run's bridge socket is visible: only this run's socket.
# (Bind mount points read as regular files in directory listings: test each.)
sockets=$(find "$HOME" "$(dirname "$0")" /tmp /run ! -type d 2>/dev/null | while read -r f; do [ -S "$f" ] && echo "$f"; done)
[ "$sockets" = /run/paperclip/api.sock ] || fail "sockets visible: $sockets"
# Mailbox setup is not reachable from the sandbox.
out=$("$PC" api POST "/companies/$PAPERCLIP_COMPANY_ID/email/inboxes" --data '{}' 2>&1) && fail "setup reachable: $out"
echo "$out" | grep -q "not available inside the sandbox (HTTP 403)" || fail "setup answer: $out"
echo "all sandbox checks passed"
`

// TestSandboxedLowTrustEmailRun is the seed's regression end to end: a
// low-trust agent with an active bubblewrap sandbox, whose boundary project
// has no workspace, receives an email; its run starts in a private task
// directory inside the sandbox, cannot see the Paperclip home or the
// network, comments and reads its thread through the bridge, is refused
// mailbox setup, and finds its files again on the next run of the task.
func TestSandboxedLowTrustEmailRun(t *testing.T) {
	testkit.RequireBwrap(t)
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{
			"enableChatConnectors": true, "enableIsolatedWorkspaces": true}}, 200)
		proj := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/projects", map[string]any{"name": "Mail"}, 201))
		envID := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/environments",
			map[string]any{"name": "Sandbox", "driver": "sandbox", "provider": "bubblewrap"}, 201))
		// A directory of another task of the same company must stay invisible.
		otherTask := heartbeat.TaskDirectory(e.Config.WorkspacesDir(), e.CompanyID, testkit.NewUUID(), true)
		if err := os.MkdirAll(otherTask, 0o700); err != nil {
			t.Fatal(err)
		}
		tools := toolDir(t, agentScript)
		otherTaskID := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Other"}, 201))
		probe := map[string]string{"PROBE_HOME": e.Home, "PROBE_KEY": e.Config.MasterKeyFile,
			"PROBE_API": e.URL() + "/api", "PROBE_OTHER_TASK": otherTask, "PROBE_OTHER_TASK_ID": otherTaskID}
		adapterConfig := map[string]any{"command": filepath.Join(tools, "agent.sh"), "env": probe, "timeoutSec": 60}
		e.AgentID = testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/agents", map[string]any{
			"name": "Careful", "adapterType": "process", "adapterConfig": adapterConfig, "environmentId": envID,
			"permissions": map[string]any{"trustPreset": "low_trust_review",
				"authorizationPolicy": map[string]any{"trustBoundary": map[string]any{"projectIds": []string{proj}}}}}, 201))
		sum := e.Setup("careful", nil)
		epID, address := sum["id"].(string), sum["address"].(string)
		probe["PROBE_ADDRESS"] = address
		e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"adapterConfig": adapterConfig}, 200)
		task := deliverTask(t, e, epID, address, emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "Plan",
			Text: "Here is the secret plan."})
		if task.ProjectID != proj {
			t.Fatalf("task project %q, want the boundary project", task.ProjectID)
		}
		first := finishedRun(t, e, task.ID, 1)
		log := runLog(t, e, first)
		if first.Status != domain.RunSucceeded || !strings.Contains(log, "first run") || !strings.Contains(log, "all sandbox checks passed") {
			t.Fatalf("first run %s (%s): %s", first.Status, first.Error, log)
		}
		if _, err := os.Stat(filepath.Join(e.Home, "escape")); err == nil {
			t.Fatal("the sandbox wrote into the Paperclip home")
		}
		taskDir := heartbeat.TaskDirectory(e.Config.WorkspacesDir(), e.CompanyID, task.ID, true)
		if fi, err := os.Stat(taskDir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("task directory %s: %v %v", taskDir, fi, err)
		}
		if _, err := os.Stat(filepath.Join(taskDir, ".paperclip", "workspace.json")); err != nil {
			t.Fatalf("workspace marker: %v", err)
		}
		found := false
		for _, c := range e.Board.List("/api/issues/" + task.ID + "/comments") {
			if c["body"] == "hello from the sandbox" && c["authorAgentId"] == e.AgentID && c["runId"] == first.ID {
				found = true
			}
		}
		if !found {
			t.Fatal("the sandbox's comment is missing or not attributed to its run")
		}

		// A second run of the same task sees the first run's file.
		e.Board.JSON("POST", "/api/agents/"+e.AgentID+"/wakeup", map[string]any{"reason": "again", "issueId": task.ID}, 202)
		second := finishedRun(t, e, task.ID, 2)
		log = runLog(t, e, second)
		if second.Status != domain.RunSucceeded || !strings.Contains(log, "kept:"+first.ID) {
			t.Fatalf("second run %s (%s): %s", second.Status, second.Error, log)
		}
	})
}

// deliverTask waits until the inbox epID has a subscribed socket,
// delivers req to address and waits for the email task it makes.
func deliverTask(t *testing.T, e *testkit.EmailEnv, epID, address string, req emulator.DeliverRequest) domain.Issue {
	t.Helper()
	testkit.Eventually(t, wait, "a subscribed WebSocket", func() bool { return e.Inbound.SocketConnected(epID) })
	if _, err := e.Em.Deliver(address, req); err != nil {
		t.Fatal(err)
	}
	var task domain.Issue
	testkit.Eventually(t, wait, "the email task", func() bool {
		is, err := e.Store.ListIssues(context.Background(), e.Store.DB, e.CompanyID, store.IssueFilter{OriginKind: "chat_channel"})
		if err != nil || len(is) == 0 {
			return false
		}
		task = is[0]
		return true
	})
	return task
}

// finishedRun waits until the agent has n finished runs of the task and
// returns the newest.
func finishedRun(t *testing.T, e *testkit.EmailEnv, taskID string, n int) domain.Run {
	t.Helper()
	var last domain.Run
	testkit.Eventually(t, wait, "finished runs", func() bool {
		rs, err := e.Store.ListRuns(context.Background(), e.Store.DB, e.CompanyID, e.AgentID, taskID, 100)
		if err != nil {
			t.Fatal(err)
		}
		last = domain.Run{}
		done := 0
		for _, r := range rs {
			if !r.Terminal() {
				return false
			}
			done++
			if last.ID == "" || r.CreatedAt.After(last.CreatedAt) {
				last = r
			}
		}
		return done >= n
	})
	return last
}

func runLog(t *testing.T, e *testkit.EmailEnv, r domain.Run) string {
	t.Helper()
	log, _, _, err := e.Store.GetRunLog(context.Background(), e.Store.DB, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return log
}
