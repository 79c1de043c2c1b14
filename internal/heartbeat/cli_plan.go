package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// cliPlan is everything a CLI run needs, prepared once for its attempts.
type cliPlan struct {
	cfg    agentcli.Config
	prompt string
	resume string
	// mcpConfigPath is the --mcp-config file as the CLI sees it.
	mcpConfigPath string
	// command builds the process of one attempt.
	command func(args []string) (cmd *exec.Cmd, start, wait func() error, err error)
	stops   []func()
}

func (p *cliPlan) cleanup() {
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
}

// plan prepares a run's files, environment and process.
func (a CLIAdapter) plan(ctx context.Context, spec RunSpec, cfg agentcli.Config, settings domain.AgentCLISettings) (p *cliPlan, err error) {
	cliPath, err := lookCommand(a.Type, settings)
	if err != nil {
		return nil, err
	}
	boxed := spec.Sandboxed()
	if boxed {
		if err := a.checkSandbox(spec); err != nil {
			return nil, err
		}
	}
	p = &cliPlan{cfg: cfg, resume: a.previousSession(ctx, spec)}
	defer func() {
		if err != nil {
			p.cleanup()
		}
	}()
	skill, _ := os.ReadFile(filepath.Join(spec.SkillsDir, agentmailSkill, "SKILL.md"))
	if p.prompt, err = a.prompt(ctx, spec, string(skill)); err != nil {
		return nil, err
	}
	// The run's own files live in its private run directory (removed when
	// the run ends), never in the task directory the agent keeps.
	dir := filepath.Join(spec.RunDir, "cli")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("prepare %s files: %w", a.Type, err)
	}
	owner := sandbox.Identity{}
	if boxed {
		owner = spec.SandboxUser
	}
	if err := owner.Own(dir); err != nil {
		return nil, err
	}
	env := a.env(spec, settings, boxed)
	var binds []sandbox.Bind
	// Our MCP server, for this run only: over HTTP with the run's
	// credentials in headers on the host; in a sandbox through the
	// `paperclipai mcp stdio` proxy and the run's bridge, which adds the
	// credentials itself.
	mcp := agentcli.MCPServer{URL: strings.TrimSuffix(spec.APIURL, "/api") + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer " + spec.Token, "X-Paperclip-Run-Id": spec.Run.ID}}
	if boxed {
		mcp = agentcli.MCPServer{Command: sandbox.BinDir + "/paperclipai", Args: []string{"mcp", "stdio"},
			Env: map[string]string{"PAPERCLIP_API_URL": sandbox.APIURL}}
	}
	switch a.Type {
	case agentcli.Claude:
		raw, err := agentcli.ClaudeMCPConfig(mcp)
		if err != nil {
			return nil, err
		}
		host := filepath.Join(dir, "mcp.json")
		if err := writeOwned(host, raw, owner); err != nil {
			return nil, err
		}
		p.mcpConfigPath = host
		if boxed {
			p.mcpConfigPath = sandbox.MCPConfigPath
			binds = append(binds, sandbox.Bind{Src: host, Dest: sandbox.MCPConfigPath})
		}
		b, stop, err := stageClaudeSkill(spec, len(skill) > 0, boxed)
		if err != nil {
			return nil, err
		}
		if !boxed {
			if err := linkClaudeProjects(spec); err != nil {
				return nil, err
			}
		}
		binds = append(binds, b...)
		p.stops = append(p.stops, stop)
	case agentcli.Codex:
		home, err := codexHome(spec, dir, mcp, owner, boxed)
		if err != nil {
			return nil, err
		}
		env["CODEX_HOME"] = home
		if boxed {
			env["CODEX_HOME"] = sandbox.CodexHome
			binds = append(binds, sandbox.Bind{Src: home, Dest: sandbox.CodexHome, RW: true})
		}
	}
	if !boxed {
		p.command = func(args []string) (*exec.Cmd, func() error, func() error, error) {
			cmd := exec.Command(cliPath, args...)
			cmd.Dir, cmd.Env = spec.Workdir, envList(env)
			cmd.SysProcAttr = &syscall.SysProcAttr{}
			return cmd, cmd.Start, cmd.Wait, nil
		}
		return p, nil
	}
	return p, a.sandboxCommand(ctx, spec, p, cliPath, settings, env, binds)
}

// checkSandbox refuses a sandboxed run that cannot reach its provider.
func (a CLIAdapter) checkSandbox(spec RunSpec) error {
	if err := spec.checkSandbox(); err != nil {
		return err
	}
	e := spec.Environment
	if !e.AllowNetwork {
		return fmt.Errorf("%s needs its model provider's API, but sandbox environment %q (%s) allows no network. "+
			"An instance administrator can allow it, which lets sandboxed CLI agents reach only the provider's hosts through an egress proxy: "+
			"PATCH /api/environments/%s {\"allowNetwork\": true} (see docs/agents.md)", cliName(a.Type), e.Name, e.ID, e.ID)
	}
	switch {
	case a.Egress == nil:
		return errors.New("sandboxed CLI agents need the server's egress proxy, which this server does not provide")
	case a.Bridge == nil:
		return errors.New("sandboxed CLI agents need the sandbox API bridge, which this server does not provide")
	case spec.Binary == "":
		return errors.New("sandboxed CLI agents need the paperclipai binary inside the sandbox (server option AgentBinary)")
	}
	return nil
}

// sandboxCommand starts the run's bridge and egress proxy and sets
// p.command to build the bubblewrap command: paperclipai egress-exec,
// which points the CLI at the egress proxy, then the CLI itself.
func (a CLIAdapter) sandboxCommand(ctx context.Context, spec RunSpec, p *cliPlan, cliPath string, settings domain.AgentCLISettings,
	env map[string]string, binds []sandbox.Bind) error {
	bwrap, err := sandbox.LookBwrap()
	if err != nil {
		return err
	}
	socket, stop, err := a.Bridge(ctx, spec.bridgeGrant(),
		filepath.Join(spec.RunDir, "bridge"), spec.SandboxUser)
	if err != nil {
		return fmt.Errorf("start sandbox API bridge: %w", err)
	}
	p.stops = append(p.stops, stop)
	allow := settings.EgressHosts
	if len(allow) == 0 {
		allow = agentcli.DefaultEgress(a.Type)
	}
	egress, stop, err := a.Egress(ctx, filepath.Join(spec.RunDir, "egress"), spec.SandboxUser, allow)
	if err != nil {
		return fmt.Errorf("start sandbox egress proxy: %w", err)
	}
	p.stops = append(p.stops, stop)
	binds = append(binds, sandbox.Bind{Src: egress, Dest: sandbox.EgressSocket, RW: true})
	real, err := filepath.EvalSymlinks(cliPath)
	if err != nil {
		return fmt.Errorf("find the %s CLI: %w", cliName(a.Type), err)
	}
	ro := []string{filepath.Dir(real), installDir(real, settings.InstallDir)}
	sb := sandbox.Spec{Workdir: spec.Workdir, SkillsDir: spec.SkillsDir, Socket: socket, Binary: spec.Binary,
		Command: sandbox.BinDir + "/paperclipai", Env: env, Hidden: spec.Hidden, User: spec.SandboxUser,
		ReadOnlyDirs: ro, Binds: binds}
	p.command = func(args []string) (*exec.Cmd, func() error, func() error, error) {
		s := sb
		s.Args = append([]string{"egress-exec", "--socket", sandbox.EgressSocket, "--", real}, args...)
		c, err := sandbox.Command(bwrap, s)
		if err != nil {
			return nil, nil, nil, err
		}
		return c.Cmd, c.Start, c.Wait, nil
	}
	return nil
}

// installDir is the directory holding everything the CLI loads: the
// configured one, else the outermost node_modules of an npm install
// (platform packages are its siblings), else the executable's directory.
func installDir(real, configured string) string {
	if configured != "" {
		return filepath.Clean(configured)
	}
	if i := strings.Index(real, "/node_modules/"); i >= 0 {
		return real[:i+len("/node_modules")]
	}
	return filepath.Dir(real)
}

// env is the CLI's environment: a few of the server's variables (never
// all: the server's may hold the vault master key), the run's variables
// without its token, the CLI's fixed settings and the instance's passEnv
// credentials.
//
// The run token is never in a CLI's environment, on the host or in a
// sandbox: every tool the CLI spawns (its shell, language servers, MCP
// servers of its own) would inherit it. The CLI reaches Paperclip through
// the per-run MCP configuration, whose header carries the token (host) or
// through the bridge, which adds it (sandbox). So `paperclipai` commands
// in a CLI agent's shell carry no run authority on the host (see
// docs/agents.md, "Bring your own agent").
func (a CLIAdapter) env(spec RunSpec, settings domain.AgentCLISettings, boxed bool) map[string]string {
	env := map[string]string{}
	for _, k := range passthroughEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range spec.Env() {
		env[k] = v
	}
	delete(env, "PAPERCLIP_API_KEY")
	for k, v := range env {
		// Defence in depth: a Prepare hook's variable holding the token
		// is dropped too.
		if spec.Token != "" && strings.Contains(v, spec.Token) {
			delete(env, k)
		}
	}
	// On the host the run's own fresh HOME: the CLI must not load
	// settings, hooks or startup files an agent left in a directory.
	env["HOME"] = spec.Home
	if boxed {
		env["HOME"] = spec.Workdir
	}
	if spec.BinDir != "" {
		env["PATH"] = spec.BinDir + ":" + serverPath()
	}
	for k, v := range agentcli.Env(a.Type) {
		env[k] = v
	}
	for _, k := range settings.PassEnv {
		if v, ok := a.lookupEnv(k); ok && !strings.HasPrefix(strings.ToUpper(k), "PAPERCLIP_") {
			env[k] = v
		}
	}
	if boxed {
		env["TMPDIR"] = "/tmp"
		env["PATH"] = sandbox.BinDir + ":" + serverPath()
		// The bridge adds the run's credentials; a sandbox that can reach
		// the network must not hold a token usable elsewhere.
		env["PAPERCLIP_API_URL"] = sandbox.APIURL
		if spec.SkillsDir != "" {
			env["PAPERCLIP_SKILLS_DIR"] = sandbox.SkillsDir
		}
		if a.Type == agentcli.Claude {
			// Telemetry and error reports would only be refused by the
			// egress proxy.
			env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
		}
	}
	return env
}

// prompt builds the wake prompt from the run's task, waking comment and
// wake context.
func (a CLIAdapter) prompt(ctx context.Context, spec RunSpec, skill string) (string, error) {
	in := agentcli.PromptInput{Adapter: a.Type, AgentName: spec.Agent.Name, WakeReason: spec.Run.WakeReason,
		WakeSource: spec.Run.WakeSource, HasInbox: skill != ""}
	if a.Type == agentcli.Codex {
		in.SkillText = skill
	}
	if spec.Run.IssueID != "" {
		is, err := a.Store.GetIssue(ctx, a.Store.DB, spec.Run.IssueID)
		if err != nil {
			return "", fmt.Errorf("load the run's task: %w", err)
		}
		in.TaskID, in.TaskTitle, in.TaskDescription, in.TaskStatus = is.ID, is.Title, is.Description, is.Status
	}
	if spec.Run.WakeCommentID != "" {
		if c, err := a.Store.GetComment(ctx, a.Store.DB, spec.Run.WakeCommentID); err == nil && c.IssueID == spec.Run.IssueID {
			in.WakeComment = c.Body
		}
	}
	var wc struct {
		EmailInstructions string `json:"emailInstructions"`
	}
	if len(spec.Run.ContextSnapshot) > 0 && json.Unmarshal(spec.Run.ContextSnapshot, &wc) == nil {
		in.EmailInstructions = wc.EmailInstructions
	}
	return agentcli.Prompt(in), nil
}

// writeOwned writes a private (0600) file for owner.
func writeOwned(path string, data []byte, owner sandbox.Identity) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return owner.Own(path)
}

// agentmailSkill is the runtime name of the email skill the Prepare hook
// writes into the run's skills directory (email.SkillName; heartbeat does
// not depend on the email package).
const agentmailSkill = "agentmail"

// claudeSkillDir is where Claude Code reads the agentmail skill: a
// project skill of its working directory.
var claudeSkillDir = filepath.Join(".claude", "skills", agentmailSkill)

// stageClaudeSkill puts the agentmail skill where Claude Code reads
// project skills. In a sandbox the run's skill directory is bound there
// read-only (the agent cannot change it). On the host it is copied (mode
// 0444) and removed when the run ends; an agent without an inbox gets no
// skill, and a stale copy is removed. The task directory is the agent's,
// so every access goes through os.Root: a planted symlink cannot
// redirect the server's writes.
func stageClaudeSkill(spec RunSpec, hasSkill, boxed bool) ([]sandbox.Bind, func(), error) {
	noop := func() {}
	if boxed {
		if !hasSkill {
			return nil, noop, nil
		}
		return []sandbox.Bind{{Src: filepath.Join(spec.SkillsDir, agentmailSkill), Dest: filepath.Join(spec.Workdir, claudeSkillDir)}}, noop, nil
	}
	root, err := os.OpenRoot(spec.Workdir)
	if err != nil {
		return nil, noop, fmt.Errorf("stage the agentmail skill: %w", err)
	}
	// Best effort: a copy left behind is replaced by the next run.
	remove := func() { _ = root.RemoveAll(claudeSkillDir) }
	remove()
	if !hasSkill {
		root.Close()
		return nil, noop, nil
	}
	raw, err := os.ReadFile(filepath.Join(spec.SkillsDir, agentmailSkill, "SKILL.md"))
	if err == nil {
		err = root.MkdirAll(claudeSkillDir, 0o755)
	}
	if err == nil {
		err = root.WriteFile(filepath.Join(claudeSkillDir, "SKILL.md"), raw, 0o444)
	}
	if err != nil {
		remove()
		root.Close()
		return nil, noop, fmt.Errorf("stage the agentmail skill: %w", err)
	}
	return nil, func() { remove(); root.Close() }, nil
}

// linkClaudeProjects keeps a host run's Claude Code conversations across
// runs although each run has a fresh HOME: Claude Code keeps them in
// $HOME/.claude/projects, here a link to <task directory>/.claude/projects
// (a directory only host runs ever work in, see TaskDirectory).
func linkClaudeProjects(spec RunSpec) error {
	if spec.Home == "" {
		return errors.New("prepare Claude Code sessions: the run has no HOME of its own")
	}
	root, err := os.OpenRoot(spec.Workdir)
	if err != nil {
		return fmt.Errorf("prepare Claude Code sessions: %w", err)
	}
	defer root.Close()
	projects := filepath.Join(".claude", "projects")
	if err := root.MkdirAll(projects, 0o700); err != nil {
		return fmt.Errorf("prepare Claude Code sessions: %w", err)
	}
	dot := filepath.Join(spec.Home, ".claude")
	if err := os.Mkdir(dot, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("prepare Claude Code sessions: %w", err)
	}
	if err := os.Symlink(filepath.Join(spec.Workdir, projects), filepath.Join(dot, "projects")); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("prepare Claude Code sessions: %w", err)
	}
	return nil
}

// codexHome writes the run's CODEX_HOME (config.toml with our MCP server)
// in dir. Codex keeps its conversations in CODEX_HOME/sessions; that is a
// link to <task directory>/.codex/sessions, so the next run (with a new
// CODEX_HOME) can resume them. The link target is the same path inside a
// sandbox, where the task directory is bound in place.
func codexHome(spec RunSpec, dir string, mcp agentcli.MCPServer, owner sandbox.Identity, boxed bool) (string, error) {
	home := filepath.Join(dir, "codex-home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", fmt.Errorf("prepare CODEX_HOME: %w", err)
	}
	if err := owner.Own(home); err != nil {
		return "", err
	}
	mode := agentcli.CodexHostSandbox
	if boxed {
		mode = agentcli.CodexInSandbox
	}
	raw, err := agentcli.CodexConfigTOML(mcp, mode)
	if err != nil {
		return "", err
	}
	if err := writeOwned(filepath.Join(home, "config.toml"), raw, owner); err != nil {
		return "", err
	}
	root, err := os.OpenRoot(spec.Workdir)
	if err != nil {
		return "", fmt.Errorf("prepare Codex sessions: %w", err)
	}
	defer root.Close()
	sessions := filepath.Join(".codex", "sessions")
	if err := root.MkdirAll(sessions, 0o700); err != nil {
		return "", fmt.Errorf("prepare Codex sessions: %w", err)
	}
	if owner.Switch {
		for _, p := range []string{".codex", sessions} {
			if err := root.Lchown(p, owner.UID, owner.GID); err != nil {
				return "", fmt.Errorf("prepare Codex sessions: %w", err)
			}
		}
	}
	if err := os.Symlink(filepath.Join(spec.Workdir, sessions), filepath.Join(home, "sessions")); err != nil {
		return "", fmt.Errorf("prepare Codex sessions: %w", err)
	}
	return home, nil
}
