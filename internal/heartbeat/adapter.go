package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// RunSpec is everything an adapter needs to execute one run.
type RunSpec struct {
	Run   domain.Run
	Agent domain.Agent
	// Token is the run-scoped bearer token; valid only while the run runs.
	Token string
	// APIURL is the control plane's API base ("http://host:port/api").
	APIURL string
	// Workdir is the task's workspace directory.
	Workdir string
	// SkillsDir is the run's read-only skills directory.
	SkillsDir string
	// ExtraEnv is added to the run environment by Options.Prepare hooks.
	ExtraEnv map[string]string
	// Environment is the agent's execution environment; nil runs locally.
	Environment *domain.Environment
	// Hidden are host directories of the control plane (workspaces root,
	// run scratch) that a sandboxed run must never see beyond its own binds.
	Hidden []string
}

// Environment driver and status values (agents.environment_id targets).
const (
	envDriverSandbox = "sandbox"
	envStatusActive  = "active"
)

// Sandboxed reports whether the run executes in a sandbox environment.
func (s RunSpec) Sandboxed() bool {
	return s.Environment != nil && s.Environment.Driver == envDriverSandbox
}

// checkSandbox returns why a sandboxed run cannot start, or nil.
func (s RunSpec) checkSandbox() error {
	if s.Environment.Status != envStatusActive {
		return fmt.Errorf("sandbox environment %q (%s) is not active (status %s)", s.Environment.Name, s.Environment.ID, s.Environment.Status)
	}
	if s.Workdir == "" {
		return errors.New("sandbox environment requires a task directory (workspaces are disabled)")
	}
	return nil
}

// Env returns the agent CLI environment of contract §2 for this run.
func (s RunSpec) Env() map[string]string {
	env := map[string]string{
		"PAPERCLIP_API_URL":         s.APIURL,
		"PAPERCLIP_API_KEY":         s.Token,
		"PAPERCLIP_COMPANY_ID":      s.Run.CompanyID,
		"PAPERCLIP_AGENT_ID":        s.Run.AgentID,
		"PAPERCLIP_RUN_ID":          s.Run.ID,
		"PAPERCLIP_TASK_ID":         s.Run.IssueID,
		"PAPERCLIP_WAKE_REASON":     s.Run.WakeReason,
		"PAPERCLIP_WAKE_COMMENT_ID": s.Run.WakeCommentID,
		"PAPERCLIP_SKILLS_DIR":      s.SkillsDir,
	}
	for k, v := range s.ExtraEnv {
		env[k] = v
	}
	return env
}

// Result is an adapter's report of a finished run.
type Result struct {
	Status    string
	ExitCode  *int
	Error     string
	Log       []byte
	LogSize   int64
	Truncated bool
}

// Adapter executes runs of one adapter type.
type Adapter interface {
	Run(ctx context.Context, spec RunSpec, logMax int) Result
}

// capBuffer keeps the first max bytes written and counts the rest; safe for
// concurrent writers (stdout and stderr share it).
type capBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	max   int
	total int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

func (c *capBuffer) result() ([]byte, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...), c.total, c.total > int64(c.buf.Len())
}

// ProcessAdapter runs the agent as a local process: the command is executed
// directly with its args (no shell), in the task workspace, with a minimal
// inherited environment plus the run's variables. The server's own
// environment (which may hold the vault master key) is never passed through.
type ProcessAdapter struct {
	// DefaultTimeout applies when the agent sets no timeoutSec.
	DefaultTimeout time.Duration
	// KillGrace is how long a process gets between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// Bridge, when set, starts the API bridge of a sandboxed run (a unix
	// socket serving an allowlist of the API as the run) and returns the
	// socket's host path and a function that stops it. Without it a
	// sandboxed run has no way to reach the control plane.
	Bridge func(ctx context.Context, g sandbox.Grant) (socket string, stop func(), err error)
}

// passthroughEnv lists the only server environment variables a process
// agent inherits.
var passthroughEnv = []string{"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// Run implements Adapter.
func (p ProcessAdapter) Run(ctx context.Context, spec RunSpec, logMax int) Result {
	var cfg domain.ProcessAdapterConfig
	if err := json.Unmarshal(spec.Agent.AdapterConfig, &cfg); err != nil || cfg.Command == "" {
		return Result{Status: domain.RunFailed, Error: "invalid process adapter config: command is required"}
	}
	env := map[string]string{}
	for _, k := range passthroughEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	env["HOME"] = spec.Workdir
	for k, v := range cfg.Env {
		env[k] = v
	}
	for k, v := range spec.Env() {
		env[k] = v
	}
	var cmd *exec.Cmd
	if spec.Sandboxed() {
		c, stop, err := p.sandboxCommand(ctx, spec, cfg, env)
		if err != nil {
			return Result{Status: domain.RunFailed, Error: err.Error()}
		}
		defer stop()
		cmd = c
	} else {
		cmd = exec.Command(cfg.Command, cfg.Args...)
		cmd.Dir = spec.Workdir
		if cfg.Cwd != "" {
			cmd.Dir = cfg.Cwd
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	out := &capBuffer{max: logMax}
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so a timeout or shutdown stops the agent's children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return Result{Status: domain.RunFailed, Error: fmt.Sprintf("start process: %v", err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timeout := p.DefaultTimeout
	if cfg.TimeoutSec > 0 {
		timeout = time.Duration(cfg.TimeoutSec) * time.Second
	}
	if timeout <= 0 {
		timeout = time.Hour
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	status := ""
	var waitErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		status = domain.RunTimedOut
		waitErr = p.stop(cmd, done)
	case <-ctx.Done():
		status = domain.RunCancelled
		waitErr = p.stop(cmd, done)
	}
	res := Result{}
	res.Log, res.LogSize, res.Truncated = out.result()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	res.ExitCode = &code
	switch {
	case status != "":
		res.Status = status
		res.Error = map[string]string{domain.RunTimedOut: "run timed out", domain.RunCancelled: "run cancelled"}[status]
	case waitErr == nil:
		res.Status = domain.RunSucceeded
	default:
		res.Status = domain.RunFailed
		res.Error = fmt.Sprintf("process exited with code %d", code)
	}
	return res
}

// sandboxCommand builds the bubblewrap command of a sandboxed run and
// adjusts env to the sandbox's view (paths inside it, the bridge URL). The
// returned stop function releases the bridge; call it when the run ends.
func (p ProcessAdapter) sandboxCommand(ctx context.Context, spec RunSpec, cfg domain.ProcessAdapterConfig, env map[string]string) (*exec.Cmd, func(), error) {
	noop := func() {}
	if err := spec.checkSandbox(); err != nil {
		return nil, noop, err
	}
	bwrap, err := sandbox.LookBwrap()
	if err != nil {
		return nil, noop, err
	}
	// A configured cwd must lie inside the task directory (sandbox.Args checks):
	// nothing else of the host is writable, or even visible, in there.
	sb := sandbox.Spec{Workdir: spec.Workdir, Cwd: cfg.Cwd, Command: cfg.Command, Args: cfg.Args, Hidden: spec.Hidden}
	// The host's temporary directory is not mounted; the sandbox has its own.
	env["TMPDIR"] = "/tmp"
	env["HOME"] = spec.Workdir
	if spec.SkillsDir != "" {
		sb.SkillsDir = spec.SkillsDir
		env["PAPERCLIP_SKILLS_DIR"] = sandbox.SkillsDir
	}
	// The network is unshared, so the HTTP API URL is unreachable; without a
	// bridge the run has no API at all rather than a misleading URL.
	env["PAPERCLIP_API_URL"] = ""
	stop := noop
	if p.Bridge != nil {
		socket, st, err := p.Bridge(ctx, sandbox.Grant{Token: spec.Token, RunID: spec.Run.ID, CompanyID: spec.Run.CompanyID, TaskID: spec.Run.IssueID})
		if err != nil {
			return nil, noop, fmt.Errorf("start sandbox API bridge: %w", err)
		}
		sb.Socket, stop = socket, st
		env["PAPERCLIP_API_URL"] = sandbox.APIURL
	}
	args, err := sandbox.Args(sb)
	if err != nil {
		stop()
		return nil, noop, err
	}
	cmd := exec.Command(bwrap, args...)
	cmd.Dir = spec.Workdir
	return cmd, stop, nil
}

func (p ProcessAdapter) stop(cmd *exec.Cmd, done <-chan error) error {
	grace := p.KillGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return <-done
	}
}

// HTTPAdapter runs an agent by POSTing the run to its URL; a 2xx response
// means the run succeeded.
type HTTPAdapter struct {
	Client *http.Client
}

// Run implements Adapter.
func (h HTTPAdapter) Run(ctx context.Context, spec RunSpec, logMax int) Result {
	var cfg domain.HTTPAdapterConfig
	if err := json.Unmarshal(spec.Agent.AdapterConfig, &cfg); err != nil || cfg.URL == "" {
		return Result{Status: domain.RunFailed, Error: "invalid http adapter config: url is required"}
	}
	if spec.Sandboxed() {
		// An HTTP agent runs elsewhere; it cannot be confined, so a sandbox
		// environment must not silently degrade to an unconfined call.
		return Result{Status: domain.RunFailed, Error: "sandbox environments support only the process adapter"}
	}
	body, _ := json.Marshal(map[string]string{"runId": spec.Run.ID, "agentId": spec.Run.AgentID, "companyId": spec.Run.CompanyID,
		"issueId": spec.Run.IssueID, "wakeReason": spec.Run.WakeReason, "apiUrl": spec.APIURL, "apiKey": spec.Token})
	timeout := 10 * time.Minute
	if cfg.TimeoutSec > 0 {
		timeout = time.Duration(cfg.TimeoutSec) * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Status: domain.RunFailed, Error: "invalid http adapter url"}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range cfg.Headers {
		req.Header.Set(k, v)
	}
	client := h.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return Result{Status: domain.RunCancelled, Error: "run cancelled"}
		case errors.Is(rctx.Err(), context.DeadlineExceeded):
			return Result{Status: domain.RunTimedOut, Error: "run timed out"}
		}
		return Result{Status: domain.RunFailed, Error: "http adapter request failed: " + strings.TrimSpace(scrubURL(err.Error(), cfg.URL))}
	}
	defer resp.Body.Close()
	buf := &capBuffer{max: logMax}
	_, _ = io.Copy(buf, io.LimitReader(resp.Body, int64(logMax)*4))
	res := Result{}
	res.Log, res.LogSize, res.Truncated = buf.result()
	code := resp.StatusCode
	res.ExitCode = &code
	if code >= 200 && code < 300 {
		res.Status = domain.RunSucceeded
	} else {
		res.Status = domain.RunFailed
		res.Error = fmt.Sprintf("http adapter answered %d", code)
	}
	return res
}

// scrubURL removes the adapter URL (which may embed credentials) from an error.
func scrubURL(msg, url string) string { return strings.ReplaceAll(msg, url, "<adapter url>") }
