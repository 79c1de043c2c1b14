package agentcli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

var fakeEnv = []string{"PAPERCLIP_RUN_ID=" + testRunID, "PAPERCLIP_TASK_ID=task-1"}

func fakePrompt() string {
	return agentcli.Prompt(agentcli.PromptInput{Adapter: agentcli.Claude, TaskID: "task-1", TaskTitle: "Hello"})
}

type fakeRecord struct {
	Args        []string `json:"args"`
	SessionID   string   `json:"sessionId"`
	Turn        int      `json:"turn"`
	MCPMode     string   `json:"mcpMode"`
	MCPFileMode string   `json:"mcpFileMode"`
	Tools       []string `json:"tools"`
	Failures    []string `json:"failures"`
}

func readRecord(t *testing.T, e runEnv) fakeRecord {
	t.Helper()
	var r fakeRecord
	raw, err := os.ReadFile(filepath.Join(e.Workdir, ".fakecli", testRunID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(filepath.Join(e.Workdir, ".fakecli"))
	return r
}

// The fake CLIs accept exactly the arguments we generate, speak the real
// event shapes our parser reads, and keep resumable sessions.
func TestFakeCLIs(t *testing.T) {
	dir := testkit.FakeCLIs(t)
	stub := newStubMCP(t)
	t.Run("claude", func(t *testing.T) {
		e := newRunEnv(t)
		cfg := agentcli.Config{Model: "sonnet", AllowedTools: []string{"Read"}, MaxTurns: 3}
		inv := agentcli.Invocation{Config: cfg, MCPConfigPath: e.writeClaudeConfig(t, e.httpServer(stub.URL))}
		run := runCLI(t, agentcli.Claude, filepath.Join(dir, "claude"), e, agentcli.ClaudeArgs(inv), fakeEnv, fakePrompt(), nil)
		o := run.Outcome
		if run.Code != 0 || o.IsError || !o.Started || !o.Finished || o.SessionID == "" || o.MCPStatus != "connected" || o.Usage.CostMicros != 12300 {
			t.Fatalf("fresh run: code %d %+v\n%s", run.Code, o, run.Stderr)
		}
		rec := readRecord(t, e)
		if rec.MCPMode != "http" || rec.MCPFileMode != "0600" || len(rec.Failures) != 0 || !strings.Contains(strings.Join(rec.Tools, ","), "search_api") {
			t.Fatalf("record: %+v", rec)
		}
		inv.Resume = o.SessionID
		run = runCLI(t, agentcli.Claude, filepath.Join(dir, "claude"), e, agentcli.ClaudeArgs(inv), fakeEnv, fakePrompt(), nil)
		if run.Code != 0 || run.Outcome.SessionID != o.SessionID {
			t.Fatalf("resume: %+v %s", run.Outcome, run.Stderr)
		}
		if rec := readRecord(t, e); rec.Turn != 2 {
			t.Fatalf("resumed turn %d", rec.Turn)
		}
		inv.Resume = "00000000-0000-4000-8000-000000000000"
		run = runCLI(t, agentcli.Claude, filepath.Join(dir, "claude"), e, agentcli.ClaudeArgs(inv), fakeEnv, fakePrompt(), nil)
		if run.Code != 1 || run.Outcome.Started || !strings.Contains(strings.Join(run.Outcome.Errors, ""), "No conversation found") {
			t.Fatalf("unknown session: %+v", run.Outcome)
		}
		run = runCLI(t, agentcli.Claude, filepath.Join(dir, "claude"), e, append(agentcli.ClaudeArgs(inv), "--bogus"), fakeEnv, "", nil)
		if run.Code != 1 || !strings.Contains(run.Stderr, "unknown option '--bogus'") {
			t.Fatalf("unknown option: %d %s", run.Code, run.Stderr)
		}
	})
	t.Run("codex", func(t *testing.T) {
		e := newRunEnv(t)
		home := e.writeCodexHome(t, e.httpServer(stub.URL))
		env := append([]string{"CODEX_HOME=" + home}, fakeEnv...)
		inv := agentcli.Invocation{Config: agentcli.Config{Model: "gpt-5-codex"}}
		run := runCLI(t, agentcli.Codex, filepath.Join(dir, "codex"), e, agentcli.CodexArgs(inv), env, fakePrompt(), nil)
		o := run.Outcome
		if run.Code != 0 || o.IsError || !o.Started || !o.Finished || o.SessionID == "" || o.Usage.InputTokens != 10000 {
			t.Fatalf("fresh run: code %d %+v\n%s", run.Code, o, run.Stderr)
		}
		if rec := readRecord(t, e); rec.MCPMode != "http" || len(rec.Failures) != 0 {
			t.Fatalf("record: %+v", rec)
		}
		// A new run has a new CODEX_HOME; the session lives on in the task directory.
		if err := os.RemoveAll(e.RunDir); err != nil {
			t.Fatal(err)
		}
		_ = os.Mkdir(e.RunDir, 0o700)
		home = e.writeCodexHome(t, e.httpServer(stub.URL))
		inv.Resume = o.SessionID
		run = runCLI(t, agentcli.Codex, filepath.Join(dir, "codex"), e, agentcli.CodexArgs(inv), env, fakePrompt(), nil)
		if run.Code != 0 || run.Outcome.SessionID != o.SessionID {
			t.Fatalf("resume: %+v %s", run.Outcome, run.Stderr)
		}
		inv.Resume = "00000000-0000-4000-8000-000000000000"
		run = runCLI(t, agentcli.Codex, filepath.Join(dir, "codex"), e, agentcli.CodexArgs(inv), env, fakePrompt(), nil)
		if run.Code != 1 || run.Outcome.Started || !strings.Contains(run.Stderr, "no rollout found") {
			t.Fatalf("unknown session: %d %+v %s", run.Code, run.Outcome, run.Stderr)
		}
	})
}
