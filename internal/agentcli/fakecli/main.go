// Command fakecli is the test double of the Claude Code and Codex CLIs: it
// never calls a model. Installed under the name "claude" or "codex", it
// accepts the subset of that CLI's arguments Paperclip generates (an
// unknown option fails as the real parser does), checks what a run gave it
// (the per-run MCP configuration present and private, no run token in its
// arguments or environment, the agentmail skill staged read-only, its
// install directory read-only in a sandbox), answers the task's
// newest unanswered email through the MCP tools, keeps its sessions where
// the real CLI does (so a later run can resume them), and prints the real
// CLI's streamed JSON events, ending with a session id and usage. What it
// saw is recorded in <cwd>/.fakecli/<run id>.json for the test to inspect.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// record is what one invocation saw, written for the test.
type record struct {
	CLI         string            `json:"cli"`
	Args        []string          `json:"args"`
	Prompt      string            `json:"prompt"`
	Cwd         string            `json:"cwd"`
	Home        string            `json:"home"`
	EnvNames    []string          `json:"envNames"`
	Env         map[string]string `json:"env"`
	Resumed     string            `json:"resumed,omitempty"`
	SessionID   string            `json:"sessionId"`
	Turn        int               `json:"turn"`
	MCPConfig   string            `json:"mcpConfig"`
	MCPMode     string            `json:"mcpMode"`
	MCPFileMode string            `json:"mcpFileMode"`
	Skill       *skillInfo        `json:"skill,omitempty"`
	Install     *installInfo      `json:"install,omitempty"`
	Tools       []string          `json:"tools"`
	Replied     string            `json:"replied,omitempty"`
	Failures    []string          `json:"failures,omitempty"`
}

// installInfo is what the CLI could do to its own install directory.
type installInfo struct {
	Dir string `json:"dir"`
	// Writable: a file could be created there; ReadOnlyMount: the
	// directory lies on a read-only mount.
	Writable      bool `json:"writable"`
	ReadOnlyMount bool `json:"readOnlyMount"`
}

type skillInfo struct {
	Path     string `json:"path"`
	Mode     string `json:"mode"`
	Writable bool   `json:"writable"`
	Bytes    int    `json:"bytes"`
}

// Fixed usage of every fake turn, so tests can predict costs.
const (
	fakeCostUSD      = 0.0123
	fakeInput        = 1200
	fakeCacheCreate  = 300
	fakeCacheRead    = 4000
	fakeOutput       = 250
	fakeCodexInput   = 10000
	fakeCodexCached  = 4000
	fakeCodexOutput  = 500
	assertionFailure = 3
)

func main() {
	cli := filepath.Base(os.Args[0])
	var code int
	switch {
	case strings.HasPrefix(cli, "claude"):
		code = runClaude(os.Args[1:])
	case strings.HasPrefix(cli, "codex"):
		code = runCodex(os.Args[1:])
	default:
		fmt.Fprintf(os.Stderr, "fakecli: install me as claude or codex, not %q\n", cli)
		code = 2
	}
	os.Exit(code)
}

// noise prints events of about FAKECLI_NOISE_BYTES bytes in total (none
// when unset), made by event from a line number and a filler, so a test
// can make a run's output outgrow the run log.
func noise(event func(n int, filler string) any) {
	total, _ := strconv.Atoi(os.Getenv("FAKECLI_NOISE_BYTES"))
	filler := strings.Repeat("n", 1000)
	for n, done := 0, 0; done < total; n++ {
		b, _ := json.Marshal(event(n, filler))
		fmt.Println(string(b))
		done += len(b) + 1
	}
}

// emit prints one event line.
func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func newRecord(cli string, args []string) *record {
	cwd, _ := os.Getwd()
	r := &record{CLI: cli, Args: args, Cwd: cwd, Home: os.Getenv("HOME"), Env: map[string]string{}}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		r.EnvNames = append(r.EnvNames, k)
		if strings.HasPrefix(k, "PAPERCLIP_") && k != "PAPERCLIP_API_KEY" || k == "CODEX_HOME" || k == "TMPDIR" || k == "FAKECLI_CANARY" || k == "HTTPS_PROXY" {
			r.Env[k] = v
		}
	}
	return r
}

func (r *record) fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.Failures = append(r.Failures, msg)
	fmt.Fprintln(os.Stderr, "fakecli: ASSERTION FAILED: "+msg)
}

// commonChecks are the assertions both CLIs make about their start.
func (r *record) commonChecks() {
	for _, a := range r.Args {
		if strings.Contains(a, "pcr_") {
			r.fail("a run token is in argv")
		}
	}
	if os.Getenv("PAPERCLIP_RUN_ID") == "" {
		r.fail("PAPERCLIP_RUN_ID is not set")
	}
	// The run token reaches the CLI only through its MCP configuration:
	// every tool the CLI spawns would inherit its environment.
	if _, ok := os.LookupEnv("PAPERCLIP_API_KEY"); ok {
		r.fail("PAPERCLIP_API_KEY is in the environment")
	}
	for _, kv := range os.Environ() {
		if strings.Contains(kv, "pcr_") {
			k, _, _ := strings.Cut(kv, "=")
			r.fail("the environment variable %s holds a run token", k)
		}
	}
	r.checkInstallDir()
	if !strings.Contains(r.Prompt, "Paperclip woke you") {
		r.fail("the prompt on stdin is not a Paperclip wake prompt: %q", r.Prompt)
	}
}

// checkInstallDir tries to change the CLI's own install directory. In a
// sandbox (its API is the bridge socket) the directory must be bound
// read-only, whoever the sandbox user is: an agent that could rewrite its
// CLI would change what every later run of it executes.
func (r *record) checkInstallDir() {
	exe := os.Args[0]
	if !filepath.IsAbs(exe) {
		exe, _ = os.Executable()
	}
	info := &installInfo{Dir: filepath.Dir(exe)}
	r.Install = info
	if f, err := os.CreateTemp(info.Dir, ".fakecli-write-probe-*"); err == nil {
		info.Writable = true
		f.Close()
		_ = os.Remove(f.Name())
	}
	var st unix.Statfs_t
	if err := unix.Statfs(info.Dir, &st); err == nil {
		info.ReadOnlyMount = st.Flags&unix.ST_RDONLY != 0
	}
	if strings.HasPrefix(os.Getenv("PAPERCLIP_API_URL"), "unix:") && (info.Writable || !info.ReadOnlyMount) {
		r.fail("the install directory %s is not read-only in the sandbox (writable %v, read-only mount %v)", info.Dir, info.Writable, info.ReadOnlyMount)
	}
}

// checkPrivateFile asserts path is a regular file only its owner may read,
// outside the working directory (which the agent shares with later runs).
func (r *record) checkPrivateFile(path string) {
	fi, err := os.Stat(path)
	if err != nil {
		r.fail("MCP configuration %s: %v", path, err)
		return
	}
	r.MCPFileMode = fmt.Sprintf("%04o", fi.Mode().Perm())
	if fi.Mode().Perm()&0o077 != 0 {
		r.fail("MCP configuration %s is readable by others (%s)", path, fi.Mode().Perm())
	}
	if rel, err := filepath.Rel(r.Cwd, path); err == nil && !strings.HasPrefix(rel, "..") {
		r.fail("MCP configuration %s lies inside the task directory", path)
	}
}

// checkServer asserts the run's MCP server entry: HTTP with the run's
// headers, or the stdio proxy holding no credentials.
func (r *record) checkServer(s server) {
	switch {
	case s.URL != "":
		r.MCPMode = "http"
		if !strings.HasPrefix(s.Headers["Authorization"], "Bearer pcr_") {
			r.fail("the MCP server's Authorization header is not the run token")
		}
		if s.Headers["X-Paperclip-Run-Id"] != os.Getenv("PAPERCLIP_RUN_ID") {
			r.fail("the MCP server's X-Paperclip-Run-Id is not this run")
		}
	case s.Command != "":
		r.MCPMode = "stdio"
		if strings.Contains(strings.Join(append(s.Args, s.Command), " ")+fmt.Sprint(s.Env), "pcr_") {
			r.fail("the stdio MCP server entry carries a run token")
		}
	default:
		r.fail("no MCP server named paperclip")
	}
}

func (r *record) save() {
	dir := filepath.Join(r.Cwd, ".fakecli")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "fakecli: record:", err)
		return
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	name := os.Getenv("PAPERCLIP_RUN_ID")
	if name == "" {
		name = "norun"
	}
	// A resumed attempt and its fresh fallback both record; keep both.
	path := filepath.Join(dir, name+".json")
	if _, err := os.Stat(path); err == nil {
		path = filepath.Join(dir, name+"-2.json")
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "fakecli: record:", err)
	}
}

func readPrompt() string {
	b, _ := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	return string(b)
}

// newSessionID returns a random UUID.
func newSessionID() string {
	var b [16]byte
	f, err := os.Open("/dev/urandom")
	if err == nil {
		_, _ = io.ReadFull(f, b[:])
		f.Close()
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// sessionTurns reads a session transcript's number of turns (one line each).
func sessionTurns(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "\n"), nil
}

func appendTurn(path, prompt string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	b, _ := json.Marshal(map[string]any{"at": time.Now().UTC().Format(time.RFC3339Nano), "promptBytes": len(prompt)})
	_, err = f.Write(append(b, '\n'))
	return err
}

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}
