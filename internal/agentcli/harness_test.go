package agentcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paperclipai/paperclipai/internal/agentcli"
)

const (
	testToken = "pcr_conformance_token"
	testRunID = "11111111-2222-4333-8444-555555555555"
)

// stubMCP is an MCP endpoint that records who called it: it answers only
// requests carrying the test run's headers, as /mcp would.
type stubMCP struct {
	URL     string
	mu      sync.Mutex
	methods []string
	refused int
}

func (s *stubMCP) saw(method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.methods {
		if m == method {
			return true
		}
	}
	return false
}

// seen returns the methods called and the number of refused requests.
func (s *stubMCP) seen() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.methods...), s.refused
}

func newStubMCP(t *testing.T) *stubMCP {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "paperclip", Version: "test"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "search_api", Description: "Search the agent-callable Paperclip API catalog."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[]"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	s := &stubMCP{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken || r.Header.Get("X-Paperclip-Run-Id") != testRunID {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			http.Error(w, `{"error":"unauthenticated"}`, http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(r.Body)
			r.Body.Close()
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(buf.Bytes(), &m)
			s.mu.Lock()
			s.methods = append(s.methods, m.Method)
			s.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s.URL = ts.URL + "/mcp"
	return s
}

// runEnv is a run's files as the adapters lay them out: a task directory
// (cwd and HOME) and a private per-run directory beside it.
type runEnv struct {
	Workdir, RunDir string
}

func newRunEnv(t *testing.T) runEnv {
	t.Helper()
	root := t.TempDir()
	e := runEnv{Workdir: filepath.Join(root, "task"), RunDir: filepath.Join(root, "run")}
	for _, d := range []string{e.Workdir, e.RunDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e runEnv) httpServer(url string) agentcli.MCPServer {
	return agentcli.MCPServer{URL: url, Headers: map[string]string{"Authorization": "Bearer " + testToken, "X-Paperclip-Run-Id": testRunID}}
}

// writeClaudeConfig writes the run's private --mcp-config file.
func (e runEnv) writeClaudeConfig(t *testing.T, s agentcli.MCPServer) string {
	t.Helper()
	raw, err := agentcli.ClaudeMCPConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(e.RunDir, "mcp.json")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCodexHome writes the per-run CODEX_HOME with its sessions kept in
// the task directory.
func (e runEnv) writeCodexHome(t *testing.T, s agentcli.MCPServer) string {
	t.Helper()
	home := filepath.Join(e.RunDir, "codex-home")
	sessions := filepath.Join(e.Workdir, ".paperclip", "codex-sessions")
	for _, d := range []string{home, sessions} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := agentcli.CodexConfigTOML(s, agentcli.CodexHostSandbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sessions, filepath.Join(home, "sessions")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	return home
}

func (e runEnv) stageSkill(t *testing.T) {
	t.Helper()
	d := filepath.Join(e.Workdir, ".claude", "skills", "agentmail")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	skill := "---\nname: agentmail\ndescription: Read email tasks, send or reply through your assigned inbox.\n---\n\n# Email through your assigned inbox\n"
	if err := os.WriteFile(filepath.Join(d, "SKILL.md"), []byte(skill), 0o444); err != nil {
		t.Fatal(err)
	}
}

type cliRun struct {
	Stdout, Stderr string
	Code           int
	Outcome        agentcli.Outcome
}

// runCLI runs bin with args in env's task directory, the prompt on stdin
// and only env vars given (no credentials: nothing can reach a model). A
// non-nil until stops the process once it returns true (for a CLI that
// would otherwise wait for the network).
func runCLI(t *testing.T, typ, bin string, e runEnv, args []string, env []string, prompt string, until func(agentcli.Outcome) bool) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.Workdir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.Workdir, "TMPDIR=" + e.RunDir, "LANG=C.UTF-8"}, env...)
	cmd.Stdin = strings.NewReader(prompt)
	p := agentcli.NewParser(typ)
	var stdout, stderr syncBuffer
	cmd.Stdout = io.MultiWriter(&stdout, p)
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for stopped := false; !stopped; {
		select {
		case <-done:
			stopped = true
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Fatalf("%s %q did not finish in time\nstdout: %s\nstderr: %s", bin, args, stdout.String(), stderr.String())
		case <-tick.C:
			if until != nil && until(p.Outcome()) {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				stopped = true
			}
		}
	}
	return cliRun{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode(), Outcome: p.Outcome()}
}

// syncBuffer is a bytes.Buffer safe for the process's writer goroutine and
// the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
