package e2e_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// A resume the CLI no longer knows (here: the task directory lost the
// CLI's sessions, Claude Code's projects or Codex's rollouts) falls back
// to a fresh session in the same run, and the new session is kept for
// the next email.
func TestCLIAgentFreshSessionWhenResumeFails(t *testing.T) {
	for _, tc := range []struct{ adapter, sessions, refusal string }{
		{"claude_local", ".claude/projects", "No conversation found"},
		{"codex_local", ".codex/sessions", "no rollout found for thread id"},
	} {
		t.Run(tc.adapter, func(t *testing.T) {
			dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
				testFreshSession(t, url, tc.adapter, tc.sessions, tc.refusal)
			})
		})
	}
}

func testFreshSession(t *testing.T, url, adapter, sessions, refusal string) {
	e, _ := cliEnv(t, url, adapter, false)
	first, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "alice@example.com", Subject: "Hi", Text: "One"})
	if err != nil {
		t.Fatal(err)
	}
	out := waitOutbox(t, e, "alice@example.com", 1)
	task := emailTask(t, e)
	run1 := waitCLIRuns(t, e, task, 1)[0]
	old := run1["sessionId"].(string)
	dir := filepath.Join(heartbeat.TaskDirectory(e.Config.WorkspacesDir(), e.CompanyID, task, false), sessions)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the first run kept no session in %s: %v", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "alice@example.com", Subject: "Re: Hi", Text: "Two",
		InReplyTo: out[0].MessageID, References: []string{first.MessageID, out[0].MessageID}}); err != nil {
		t.Fatal(err)
	}
	out = waitOutbox(t, e, "alice@example.com", 2)
	run2 := waitCLIRuns(t, e, task, 2)[1]
	fresh, _ := run2["sessionId"].(string)
	if run2["status"] != "succeeded" || fresh == "" || fresh == old || !strings.Contains(out[1].Text, "session "+fresh+", turn 1)") {
		t.Fatalf("fallback run: %v\nreply: %s", run2, out[1].Text)
	}
	if log := runLogText(t, e, testkit.ID(run2)); !strings.Contains(log, "resuming session "+old+" failed") || !strings.Contains(log, refusal) {
		t.Fatalf("the log must tell the fallback:\n%s", log)
	}
	recs := fakeRecords(t, e.Home, testkit.ID(run2))
	if len(recs) != 2 || recs[0].Resumed+recs[1].Resumed != old {
		t.Fatalf("want a resumed attempt and a fresh one: %+v", recs)
	}
	var n int
	if err := e.DB.QueryRow(`SELECT COUNT(*) FROM agent_task_sessions WHERE agent_id = $1 AND issue_id = $2 AND session_id = $3`,
		e.AgentID, task, fresh).Scan(&n); err != nil || n != 1 {
		t.Fatalf("stored session: %d %v", n, err)
	}
}

// A CLI run's streamed events are its log, capped at the server's run log
// limit like every run log: the stored log stops at the cap and says how
// much there was, while the run still reads the whole stream (the result
// event past the cap gives its session and usage).
func TestCLIAgentRunLogIsBounded(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		const logMax, noise = 8 << 10, 64 << 10
		t.Setenv("FAKECLI_NOISE_BYTES", strconv.Itoa(noise))
		e, _ := cliEnv(t, url, "claude_local", false, func(c *config.Config) { c.RunLogMaxBytes = logMax })
		if _, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "alice@example.com", Subject: "Chatty", Text: "Say a lot"}); err != nil {
			t.Fatal(err)
		}
		waitOutbox(t, e, "alice@example.com", 1)
		run := waitCLIRuns(t, e, emailTask(t, e), 1)[0]
		id := testkit.ID(run)
		u, _ := e.Board.JSON("GET", "/api/heartbeat-runs/"+id, nil, 200)["usage"].(map[string]any)
		if run["status"] != "succeeded" || run["sessionId"] == nil || u == nil || u["costMicros"] != float64(12300) {
			t.Fatalf("run past the log cap: %v usage %v", run, u)
		}
		l := e.Board.JSON("GET", "/api/heartbeat-runs/"+id+"/log", nil, 200)
		content, _ := l["content"].(string)
		size, _ := l["sizeBytes"].(float64)
		if len(content) > logMax || len(content) < logMax/2 || l["truncated"] != true || size < noise {
			t.Fatalf("log: %d bytes stored, truncated %v, size %v", len(content), l["truncated"], l["sizeBytes"])
		}
		if !strings.HasPrefix(content, "paperclip: Claude Code -p") {
			t.Fatalf("the log must keep its head:\n%.200s", content)
		}
	})
}

// A sandbox environment without network refuses a CLI agent's run with a
// message saying what to change; only an instance administrator may turn
// the network on.
func TestCLIAgentSandboxWithoutNetwork(t *testing.T) {
	testkit.RequireBwrap(t)
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e, _ := cliEnv(t, url, "claude_local", true)
		env := e.Board.JSON("GET", "/api/agents/"+e.AgentID, nil, 200)["environmentId"].(string)
		off := e.Board.JSON("PATCH", "/api/environments/"+env, map[string]any{"allowNetwork": false}, 200)
		if off["allowNetwork"] != false {
			t.Fatalf("environment: %v", off)
		}
		if _, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "alice@example.com", Subject: "Hi", Text: "One"}); err != nil {
			t.Fatal(err)
		}
		task := emailTask(t, e)
		run := waitCLIRuns(t, e, task, 1)[0]
		if msg, _ := run["error"].(string); run["status"] != "failed" || !strings.Contains(msg, "allows no network") || !strings.Contains(msg, `"allowNetwork": true`) {
			t.Fatalf("run: %v", run)
		}
		if st, _ := e.Board.Do("PATCH", "/api/environments/"+env, map[string]any{"allowNetwork": "yes"}); st != 400 {
			t.Fatalf("a malformed switch: %d", st)
		}
		local := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/environments", map[string]any{"name": "Local", "driver": "local"}, 201))
		if st, body := e.Board.Do("PATCH", "/api/environments/"+local, map[string]any{"allowNetwork": true}); st != 400 {
			t.Fatalf("network on a local environment: %d %s", st, body)
		}
	})
}

// Through a sandbox bridge, /mcp's call_api is held to the bridge's own
// allowlist (the run's task only), while the same token over the
// ordinary endpoint keeps the agent's normal authority.
func TestMCPThroughTheBridgeIsRestricted(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e, token, runID, task, release := blockingAgentEnv(t, url)
		defer release()
		other := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Other", "assigneeAgentId": e.AgentID}, 201))
		bridge := httptest.NewServer(sandbox.Handler(e.Mux, sandbox.Grant{Token: token, RunID: runID, CompanyID: e.CompanyID, TaskID: task}, nil))
		defer bridge.Close()
		boxed := mcpSession(t, bridge.URL, "not-the-token")
		get := func(id string) map[string]any {
			return map[string]any{"operationId": "issues.get", "pathParams": map[string]string{"issueId": id}}
		}
		if out, isErr := callTool(t, boxed, "call_api", get(task)); isErr || !strings.Contains(out, `"status":200`) {
			t.Fatalf("own task through the bridge: %s", out)
		}
		if out, isErr := callTool(t, boxed, "call_api", get(other)); !isErr || !strings.Contains(out, "not available inside the sandbox") {
			t.Fatalf("another task through the bridge: %s", out)
		}
		if out, isErr := callTool(t, boxed, "agentmail_delivery", map[string]any{"publicationId": testkit.NewUUID()}); !isErr {
			t.Fatalf("a delivery read without the publication lookup must fail closed: %s", out)
		}
		direct := mcpSession(t, e.URL(), token)
		if out, isErr := callTool(t, direct, "call_api", get(other)); isErr || !strings.Contains(out, `"status":200`) {
			t.Fatalf("another task over the ordinary endpoint: %s", out)
		}
	})
}

// A sandboxed run's bridge takes its own task's short identifier (any
// case) as well as its UUID, directly and through /mcp's call_api, and
// forwards the UUID; another task's identifier stays refused, on both
// databases.
func TestSandboxBridgeTakesTheTaskIdentifier(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e, token, runID, task, release := blockingAgentEnv(t, url)
		defer release()
		ident, _ := e.Board.JSON("GET", "/api/issues/"+task, nil, 200)["identifier"].(string)
		other := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Other", "assigneeAgentId": e.AgentID}, 201)
		otherIdent, _ := other["identifier"].(string)
		if ident == "" || otherIdent == "" {
			t.Fatalf("identifiers %q %q", ident, otherIdent)
		}
		bridge := httptest.NewServer(sandbox.Handler(e.Mux, sandbox.Grant{Token: token, RunID: runID, CompanyID: e.CompanyID, TaskID: task,
			TaskIdentifier: ident}, nil))
		defer bridge.Close()
		get := func(path string) (int, map[string]any) {
			resp, err := http.Get(bridge.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&out)
			return resp.StatusCode, out
		}
		for _, ref := range []string{ident, strings.ToLower(ident), task} {
			if st, got := get("/api/issues/" + ref); st != 200 || got["id"] != task {
				t.Fatalf("GET /api/issues/%s through the bridge: %d %v", ref, st, got)
			}
		}
		if st, _ := get("/api/companies/" + e.CompanyID + "/email/tasks/" + ident); st != 200 {
			t.Fatalf("the task's thread by identifier through the bridge: %d", st)
		}
		if st, _ := get("/api/issues/" + otherIdent); st != 403 {
			t.Fatalf("another task's identifier through the bridge: %d, want 403", st)
		}
		boxed := mcpSession(t, bridge.URL, "not-the-token")
		op := func(id string) map[string]any {
			return map[string]any{"operationId": "issues.get", "pathParams": map[string]string{"issueId": id}}
		}
		if out, isErr := callTool(t, boxed, "call_api", op(ident)); isErr || !strings.Contains(out, `"status":200`) || !strings.Contains(out, task) {
			t.Fatalf("own task by identifier through the bridge's /mcp: %s", out)
		}
		if out, isErr := callTool(t, boxed, "call_api", op(otherIdent)); !isErr || !strings.Contains(out, "not available inside the sandbox") {
			t.Fatalf("another task's identifier through the bridge's /mcp: %s", out)
		}
	})
}

// The real CLIs (installed from npm, without credentials: no model can be
// called) run as agents on the host and in the sandbox: they accept the
// arguments, MCP configuration and files we give them and connect to
// our MCP endpoint (Claude Code reports it "connected" and loads the
// staged skill); Claude Code then fails only for lack of credentials and
// Codex only waits for a provider it cannot reach.
func TestRealCLIsRunAsAgents(t *testing.T) {
	bin := testkit.RealCLIs(t)
	for _, tc := range []struct {
		adapter   string
		sandboxed bool
	}{{"claude_local", false}, {"claude_local", true}, {"codex_local", false}, {"codex_local", true}} {
		t.Run(tc.adapter+map[bool]string{false: "/host", true: "/sandbox"}[tc.sandboxed], func(t *testing.T) {
			if tc.sandboxed {
				testkit.RequireBwrap(t)
			}
			e, _ := cliEnv(t, "", tc.adapter, tc.sandboxed)
			cmd := map[string]string{"claude_local": "claude", "codex_local": "codex"}[tc.adapter]
			// Why two limits: Claude Code ends on its own (no credentials), so
			// its limit only bounds a hang and must not race a slow start on
			// a loaded machine; Codex waits for a provider it cannot reach, so
			// its run is meant to time out, after its thread has started.
			cfg := map[string]any{"timeoutSec": map[string]int{"claude_local": 90, "codex_local": 12}[tc.adapter]}
			e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"agentCli": map[string]any{tc.adapter: map[string]any{
				"command": filepath.Join(bin, cmd)}}}, 200)
			e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"adapterConfig": cfg}, 200)
			if _, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "alice@example.com", Subject: "Hi", Text: "One"}); err != nil {
				t.Fatal(err)
			}
			task := emailTask(t, e)
			run := waitCLIRuns(t, e, task, 1)[0]
			log := runLogText(t, e, testkit.ID(run))
			for _, bad := range []string{"unknown option", "unexpected argument", "Error loading config", "unknown configuration field", "sandbox:"} {
				if strings.Contains(log, bad) {
					t.Fatalf("the real CLI refused what we gave it (%q): %v\n%s", bad, run, log)
				}
			}
			if tc.adapter == "claude_local" {
				if run["status"] != "failed" || !strings.Contains(log, `{"name":"paperclip","status":"connected"`) ||
					!strings.Contains(log, `"agentmail"`) || !strings.Contains(log, "Not logged in") {
					t.Fatalf("Claude Code run: %v\n%s", run, log)
				}
				return
			}
			if run["status"] != "timed_out" || !strings.Contains(log, `"type":"thread.started"`) {
				t.Fatalf("Codex run: %v\n%s", run, log)
			}
		})
	}
}

// envWithout returns the test's environment without the named variables.
func envWithout(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

// `run --demo --agent claude_local` (or codex_local) makes Claude Code
// (or Codex) the demo agent when the CLI is on PATH and its credentials
// are in the environment (here the fake CLI, which calls no model), and
// says what is missing otherwise.
func TestDemoWithACLIAgent(t *testing.T) {
	for _, tc := range []struct{ adapter, credential, missing, label string }{
		{"claude_local", "ANTHROPIC_API_KEY", "set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN", "Fake Claude Code (session "},
		{"codex_local", "CODEX_API_KEY", "set CODEX_API_KEY", "Fake Codex (session "},
	} {
		t.Run(tc.adapter, func(t *testing.T) {
			dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
				fake := testkit.FakeCLIs(t)
				base := envWithout("PATH", "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_API_KEY")
				pathEnv := "PATH=" + fake + ":" + os.Getenv("PATH")
				cmd := exec.Command(testkit.Binary(t), "run", "--demo", "--agent", tc.adapter, "--home", t.TempDir(), "--listen", "127.0.0.1:0")
				cmd.Env = append(base, pathEnv, "PAPERCLIP_DATABASE_URL="+url)
				if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), tc.missing) {
					t.Fatalf("without credentials: %v\n%s", err, out)
				}
				p := startDemoWith(t, t.TempDir(), url, []string{"--agent", tc.adapter},
					append(base, pathEnv, tc.credential+"=demo-not-a-key"))
				raw := "From: Alice <alice@example.com>\r\nTo: assistant@agentmail.to\r\nSubject: Order 42\r\nMessage-ID: <cli-demo@example.com>\r\n" +
					"Date: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n\r\nWhere is it?\r\n"
				if err := smtp.SendMail(p.smtp, nil, "alice@example.com", []string{"assistant@agentmail.to"}, []byte(raw)); err != nil {
					t.Fatalf("smtp: %v\n%s", err, p.report())
				}
				var replies []map[string]any
				p.eventually(t, 90*time.Second, "the CLI agent's reply", func() bool {
					replies = p.outbox(t, "alice@example.com")
					return len(replies) == 1
				})
				if text, _ := replies[0]["text"].(string); !strings.Contains(text, tc.label) {
					t.Fatalf("reply: %v\n%s", replies[0], p.report())
				}
			})
		})
	}
}
