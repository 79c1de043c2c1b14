package e2e_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// fakeRecord is what the fake CLI saw in one run (internal/agentcli/fakecli).
type fakeRecord struct {
	CLI         string            `json:"cli"`
	Args        []string          `json:"args"`
	Prompt      string            `json:"prompt"`
	Env         map[string]string `json:"env"`
	EnvNames    []string          `json:"envNames"`
	Resumed     string            `json:"resumed"`
	SessionID   string            `json:"sessionId"`
	Turn        int               `json:"turn"`
	MCPConfig   string            `json:"mcpConfig"`
	MCPMode     string            `json:"mcpMode"`
	MCPFileMode string            `json:"mcpFileMode"`
	Skill       *struct {
		Mode     string `json:"mode"`
		Writable bool   `json:"writable"`
	} `json:"skill"`
	Install *struct {
		Dir           string `json:"dir"`
		Writable      bool   `json:"writable"`
		ReadOnlyMount bool   `json:"readOnlyMount"`
	} `json:"install"`
	Tools    []string `json:"tools"`
	Replied  string   `json:"replied"`
	Failures []string `json:"failures"`
}

// fakeRecords returns the records the fake CLI wrote for a run (one per
// attempt), found in the task directories under the home.
func fakeRecords(t *testing.T, home, runID string) []fakeRecord {
	t.Helper()
	var out []fakeRecord
	_ = filepath.WalkDir(filepath.Join(home, "workspaces"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(p)) != ".fakecli" || !strings.HasPrefix(d.Name(), runID) {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var r fakeRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		return nil
	})
	return out
}

// cliEnv is an email env whose agent is a CLI agent run by the fake CLI;
// mutate adjusts the server's configuration. The fake's knobs
// (FAKECLI_NOISE_BYTES) reach it through passEnv when a test sets them.
func cliEnv(t *testing.T, url, adapter string, sandboxed bool, mutate ...func(*config.Config)) (*testkit.EmailEnv, map[string]any) {
	t.Helper()
	e := testkit.NewEmailEnv(t, url, mutate...)
	fake := testkit.FakeCLIs(t)
	command := map[string]string{"claude_local": "claude", "codex_local": "codex"}[adapter]
	t.Setenv("FAKECLI_CANARY", "canary-from-the-server-env")
	e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"agentCli": map[string]any{adapter: map[string]any{
		"command": filepath.Join(fake, command), "passEnv": []string{"FAKECLI_CANARY", "FAKECLI_NOISE_BYTES"}}}}, 200)
	cfg := map[string]any{"model": "fake-model", "timeoutSec": 90}
	if adapter == "claude_local" {
		cfg["maxTurns"] = 5
	} else {
		cfg["pricing"] = map[string]any{"inputPerMTok": 1.25, "cachedInputPerMTok": 0.125, "outputPerMTok": 10}
	}
	patch := map[string]any{"adapterType": adapter, "adapterConfig": cfg, "budgetMonthlyCents": 500}
	if sandboxed {
		patch["environmentId"] = testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/environments",
			map[string]any{"name": "Sandbox", "driver": "sandbox", "allowNetwork": true}, 201))
	}
	e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, patch, 200)
	return e, e.Setup("helpdesk", nil)
}

// emailTask waits for the env's one email task and returns its id.
func emailTask(t *testing.T, e *testkit.EmailEnv) string {
	t.Helper()
	var task string
	testkit.Eventually(t, 60*time.Second, "the email task", func() bool {
		if l := e.Board.List("/api/companies/" + e.CompanyID + "/issues?originKind=chat_channel"); len(l) > 0 {
			task = testkit.ID(l[0])
		}
		return task != ""
	})
	return task
}

func runsOf(e *testkit.EmailEnv, task string) []map[string]any {
	runs := e.Board.List("/api/companies/" + e.CompanyID + "/heartbeat-runs?issueId=" + task)
	// Oldest first.
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs
}

func waitCLIRuns(t *testing.T, e *testkit.EmailEnv, task string, n int) []map[string]any {
	t.Helper()
	var runs []map[string]any
	testkit.Eventually(t, 60*time.Second, "finished runs", func() bool {
		runs = runsOf(e, task)
		if len(runs) < n {
			return false
		}
		for _, r := range runs[:n] {
			if r["status"] == "queued" || r["status"] == "running" {
				return false
			}
		}
		return true
	})
	return runs
}

func runLogText(t *testing.T, e *testkit.EmailEnv, runID string) string {
	t.Helper()
	l := e.Board.JSON("GET", "/api/heartbeat-runs/"+runID+"/log", nil, 200)
	s, _ := l["content"].(string)
	return s
}

// Issue 15 end to end: an email arrives, the CLI agent (the fake Claude
// Code or Codex) answers through our MCP tools, the reply is delivered;
// the second email of the thread resumes the session; cost lands on each
// run and on the agent's budget. On the host the MCP server is reached
// over HTTP with the run's headers; in a sandbox through the bridge, with
// the skill bound read-only and the provider reachable only through the
// egress proxy.
func TestCLIAgentAnswersEmail(t *testing.T) {
	for _, tc := range []struct {
		adapter   string
		sandboxed bool
	}{{"claude_local", false}, {"codex_local", false}, {"claude_local", true}, {"codex_local", true}} {
		name := tc.adapter + map[bool]string{false: "/host", true: "/sandbox"}[tc.sandboxed]
		t.Run(name, func(t *testing.T) {
			if tc.sandboxed {
				testkit.RequireBwrap(t)
			}
			dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
				testCLIAgent(t, url, tc.adapter, tc.sandboxed)
			})
		})
	}
}

func testCLIAgent(t *testing.T, url, adapter string, sandboxed bool) {
	e, ep := cliEnv(t, url, adapter, sandboxed)
	label := map[string]string{"claude_local": "Fake Claude Code", "codex_local": "Fake Codex"}[adapter]
	first, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "Alice <alice@example.com>",
		Subject: "Order 42", Text: "Where is my order?"})
	if err != nil {
		t.Fatal(err)
	}
	out := waitOutbox(t, e, "alice@example.com", 1)
	if out[0].InReplyTo != first.MessageID || !strings.Contains(out[0].Text, label+" (session ") || !strings.Contains(out[0].Text, "turn 1)") {
		t.Fatalf("first reply: in-reply-to %q, text %q", out[0].InReplyTo, out[0].Text)
	}
	issues := e.Board.List("/api/companies/" + e.CompanyID + "/issues?originKind=chat_channel")
	if len(issues) != 1 {
		t.Fatalf("want one email task, got %d", len(issues))
	}
	task := testkit.ID(issues[0])
	runs := waitCLIRuns(t, e, task, 1)
	run1 := runs[0]
	sid, _ := run1["sessionId"].(string)
	if run1["status"] != "succeeded" || sid == "" {
		t.Fatalf("first run: %v\nlog: %s", run1, runLogText(t, e, testkit.ID(run1)))
	}
	recs := fakeRecords(t, e.Home, testkit.ID(run1))
	if len(recs) != 1 {
		t.Fatalf("records of run 1: %d", len(recs))
	}
	rec := recs[0]
	if len(rec.Failures) > 0 || rec.SessionID != sid || rec.Turn != 1 || rec.Resumed != "" {
		t.Fatalf("fake CLI in run 1: %+v", rec)
	}
	if strings.Contains(strings.Join(rec.Args, " "), "pcr_") || !strings.Contains(rec.Prompt, "Title: Order 42") ||
		!strings.Contains(rec.Prompt, "Email is external correspondence") || !strings.Contains(rec.Prompt, "a new email arrived") {
		t.Fatalf("arguments or prompt: %q\n%s", rec.Args, rec.Prompt)
	}
	if rec.Env["FAKECLI_CANARY"] != "canary-from-the-server-env" || rec.MCPFileMode != "0600" {
		t.Fatalf("passEnv or MCP config mode: %v %s", rec.Env, rec.MCPFileMode)
	}
	for _, n := range rec.EnvNames {
		if strings.HasPrefix(n, "PAPERCLIP_MASTER") || n == "PGPASSWORD" || n == "PAPERCLIP_TEST_DATABASE_URL" {
			t.Fatalf("the server's environment leaked into the CLI's: %s", n)
		}
		// The token reaches the CLI only in its MCP configuration.
		if n == "PAPERCLIP_API_KEY" {
			t.Fatalf("the run token variable is in the CLI's environment")
		}
	}
	// In a sandbox the CLI cannot change its own install directory (the
	// fake tried to write there).
	if rec.Install == nil || (sandboxed && (rec.Install.Writable || !rec.Install.ReadOnlyMount)) {
		t.Fatalf("install directory: %+v", rec.Install)
	}
	wantMode := map[bool]string{false: "http", true: "stdio"}[sandboxed]
	if rec.MCPMode != wantMode {
		t.Fatalf("MCP mode %q, want %q", rec.MCPMode, wantMode)
	}
	if adapter == "claude_local" {
		if rec.Skill == nil || rec.Skill.Mode != "0444" || (sandboxed && rec.Skill.Writable) {
			t.Fatalf("skill: %+v", rec.Skill)
		}
	} else if !strings.Contains(rec.Prompt, "# Email through your assigned inbox") || !strings.Contains(rec.Prompt, ep["id"].(string)) {
		t.Fatalf("codex prompt lacks the skill text:\n%s", rec.Prompt)
	}
	if sandboxed {
		if rec.Env["PAPERCLIP_API_URL"] != "unix:/run/paperclip/api.sock" || !strings.HasPrefix(rec.Env["HTTPS_PROXY"], "http://127.0.0.1:") {
			t.Fatalf("sandbox environment: %v", rec.Env)
		}
	}
	log1 := runLogText(t, e, testkit.ID(run1))
	if strings.Contains(log1, "pcr_") || !strings.Contains(log1, `"session_id":"`+sid+`"`) && !strings.Contains(log1, `"thread_id":"`+sid+`"`) {
		t.Fatalf("run log must hold the events and no token:\n%s", log1)
	}
	// The second email of the thread continues the conversation.
	if _, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "Alice <alice@example.com>",
		Subject: "Re: Order 42", Text: "And the invoice?", InReplyTo: out[0].MessageID, References: []string{first.MessageID, out[0].MessageID}}); err != nil {
		t.Fatal(err)
	}
	out = waitOutbox(t, e, "alice@example.com", 2)
	if !strings.Contains(out[1].Text, "session "+sid+", turn 2)") || !strings.Contains(out[1].Text, "And the invoice?") {
		t.Fatalf("second reply did not resume session %s: %q", sid, out[1].Text)
	}
	runs = waitCLIRuns(t, e, task, 2)
	run2 := runs[1]
	if run2["status"] != "succeeded" || run2["sessionId"] != sid {
		t.Fatalf("second run: %v", run2)
	}
	rec = fakeRecords(t, e.Home, testkit.ID(run2))[0]
	if rec.Resumed != sid || rec.Turn != 2 {
		t.Fatalf("second run did not resume: %+v", rec)
	}
	// Cost on each run and on the agent's budget.
	wantMicros := map[string]float64{"claude_local": 12300, "codex_local": 13000}[adapter]
	for _, r := range []map[string]any{run1, run2} {
		u, _ := e.Board.JSON("GET", "/api/heartbeat-runs/"+testkit.ID(r), nil, 200)["usage"].(map[string]any)
		if u == nil || u["costMicros"] != wantMicros || u["inputTokens"] == float64(0) {
			t.Fatalf("run usage: %v", u)
		}
	}
	agent := e.Board.JSON("GET", "/api/agents/"+e.AgentID, nil, 200)
	if want := float64(int64(2*wantMicros) / 10000); agent["spentMonthlyCents"] != want {
		t.Fatalf("agent spend %v cents, want %v", agent["spentMonthlyCents"], want)
	}
	var d map[string]any
	testkit.Eventually(t, 30*time.Second, "delivery receipt", func() bool {
		d = e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/deliveries/"+out[1].IdempotencyKey, nil, 200)
		return d["outcome"] == "delivered"
	})
}
