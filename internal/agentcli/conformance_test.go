package agentcli_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// realCLIs installs the real CLIs from npm (testkit.RealCLIs).
func realCLIs(t *testing.T) string { return testkit.RealCLIs(t) }

func envList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// noParseError fails when a CLI's parser or configuration loader rejected
// something we generated.
func noParseError(t *testing.T, what string, run cliRun) {
	t.Helper()
	for _, bad := range []string{"unknown option", "unexpected argument", "error: option", "Error loading config",
		"unknown configuration field", "invalid transport", "requires --verbose"} {
		if strings.Contains(run.Stderr, bad) || strings.Contains(run.Stdout, bad) {
			t.Fatalf("%s: the real CLI refused our arguments or configuration (%q):\nstdout: %s\nstderr: %s", what, bad, run.Stdout, run.Stderr)
		}
	}
}

// The real Claude Code accepts our arguments, reads our per-run MCP
// configuration (and connects to the server with the run's headers), sees
// the staged agentmail skill, and fails only for lack of credentials; a
// resume continues the session, and an unknown session is reported the
// way our fallback expects.
func TestRealClaudeCodeAcceptsOurInvocation(t *testing.T) {
	bin := filepath.Join(realCLIs(t), "claude")
	stub := newStubMCP(t)
	e := newRunEnv(t)
	e.stageSkill(t)
	inv := agentcli.Invocation{Config: agentcli.Config{Model: "sonnet", AllowedTools: []string{"Read", "Bash(git diff *)"}, MaxTurns: 3},
		MCPConfigPath: e.writeClaudeConfig(t, e.httpServer(stub.URL))}
	env := envList(agentcli.Env(agentcli.Claude))
	run := runCLI(t, agentcli.Claude, bin, e, agentcli.ClaudeArgs(inv), env, fakePrompt(), nil)
	noParseError(t, "fresh", run)
	o := run.Outcome
	if !o.Finished || o.SessionID == "" || o.MCPStatus != "connected" || !o.IsError {
		t.Fatalf("want a finished, credential-less run with our MCP server connected: %+v\nstdout: %s\nstderr: %s", o, run.Stdout, run.Stderr)
	}
	// (Newer CLIs open with server/discover instead of initialize.)
	if methods, refused := stub.seen(); !stub.saw("tools/list") || refused != 0 {
		t.Fatalf("the MCP server saw %v (%d refused): our headers did not reach it", methods, refused)
	}
	var skills []string
	for _, line := range strings.Split(run.Stdout, "\n") {
		var ev struct {
			Type, Subtype string
			Skills        []string `json:"skills"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "system" && ev.Subtype == "init" {
			skills = ev.Skills
		}
	}
	if !slices.Contains(skills, "agentmail") {
		t.Fatalf("the staged .claude/skills/agentmail was not loaded; skills: %v", skills)
	}
	inv.Resume = o.SessionID
	run = runCLI(t, agentcli.Claude, bin, e, agentcli.ClaudeArgs(inv), env, fakePrompt(), nil)
	noParseError(t, "resume", run)
	if run.Outcome.SessionID != o.SessionID || !run.Outcome.Started {
		t.Fatalf("resume did not continue session %s: %+v\n%s", o.SessionID, run.Outcome, run.Stderr)
	}
	inv.Resume = "00000000-0000-4000-8000-000000000000"
	run = runCLI(t, agentcli.Claude, bin, e, agentcli.ClaudeArgs(inv), env, fakePrompt(), nil)
	noParseError(t, "unknown session", run)
	if run.Outcome.Started || !run.Outcome.IsError {
		t.Fatalf("an unknown session must fail before starting (our fresh-session fallback depends on it): %+v", run.Outcome)
	}
}

// The real Codex accepts our arguments and our per-run CODEX_HOME
// (--strict-config refuses any key it does not know), connects to our MCP
// server with the run's headers, and resumes a thread whose rollout lives
// in the task directory through the symlinked sessions directory of a new
// run's CODEX_HOME. Without credentials it never gets an answer, so each
// run is stopped once it has started.
func TestRealCodexAcceptsOurInvocation(t *testing.T) {
	bin := filepath.Join(realCLIs(t), "codex")
	stub := newStubMCP(t)
	e := newRunEnv(t)
	inv := agentcli.Invocation{Config: agentcli.Config{Model: "gpt-5-codex"}}
	// Why the rollout check: Codex creates the thread's rollout file at once
	// but writes its first record a moment later; a run killed in between
	// leaves an empty rollout that no resume can read (production falls
	// back to a fresh session then, heartbeat/cli.go). The test stops the
	// run only once the rollout holds a record, so the resume below tests
	// the resume and not the kill's timing.
	started := func(o agentcli.Outcome) bool {
		return o.Started && stub.saw("tools/list") && rolloutWritten(e.Workdir, o.SessionID)
	}
	home := e.writeCodexHome(t, e.httpServer(stub.URL))
	run := runCLI(t, agentcli.Codex, bin, e, agentcli.CodexArgs(inv), []string{"CODEX_HOME=" + home}, fakePrompt(), started)
	noParseError(t, "fresh", run)
	o := run.Outcome
	if methods, refused := stub.seen(); !o.Started || o.SessionID == "" || refused != 0 {
		t.Fatalf("want a started thread and an authenticated MCP connection: %+v, server saw %v (%d refused)\nstdout: %s\nstderr: %s",
			o, methods, refused, run.Stdout, run.Stderr)
	}
	if err := os.RemoveAll(e.RunDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	home = e.writeCodexHome(t, e.httpServer(stub.URL))
	inv.Resume = o.SessionID
	run = runCLI(t, agentcli.Codex, bin, e, agentcli.CodexArgs(inv), []string{"CODEX_HOME=" + home}, fakePrompt(),
		func(o agentcli.Outcome) bool { return o.Started })
	noParseError(t, "resume", run)
	if run.Outcome.SessionID != o.SessionID {
		t.Fatalf("resume did not continue thread %s: %+v\nstderr: %s", o.SessionID, run.Outcome, run.Stderr)
	}
	inv.Resume = "00000000-0000-4000-8000-000000000000"
	run = runCLI(t, agentcli.Codex, bin, e, agentcli.CodexArgs(inv), []string{"CODEX_HOME=" + home}, fakePrompt(), nil)
	noParseError(t, "unknown session", run)
	if run.Code == 0 || run.Outcome.Started {
		t.Fatalf("an unknown thread must fail before starting (our fresh-session fallback depends on it): %d %+v", run.Code, run.Outcome)
	}
}

// rolloutWritten reports whether the Codex rollout of thread id, kept in
// the task directory's codex-sessions, holds at least one complete record.
func rolloutWritten(workdir, id string) bool {
	if id == "" {
		return false
	}
	found := false
	_ = filepath.WalkDir(filepath.Join(workdir, ".paperclip", "codex-sessions"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(d.Name(), id) {
			return nil
		}
		if raw, err := os.ReadFile(path); err == nil && strings.Contains(string(raw), "\n") {
			found = true
		}
		return nil
	})
	return found
}

// egressRecorder is the sandbox's egress proxy with a dialer that records
// each admitted destination and connects nowhere: nothing leaves the
// machine, so no model can be reached even with the fake credential.
type egressRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *egressRecorder) saw(dest string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.seen, dest)
}

func startEgress(t *testing.T, typ string) (*egressRecorder, string) {
	t.Helper()
	rec := &egressRecorder{}
	e, err := sandbox.StartEgress(sandbox.EgressOptions{Dir: filepath.Join(t.TempDir(), "egress"), Allow: agentcli.DefaultEgress(typ),
		Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
			rec.mu.Lock()
			rec.seen = append(rec.seen, addr)
			rec.mu.Unlock()
			return nil, errors.New("conformance test: no network")
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	addr, err := sandbox.ForwardEgress(t.Context(), e.Socket())
	if err != nil {
		t.Fatal(err)
	}
	return rec, "http://" + addr
}

func proxyEnv(proxy string) []string {
	return []string{"HTTPS_PROXY=" + proxy, "https_proxy=" + proxy, "HTTP_PROXY=" + proxy, "http_proxy=" + proxy}
}

// In a sandbox the CLIs reach their provider only through HTTPS_PROXY
// (`paperclipai egress-exec`): the real CLIs honour it, and their first
// destination is among the default egress hosts.
func TestRealCLIsUseTheEgressProxy(t *testing.T) {
	bin := realCLIs(t)
	stub := newStubMCP(t)
	t.Run("claude", func(t *testing.T) {
		rec, proxy := startEgress(t, agentcli.Claude)
		e := newRunEnv(t)
		inv := agentcli.Invocation{MCPConfigPath: e.writeClaudeConfig(t, e.httpServer(stub.URL))}
		env := append(envList(agentcli.Env(agentcli.Claude)), "ANTHROPIC_API_KEY=sk-ant-conformance-not-a-key",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		run := runCLI(t, agentcli.Claude, filepath.Join(bin, "claude"), e, agentcli.ClaudeArgs(inv), append(env, proxyEnv(proxy)...),
			fakePrompt(), func(agentcli.Outcome) bool { return rec.saw("api.anthropic.com:443") })
		if !rec.saw("api.anthropic.com:443") {
			t.Fatalf("Claude Code did not use the proxy for its API (saw %v)\nstdout: %s\nstderr: %s", rec.seen, run.Stdout, run.Stderr)
		}
	})
	t.Run("codex", func(t *testing.T) {
		rec, proxy := startEgress(t, agentcli.Codex)
		e := newRunEnv(t)
		home := e.writeCodexHome(t, e.httpServer(stub.URL))
		env := append([]string{"CODEX_HOME=" + home, "CODEX_API_KEY=sk-conformance-not-a-key"}, proxyEnv(proxy)...)
		api := func() bool { return rec.saw("api.openai.com:443") || rec.saw("chatgpt.com:443") }
		run := runCLI(t, agentcli.Codex, filepath.Join(bin, "codex"), e, agentcli.CodexArgs(agentcli.Invocation{}), env, fakePrompt(),
			func(agentcli.Outcome) bool { return api() })
		if !api() {
			t.Fatalf("Codex did not use the proxy for its API (saw %v)\nstdout: %s\nstderr: %s", rec.seen, run.Stdout, run.Stderr)
		}
	})
}
