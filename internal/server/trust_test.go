package server_test

import (
	"context"
	"fmt"
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

// member adds a member to the company and returns a client with its key.
func (e *env) member(companyID, email, role string) *testkit.Client {
	m := e.board.JSON("POST", "/api/companies/"+companyID+"/members", map[string]any{"email": email, "role": role}, 201)
	key := e.board.JSON("POST", "/api/companies/"+companyID+"/board-keys", map[string]any{"userId": m["userId"]}, 201)
	return e.board.As(key["token"].(string), "")
}

// toolScript writes script into a directory the sandbox user can read
// and returns its path (an agent command installed outside the home).
func toolScript(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMembersCannotExecuteOnTheHost is the "any member runs any host
// command" regression: a member's process agent is accepted but never runs
// on the host — refused until it has an active sandbox environment, where
// it can neither read the master key nor write outside its task
// directory; a member changing an administrator's agent withdraws its
// approval; project paths and non-public http URLs are administrator
// settings; an administrator re-saving the configuration approves it.
func TestMembersCannotExecuteOnTheHost(t *testing.T) {
	testkit.RequireBwrap(t)
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Acme")
		mc := e.member(cid, "member@example.com", "member")
		key := e.inst.Config.MasterKeyFile
		escape := filepath.Join(e.inst.Home, "escape")
		script := `cat "` + key + `" && echo KEY-READ; id -u; touch "` + escape + `"; echo done`
		// A member's command is a system program: a program elsewhere
		// would have its directory bound into the sandbox.
		for _, c := range []string{toolScript(t, script), "tools/agent.sh", "./agent.sh"} {
			if st, body := mc.Do("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Mine", "adapterType": "process",
				"adapterConfig": map[string]any{"command": c}}); st != 403 || !strings.Contains(string(body), "outside the system directories") {
				t.Fatalf("member command %s: %d %s", c, st, body)
			}
		}
		created := mc.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Mine", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}}}, 201)
		aid := testkit.ID(created)
		if created["hostExecutionApproved"] != false {
			t.Fatalf("a member's agent is approved for the host: %v", created)
		}
		run := mc.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "try"}, 202)
		if run["status"] != "refused" || run["refusalReason"] != "unapproved_config_requires_sandbox_environment" {
			t.Fatalf("a member's agent was not refused: %v", run)
		}
		// With an active sandbox environment it runs, confined.
		sb := testkit.ID(mc.JSON("POST", "/api/companies/"+cid+"/environments", map[string]any{"name": "sb", "driver": "sandbox"}, 201))
		mc.JSON("PATCH", "/api/agents/"+aid, map[string]any{"environmentId": sb}, 200)
		run = mc.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "try"}, 202)
		run = e.waitRun(testkit.ID(run), "succeeded", "failed")
		log := mc.JSON("GET", "/api/heartbeat-runs/"+testkit.ID(run)+"/log", nil, 200)["content"].(string)
		if !strings.Contains(log, "done") || strings.Contains(log, "KEY-READ") ||
			(os.Geteuid() == 0 && strings.Contains(log, "\n0\n")) {
			t.Fatalf("sandboxed member agent: %v\n%s", run["status"], log)
		}
		// (Inside, a path under the home may exist on the sandbox's private
		// /tmp; on the host nothing appears.)
		if _, err := os.Stat(escape); err == nil {
			t.Fatal("the member's agent wrote into the Paperclip home")
		}
		// An unapproved agent whose command lies elsewhere (an agent from
		// before approvals existed) is refused in the sandbox with the
		// reason, before its directory is bound; approved, it runs.
		tool := toolScript(t, "echo approved-tool-ran")
		legacy := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Legacy", "adapterType": "process",
			"adapterConfig": map[string]any{"command": tool}, "environmentId": sb}, 201))
		ctx := context.Background()
		la, err := e.inst.Store.GetAgent(ctx, e.inst.DB, legacy)
		if err != nil {
			t.Fatal(err)
		}
		la.HostExecutionApproved = false
		if err := e.inst.Store.UpdateAgent(ctx, e.inst.DB, &la); err != nil {
			t.Fatal(err)
		}
		run = e.waitRun(testkit.ID(mc.JSON("POST", "/api/agents/"+legacy+"/wakeup", map[string]any{"reason": "try"}, 202)), "succeeded", "failed")
		if run["status"] != "failed" || !strings.Contains(fmt.Sprint(run["error"]), "needs an instance administrator's approval") {
			t.Fatalf("unapproved command outside the system directories: %v", run)
		}
		e.board.JSON("PATCH", "/api/agents/"+legacy, map[string]any{"adapterConfig": map[string]any{"command": tool}}, 200)
		run = e.waitRun(testkit.ID(mc.JSON("POST", "/api/agents/"+legacy+"/wakeup", map[string]any{"reason": "try"}, 202)), "succeeded", "failed")
		if log := mc.JSON("GET", "/api/heartbeat-runs/"+testkit.ID(run)+"/log", nil, 200)["content"].(string); !strings.Contains(log, "approved-tool-ran") {
			t.Fatalf("approved command: %v\n%s", run, log)
		}

		// The administrator's agent loses its approval when a member
		// changes how it executes; the administrator re-saving restores it.
		admins := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Ops", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"hi"}, "env": map[string]string{"TOKEN": "s3cret-value"}}}, 201))
		if got := e.board.JSON("GET", "/api/agents/"+admins, nil, 200); got["hostExecutionApproved"] != true {
			t.Fatalf("administrator's agent not approved: %v", got)
		}
		// A member changing only the timeout (values sent back masked) keeps it.
		same := map[string]any{"command": "/bin/echo", "args": []string{"hi"}, "env": map[string]string{"TOKEN": "********"}, "timeoutSec": 30}
		if got := mc.JSON("PATCH", "/api/agents/"+admins, map[string]any{"adapterConfig": same}, 200); got["hostExecutionApproved"] != true {
			t.Fatalf("a timeout change withdrew the approval: %v", got)
		}
		// (The stored TOKEN is not kept across a member's command change:
		// TestMaskedSecretsNeverFollowAChangedCommand.)
		changed := map[string]any{"command": "/bin/sh", "args": []string{"-c", "id"}}
		if got := mc.JSON("PATCH", "/api/agents/"+admins, map[string]any{"adapterConfig": changed}, 200); got["hostExecutionApproved"] != false {
			t.Fatalf("a member's command change kept the approval: %v", got)
		}
		run = mc.JSON("POST", "/api/agents/"+admins+"/wakeup", map[string]any{"reason": "try"}, 202)
		if run["refusalReason"] != "unapproved_config_requires_sandbox_environment" {
			t.Fatalf("changed agent ran: %v", run)
		}
		if got := e.board.JSON("PATCH", "/api/agents/"+admins, map[string]any{"adapterConfig": changed}, 200); got["hostExecutionApproved"] != true {
			t.Fatalf("the administrator's re-save did not approve: %v", got)
		}

		// Project paths and private http URLs are administrator settings.
		outside := t.TempDir()
		if st, body := mc.Do("POST", "/api/companies/"+cid+"/projects", map[string]any{"name": "p",
			"workspace": map[string]any{"strategy": "local_path", "path": outside}}); st != 403 {
			t.Fatalf("member project path: %d %s", st, body)
		}
		for _, p := range []string{e.inst.Home, filepath.Join(e.inst.Config.WorkspacesDir(), cid), filepath.Dir(e.inst.Home), "/"} {
			if st, body := e.board.Do("POST", "/api/companies/"+cid+"/projects", map[string]any{"name": "p",
				"workspace": map[string]any{"strategy": "local_path", "path": p}}); st != 400 || !strings.Contains(string(body), "outside the Paperclip home") {
				t.Fatalf("project path %s: %d %s", p, st, body)
			}
		}
		e.board.JSON("POST", "/api/companies/"+cid+"/projects", map[string]any{"name": "p",
			"workspace": map[string]any{"strategy": "local_path", "path": outside}}, 201)
		for _, u := range []string{"http://127.0.0.1:9/hook", "http://localhost/x", "http://169.254.169.254/latest", "http://10.0.0.5/",
			"http://[::1]/", "http://app.localhost/"} {
			if st, body := mc.Do("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "h", "adapterType": "http",
				"adapterConfig": map[string]any{"url": u}}); st != 403 {
				t.Fatalf("member http agent to %s: %d %s", u, st, body)
			}
		}
		e.board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "h", "adapterType": "http",
			"adapterConfig": map[string]any{"url": "http://127.0.0.1:9/hook"}}, 201)
	})
}

// TestCancelAndPauseStopRuns: POST /heartbeat-runs/:id/cancel (board
// writers only) and pausing or terminating an agent stop its live run at
// once: the run token stops working with the response, the process is
// stopped, and the run is recorded cancelled with the reason.
func TestCancelAndPauseStopRuns(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Acme")
		viewer := e.member(cid, "viewer@example.com", "viewer")
		mc := e.member(cid, "member@example.com", "member")
		dir := t.TempDir()
		for i, stop := range []string{"cancel", "paused", "terminated"} {
			name := stop
			aid := e.shellAgent(cid, "Worker "+name, blockingScript(dir, name), nil)
			task := e.task(cid, aid)
			run := testkit.ID(e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "go", "issueId": task}, 202))
			token := readWhenPresent(t, filepath.Join(dir, name+".token"))
			agent := e.board.As(token, run)
			agent.JSON("GET", "/api/issues/"+task, nil, 200)
			switch stop {
			case "cancel":
				if st, _ := viewer.Do("POST", "/api/heartbeat-runs/"+run+"/cancel", nil); st != 403 {
					t.Fatalf("viewer cancel: %d", st)
				}
				if st, _ := agent.Do("POST", "/api/heartbeat-runs/"+run+"/cancel", nil); st != 403 {
					t.Fatalf("agent cancel: %d", st)
				}
				got := mc.JSON("POST", "/api/heartbeat-runs/"+run+"/cancel", map[string]any{"reason": "wrong task"}, 202)
				if got["cancelRequestedAt"] == nil {
					t.Fatalf("cancel answer: %v", got)
				}
			default:
				mc.JSON("PATCH", "/api/agents/"+aid, map[string]any{"status": stop}, 200)
			}
			// The token is dead at once, while the process may still stop.
			if st, body := agent.Do("GET", "/api/issues/"+task, nil); st != 401 {
				t.Fatalf("%s: the run token still works: %d %s", stop, st, body)
			}
			began := time.Now()
			got := e.waitRun(run, "cancelled", "succeeded", "failed")
			want := map[string]string{"cancel": "run cancelled: wrong task", "paused": "run cancelled: agent paused",
				"terminated": "run cancelled: agent terminated"}[stop]
			if got["status"] != "cancelled" || got["error"] != want || time.Since(began) > 20*time.Second {
				t.Fatalf("%s (%d): %v after %s", stop, i, got, time.Since(began))
			}
			if st, _ := mc.Do("POST", "/api/heartbeat-runs/"+run+"/cancel", nil); st != 409 {
				t.Fatalf("cancel of a finished run: %d", st)
			}
		}
	})
}

// TestAgentSubtasks: an agent creates subtasks of its own task only
// unassigned or assigned to itself, and a low-trust agent only inside its
// trust boundary (the subtask inherits the parent's project).
func TestAgentSubtasks(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Acme")
		dir := t.TempDir()
		inside := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/projects", map[string]any{"name": "Inside"}, 201))
		outside := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/projects", map[string]any{"name": "Outside"}, 201))
		other := e.shellAgent(cid, "Other", "true", nil)
		aid := e.shellAgent(cid, "Worker", blockingScript(dir, "w"), nil)
		parent := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/issues",
			map[string]any{"title": "Parent", "assigneeAgentId": aid, "projectId": inside}, 201))
		run := testkit.ID(e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "go", "issueId": parent}, 202))
		agent := e.board.As(readWhenPresent(t, filepath.Join(dir, "w.token")), run)
		// The boundary applies from now on (checked per request).
		e.board.JSON("PATCH", "/api/agents/"+aid, map[string]any{"permissions": map[string]any{"trustPreset": "low_trust_review",
			"authorizationPolicy": map[string]any{"trustBoundary": map[string]any{"projectIds": []string{inside}}}}}, 200)
		create := func(extra map[string]any) (int, string) {
			body := map[string]any{"title": "Sub", "parentId": parent}
			for k, v := range extra {
				body[k] = v
			}
			st, b := agent.Do("POST", "/api/companies/"+cid+"/issues", body)
			return st, string(b)
		}
		if st, body := create(map[string]any{"assigneeAgentId": other}); st != 403 || !strings.Contains(body, "unassigned subtasks or subtasks assigned to themselves") {
			t.Fatalf("subtask for another agent: %d %s", st, body)
		}
		if st, body := create(map[string]any{"projectId": outside}); st != 403 || !strings.Contains(body, "outside the agent's trust boundary") {
			t.Fatalf("subtask outside the boundary: %d %s", st, body)
		}
		for _, extra := range []map[string]any{nil, {"assigneeAgentId": aid}} {
			st, body := create(extra)
			if st != 201 || !strings.Contains(body, `"projectId":"`+inside+`"`) {
				t.Fatalf("subtask %v: %d %s", extra, st, body)
			}
		}
		if n := len(e.board.List("/api/companies/" + cid + "/issues?parentId=" + parent)); n != 2 {
			t.Fatalf("want the 2 allowed subtasks, got %d", n)
		}
		_ = os.WriteFile(filepath.Join(dir, "release"), nil, 0o600)
		e.waitRun(run, "succeeded", "failed", "cancelled")
	})
}

// TestLowTrustSandboxHoldsAfterSetup is the "sandbox requirement holds only
// at setup" regression through the API: after a low-trust agent's inbox is
// set up with its sandbox, a member PATCHes the agent's environmentId to a
// local environment, and later clears it; each time the next inbound mail
// still gets its task, but the run is refused with
// low_trust_requires_sandbox_environment and never executes.
func TestLowTrustSandboxHoldsAfterSetup(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		ctx := context.Background()
		cid := e.CompanyID
		e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{
			"enableChatConnectors": true, "enableIsolatedWorkspaces": true}}, 200)
		m := e.Board.JSON("POST", "/api/companies/"+cid+"/members", map[string]any{"email": "member@example.com", "role": "member"}, 201)
		mc := e.Board.As(e.Board.JSON("POST", "/api/companies/"+cid+"/board-keys", map[string]any{"userId": m["userId"]}, 201)["token"].(string), "")
		proj := testkit.ID(e.Board.JSON("POST", "/api/companies/"+cid+"/projects", map[string]any{"name": "Mail"}, 201))
		sb := testkit.ID(e.Board.JSON("POST", "/api/companies/"+cid+"/environments", map[string]any{"name": "Sandbox", "driver": "sandbox"}, 201))
		local := testkit.ID(mc.JSON("POST", "/api/companies/"+cid+"/environments", map[string]any{"name": "Here", "driver": "local"}, 201))
		marker := filepath.Join(t.TempDir(), "ran")
		e.AgentID = testkit.ID(e.Board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{
			"name": "Careful", "adapterType": "process", "environmentId": sb,
			"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", "touch " + marker}},
			"permissions": map[string]any{"trustPreset": "low_trust_review",
				"authorizationPolicy": map[string]any{"trustBoundary": map[string]any{"projectIds": []string{proj}}}}}, 201))
		sum := e.Setup("careful", nil)
		epID, address := sum["id"].(string), sum["address"].(string)
		testkit.Eventually(t, 30*time.Second, "a subscribed WebSocket", func() bool { return e.Inbound.SocketConnected(epID) })
		// "" clears the environment (the agent then runs locally).
		for i, envID := range []string{local, ""} {
			got := mc.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"environmentId": envID}, 200)
			if have, _ := got["environmentId"].(string); have != envID {
				t.Fatalf("environmentId after PATCH: %v", got["environmentId"])
			}
			subject := fmt.Sprintf("Mail %d", i)
			if _, err := e.Em.Deliver(address, emulator.DeliverRequest{From: "jane@example.com", Subject: subject, Text: "hello"}); err != nil {
				t.Fatal(err)
			}
			var run domain.Run
			testkit.Eventually(t, 30*time.Second, "the refused run of "+subject, func() bool {
				is, err := e.Store.ListIssues(ctx, e.Store.DB, cid, store.IssueFilter{OriginKind: "chat_channel"})
				if err != nil {
					t.Fatal(err)
				}
				for _, is := range is {
					if is.Title != subject {
						continue
					}
					rs, err := e.Store.ListRuns(ctx, e.Store.DB, cid, e.AgentID, is.ID, 10)
					if err != nil {
						t.Fatal(err)
					}
					if len(rs) == 1 && rs[0].Terminal() {
						run = rs[0]
						return true
					}
				}
				return false
			})
			if run.Status != domain.RunRefused || run.RefusalReason != "low_trust_requires_sandbox_environment" {
				t.Fatalf("environment %q: run %s %q %q", envID, run.Status, run.RefusalReason, run.Error)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("environment %q: the low-trust agent ran unsandboxed", envID)
			}
		}
	})
}

// TestCancelSandboxedRun: cancelling a running bubblewrap run kills the
// run token with the answer, stops the whole sandbox (the agent and a
// child it left in the background) and records the run cancelled.
func TestCancelSandboxedRun(t *testing.T) {
	testkit.RequireBwrap(t)
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Acme")
		mc := e.member(cid, "member@example.com", "member")
		sb := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/environments", map[string]any{"name": "sb", "driver": "sandbox"}, 201))
		// A unique sleep length marks the sandbox's processes in the host's
		// process table.
		mark := fmt.Sprintf("4%d.%06d", os.Getpid()%1000, time.Now().UnixNano()%1_000_000)
		script := `paperclipai api GET "/issues/$PAPERCLIP_TASK_ID" >/dev/null || exit 1
sleep ` + mark + ` &
printf %s "$PAPERCLIP_API_KEY" > token.tmp && mv token.tmp token
while :; do sleep ` + mark + `; done`
		aid := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Boxed", "adapterType": "process",
			"environmentId": sb, "adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}, "timeoutSec": 120}}, 201))
		task := e.task(cid, aid)
		run := testkit.ID(e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "go", "issueId": task}, 202))
		token := readWhenPresent(t, filepath.Join(heartbeat.TaskDirectory(e.inst.Config.WorkspacesDir(), cid, task, true), "token"))
		agent := e.board.As(token, run)
		agent.JSON("GET", "/api/issues/"+task, nil, 200)
		if n := markedProcesses(mark); n < 2 {
			t.Fatalf("want the agent's sleeps running in the sandbox, found %d", n)
		}
		mc.JSON("POST", "/api/heartbeat-runs/"+run+"/cancel", map[string]any{"reason": "stop the box"}, 202)
		if st, body := agent.Do("GET", "/api/issues/"+task, nil); st != 401 {
			t.Fatalf("the sandboxed run's token still works: %d %s", st, body)
		}
		got := e.waitRun(run, "cancelled", "succeeded", "failed")
		if got["status"] != "cancelled" || got["error"] != "run cancelled: stop the box" {
			t.Fatalf("cancelled sandboxed run: %v", got)
		}
		// The sandbox's PID namespace dies with bubblewrap: nothing of it
		// is left (polled: the kernel reaps the namespace after the run's
		// own process has been collected).
		testkit.Eventually(t, 30*time.Second, "the sandbox's processes to end", func() bool { return markedProcesses(mark) == 0 })
	})
}

// markedProcesses counts host processes whose command line holds mark.
func markedProcesses(mark string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, ent := range ents {
		if ent.Name()[0] < '0' || ent.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), mark) {
			n++
		}
	}
	return n
}
