package heartbeat

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/store"
)

// CLIAdapter runs a command-line coding agent, Claude Code (claude_local)
// or Codex (codex_local), for one run: the CLI in its non-interactive mode
// with streamed JSON events, in the task's working directory, with the
// wake prompt on standard input, our /mcp endpoint configured for this run
// only, and the agentmail skill staged (Claude Code) or inlined (Codex).
// The conversation of an (agent, task) is resumed by the next run; a
// resume that fails before the CLI starts working falls back to a fresh
// session. Usage and cost are recorded on the run and charged to the
// agent's monthly budget; the streamed events are the run log (bounded).
//
// In a sandbox environment the CLI runs under bubblewrap like any process
// agent: its install directory bound read-only, /mcp reached through the
// run's bridge (`paperclipai mcp stdio`), and the provider's API only
// through the run's egress proxy, when the environment allows network.
type CLIAdapter struct {
	// Type is agentcli.Claude or agentcli.Codex.
	Type  string
	Store *store.Store
	// DefaultTimeout applies when the agent sets no timeoutSec; KillGrace
	// is the time between SIGTERM and SIGKILL.
	DefaultTimeout, KillGrace time.Duration
	// Bridge starts a sandboxed run's API bridge (see ProcessAdapter.Bridge).
	Bridge func(ctx context.Context, g sandbox.Grant, dir string, owner sandbox.Identity) (socket string, stop func(), err error)
	// Egress starts a sandboxed run's egress proxy in dir (a unix socket
	// given to owner) admitting allow; nil keeps sandboxes offline.
	Egress func(ctx context.Context, dir string, owner sandbox.Identity, allow []string) (socket string, stop func(), err error)
	// LookupEnv reads the server's environment for the instance's
	// passEnv names; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	Log       *slog.Logger
	// BudgetExceeded, when set, is called inside the transaction that
	// charges a run's cost when the charge leaves the agent over its
	// monthly budget (see Options.BudgetExceeded).
	BudgetExceeded func(ctx context.Context, tx *sql.Tx, agent domain.Agent) error
}

// ExecutesHostProgram implements HostProgram: the CLI runs on this host.
func (CLIAdapter) ExecutesHostProgram() bool { return true }

// cliName is the product name used in messages.
func cliName(typ string) string {
	if typ == agentcli.Codex {
		return "Codex"
	}
	return "Claude Code"
}

// Run implements Adapter.
func (a CLIAdapter) Run(ctx context.Context, spec RunSpec, logMax int) Result {
	fail := func(format string, args ...any) Result {
		return Result{Status: domain.RunFailed, Error: fmt.Sprintf(format, args...)}
	}
	cfg, err := agentcli.ParseConfig(a.Type, spec.Agent.AdapterConfig)
	if err != nil {
		return fail("%v", err)
	}
	if spec.Workdir == "" || spec.RunDir == "" {
		return fail("%s: CLI agents need a working directory (workspaces are disabled)", a.Type)
	}
	settings, err := a.settings(ctx)
	if err != nil {
		return fail("%s: read the instance settings: %v", a.Type, err)
	}
	p, err := a.plan(ctx, spec, cfg, settings)
	if err != nil {
		return fail("%v", err)
	}
	defer p.cleanup()
	timeout := a.DefaultTimeout
	if cfg.TimeoutSec > 0 {
		timeout = time.Duration(cfg.TimeoutSec) * time.Second
	}
	if timeout <= 0 {
		timeout = time.Hour
	}
	deadline := time.Now().Add(timeout)
	out := &capBuffer{max: logMax}
	resume := p.resume
	at := a.attempt(ctx, deadline, p, resume, out)
	if resume != "" && at.status == domain.RunFailed && !at.outcome.Started {
		// The CLI no longer knows the session (another machine, a wiped
		// task directory, a CLI upgrade): start over rather than fail
		// every later email of the thread.
		fmt.Fprintf(out, "\npaperclip: resuming session %s failed before it started; starting a fresh session\n", resume)
		a.forgetSession(ctx, spec)
		first := at
		at = a.attempt(ctx, deadline, p, "", out)
		at.usage.Add(first.usage)
	}
	res := Result{Status: at.status, Error: at.why, ExitCode: &at.code, Secrets: a.passedValues(settings)}
	res.Log, res.LogSize, res.Truncated = out.result()
	if spec.Token != "" {
		// Defence in depth: no CLI should echo it, but the log is readable
		// by the board, and the token must never be.
		res.Log = bytes.ReplaceAll(res.Log, []byte(spec.Token), []byte("[run token]"))
	}
	a.record(ctx, spec, at)
	return res
}

// attemptResult is one CLI process's outcome.
type attemptResult struct {
	status, why string
	code        int
	outcome     agentcli.Outcome
	usage       agentcli.Usage
}

// attempt runs the CLI once (resuming session resume, if set) until it
// exits, the deadline passes or ctx ends.
func (a CLIAdapter) attempt(ctx context.Context, deadline time.Time, p *cliPlan, resume string, out *capBuffer) attemptResult {
	res := attemptResult{code: -1}
	if time.Until(deadline) <= 0 {
		res.status, res.why = domain.RunTimedOut, "run timed out"
		return res
	}
	inv := agentcli.Invocation{Config: p.cfg, MCPConfigPath: p.mcpConfigPath, Resume: resume}
	args := agentcli.ClaudeArgs(inv)
	if a.Type == agentcli.Codex {
		args = agentcli.CodexArgs(inv)
	}
	fmt.Fprintf(out, "paperclip: %s %s\n", cliName(a.Type), strings.Join(args, " "))
	cmd, start, wait, err := p.command(args)
	if err != nil {
		res.status, res.why = domain.RunFailed, err.Error()
		return res
	}
	parser := agentcli.NewParser(a.Type)
	cmd.Stdin = strings.NewReader(p.prompt)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(out, parser), out
	cmd.SysProcAttr.Setpgid = true
	if err := start(); err != nil {
		res.status, res.why = domain.RunFailed, fmt.Sprintf("start %s: %v", cliName(a.Type), err)
		return res
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	stopper := ProcessAdapter{KillGrace: a.KillGrace}
	var waitErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		res.status, res.why = domain.RunTimedOut, "run timed out"
		waitErr = stopper.stop(cmd, done)
	case <-ctx.Done():
		res.status, res.why = domain.RunCancelled, cancelMessage(ctx)
		waitErr = stopper.stop(cmd, done)
	}
	if cmd.ProcessState != nil {
		res.code = cmd.ProcessState.ExitCode()
	}
	res.outcome = parser.Outcome()
	res.usage = res.outcome.Usage
	if a.Type == agentcli.Codex {
		res.usage.CostMicros = agentcli.CodexCost(res.usage, p.cfg.Pricing)
	}
	if res.status != "" {
		return res
	}
	switch o := res.outcome; {
	case waitErr == nil && !o.IsError:
		res.status = domain.RunSucceeded
	case waitErr == nil:
		res.status, res.why = domain.RunFailed, fmt.Sprintf("%s reported an error: %s", cliName(a.Type), firstError(o))
	default:
		res.status, res.why = domain.RunFailed, fmt.Sprintf("%s exited with code %d", cliName(a.Type), res.code)
		if e := firstError(o); e != "" {
			res.why += ": " + e
		}
	}
	return res
}

func firstError(o agentcli.Outcome) string {
	if len(o.Errors) > 0 {
		return o.Errors[len(o.Errors)-1]
	}
	return ""
}

// settings returns the instance administrator's setting of a.Type.
func (a CLIAdapter) settings(ctx context.Context) (domain.AgentCLISettings, error) {
	v, err := a.Store.GetSettings(ctx, a.Store.DB)
	if err != nil {
		return domain.AgentCLISettings{}, err
	}
	return v.AgentCLI[a.Type], nil
}

// previousSession returns the session the run resumes, or "".
func (a CLIAdapter) previousSession(ctx context.Context, spec RunSpec) string {
	if spec.Run.IssueID == "" {
		return ""
	}
	ts, err := a.Store.GetTaskSession(ctx, a.Store.DB, spec.Agent.ID, spec.Run.IssueID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			a.log().Warn("read task session", "run", spec.Run.ID, "err", err)
		}
		return ""
	}
	// The CLIs keep conversations per working directory and per product.
	if ts.AdapterType != a.Type || ts.Workdir != spec.Workdir {
		return ""
	}
	// Checked again before use: a stored id is data from a CLI's output
	// and must never become an option of the command line.
	if !agentcli.ValidSessionID(ts.SessionID) {
		return ""
	}
	return ts.SessionID
}

func (a CLIAdapter) forgetSession(ctx context.Context, spec RunSpec) {
	if spec.Run.IssueID == "" {
		return
	}
	if err := a.Store.DeleteTaskSession(context.WithoutCancel(ctx), a.Store.DB, spec.Agent.ID, spec.Run.IssueID); err != nil {
		a.log().Warn("forget task session", "run", spec.Run.ID, "err", err)
	}
}

// record stores the run's session and usage and charges its cost, in one
// transaction, even when the run was cancelled by a shutdown.
func (a CLIAdapter) record(ctx context.Context, spec RunSpec, at attemptResult) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	u := at.usage
	usage := domain.RunUsage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		CacheCreationTokens: u.CacheCreationTokens, OutputTokens: u.OutputTokens, CostMicros: u.CostMicros}
	sid := at.outcome.SessionID
	err := a.Store.Tx(rctx, func(tx *sql.Tx) error {
		if err := a.Store.RecordRunUsage(rctx, tx, spec.Run, sid, usage); err != nil {
			return err
		}
		if a.BudgetExceeded != nil && usage.CostMicros > 0 {
			ag, err := a.Store.GetAgent(rctx, tx, spec.Agent.ID)
			if err != nil {
				return err
			}
			if ag.OverBudget(a.Store.Now()) {
				if err := a.BudgetExceeded(rctx, tx, ag); err != nil {
					return err
				}
			}
		}
		if sid == "" || spec.Run.IssueID == "" {
			return nil
		}
		return a.Store.PutTaskSession(rctx, tx, store.TaskSession{AgentID: spec.Agent.ID, IssueID: spec.Run.IssueID,
			AdapterType: a.Type, SessionID: sid, Workdir: spec.Workdir, RunID: spec.Run.ID})
	})
	if err != nil {
		a.log().Error("record CLI run usage", "run", spec.Run.ID, "err", err)
	}
}

func (a CLIAdapter) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

// passedValues are the values of the instance's passEnv variables this
// run's CLI received (provider API keys): secrets to mask in its log.
func (a CLIAdapter) passedValues(settings domain.AgentCLISettings) []string {
	var out []string
	for _, k := range settings.PassEnv {
		if v, ok := a.lookupEnv(k); ok {
			out = append(out, v)
		}
	}
	return out
}

func (a CLIAdapter) lookupEnv(k string) (string, bool) {
	if a.LookupEnv != nil {
		return a.LookupEnv(k)
	}
	return os.LookupEnv(k)
}

// lookCommand finds the CLI's executable with a message an operator can act on.
func lookCommand(typ string, settings domain.AgentCLISettings) (string, error) {
	command := settings.Command
	if command == "" {
		command = map[string]string{agentcli.Claude: agentcli.DefaultClaudeCommand, agentcli.Codex: agentcli.DefaultCodexCommand}[typ]
	}
	p, err := exec.LookPath(command)
	if err != nil {
		pkg := map[string]string{agentcli.Claude: "@anthropic-ai/claude-code", agentcli.Codex: "@openai/codex"}[typ]
		return "", fmt.Errorf("%s: the %s CLI (%s) was not found on the server: install it (npm install -g %s) or have an instance administrator set its path (instance settings agentCli.%s.command)",
			typ, cliName(typ), command, pkg, typ)
	}
	return p, nil
}
