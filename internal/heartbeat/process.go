package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/sandbox"
)

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
	// socket in the run's private directory dir, given to the sandbox
	// identity, serving an allowlist of the API as the run) and returns
	// the socket's host path and a function that stops it. Without it a
	// sandboxed run has no way to reach the control plane.
	Bridge func(ctx context.Context, g sandbox.Grant, dir string, owner sandbox.Identity) (socket string, stop func(), err error)
}

// ExecutesHostProgram implements HostProgram: the process adapter runs a
// program on this host.
func (ProcessAdapter) ExecutesHostProgram() bool { return true }

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
	// On the host: the run's fresh HOME (the sandbox sets its own below).
	env["HOME"] = spec.Home
	for k, v := range cfg.Env {
		env[k] = spec.secretValue("env."+k, v)
	}
	for k, v := range spec.Env() {
		env[k] = v
	}
	var cmd *exec.Cmd
	var start, wait func() error
	if spec.Sandboxed() {
		c, stop, err := p.sandboxCommand(ctx, spec, cfg, env)
		if err != nil {
			return Result{Status: domain.RunFailed, Error: err.Error()}
		}
		defer stop()
		cmd, start, wait = c.Cmd, c.Start, c.Wait
	} else {
		dir := spec.Workdir
		if cfg.Cwd != "" {
			dir = filepath.Clean(cfg.Cwd)
			if spec.Isolated && !sandbox.Within(dir, spec.Workdir) {
				return Result{Status: domain.RunFailed, Error: "workspace_validation_failed: the task requires an isolated workspace, but adapterConfig.cwd lies outside its task directory"}
			}
		}
		if spec.BinDir != "" {
			env["PATH"] = spec.BinDir + ":" + serverPath()
		}
		cmd = exec.Command(cfg.Command, cfg.Args...)
		cmd.Dir = dir
		cmd.Env = envList(env)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		start, wait = cmd.Start, cmd.Wait
	}
	out := &capBuffer{max: logMax}
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so a timeout, cancellation or shutdown stops the
	// agent's children too.
	cmd.SysProcAttr.Setpgid = true
	if err := start(); err != nil {
		return Result{Status: domain.RunFailed, Error: fmt.Sprintf("start process: %v", err)}
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	timeout := p.DefaultTimeout
	if cfg.TimeoutSec > 0 {
		timeout = time.Duration(cfg.TimeoutSec) * time.Second
	}
	if timeout <= 0 {
		timeout = time.Hour
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	status, why := "", ""
	var waitErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		status, why = domain.RunTimedOut, "run timed out"
		waitErr = p.stop(cmd, done)
	case <-ctx.Done():
		status, why = domain.RunCancelled, cancelMessage(ctx)
		waitErr = p.stop(cmd, done)
	}
	res := Result{}
	// The agent's env values (vaulted ones are masked anyway; values
	// stored before the vault existed too).
	for k, v := range cfg.Env {
		res.Secrets = append(res.Secrets, spec.secretValue("env."+k, v))
	}
	res.Log, res.LogSize, res.Truncated = out.result()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	res.ExitCode = &code
	switch {
	case status != "":
		res.Status, res.Error = status, why
	case waitErr == nil:
		res.Status = domain.RunSucceeded
	default:
		res.Status = domain.RunFailed
		res.Error = fmt.Sprintf("process exited with code %d", code)
	}
	return res
}

// cancelMessage is the error recorded for a run stopped through ctx: the
// cancellation's cause when it has one ("run cancelled: agent paused").
func cancelMessage(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "run cancelled"
}

// envList renders env as sorted KEY=value pairs.
func envList(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// sandboxCommand builds the bubblewrap command of a sandboxed run with env
// adjusted to the sandbox's view (paths inside it, the bridge URL, the
// paperclipai directory first on PATH). stop, called when the run ends,
// releases the bridge.
func (p ProcessAdapter) sandboxCommand(ctx context.Context, spec RunSpec, cfg domain.ProcessAdapterConfig, env map[string]string) (cmd *sandbox.Cmd, stop func(), err error) {
	noop := func() {}
	if err := spec.checkSandbox(); err != nil {
		return nil, nil, err
	}
	bwrap, err := sandbox.LookBwrap()
	if err != nil {
		return nil, nil, err
	}
	// The host's temporary directory is not mounted; the sandbox has its own.
	env["TMPDIR"] = "/tmp"
	env["HOME"] = spec.Workdir
	if spec.SkillsDir != "" {
		env["PAPERCLIP_SKILLS_DIR"] = sandbox.SkillsDir
	}
	if spec.Binary != "" {
		env["PATH"] = sandbox.BinDir + ":" + serverPath()
	}
	// The network is unshared, so the HTTP API URL is unreachable; without a
	// bridge the run has no API at all rather than a misleading URL.
	env["PAPERCLIP_API_URL"] = ""
	// A configured cwd must lie inside the task directory (sandbox.Command
	// checks): nothing else of the host is writable, or even visible, in there.
	// The command's own directory is bound only when an instance
	// administrator wrote the configuration; a member's command must be a
	// system program.
	sb := sandbox.Spec{Workdir: spec.Workdir, Cwd: cfg.Cwd, SkillsDir: spec.SkillsDir, Binary: spec.Binary,
		Command: cfg.Command, Args: cfg.Args, Env: env, Hidden: spec.Hidden, User: spec.SandboxUser,
		CommandApproved: spec.Agent.HostExecutionApproved}
	stop = noop
	if p.Bridge != nil {
		if spec.RunDir == "" {
			return nil, nil, errors.New("sandbox API bridge: the run has no private directory")
		}
		socket, st, err := p.Bridge(ctx, spec.bridgeGrant(),
			filepath.Join(spec.RunDir, "bridge"), spec.SandboxUser)
		if err != nil {
			return nil, nil, fmt.Errorf("start sandbox API bridge: %w", err)
		}
		sb.Socket, stop = socket, st
		env["PAPERCLIP_API_URL"] = sandbox.APIURL
	}
	cmd, err = sandbox.Command(bwrap, sb)
	if err != nil {
		stop()
		return nil, nil, err
	}
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
