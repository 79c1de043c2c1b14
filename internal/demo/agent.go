package demo

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// Agent is the demo agent's adapter: the built-in example agent, or a
// real CLI agent (run --demo --agent claude_local|codex_local).
type Agent struct {
	Type   string
	Config json.RawMessage
	// CLI is the instance setting a CLI agent needs (its command and the
	// credential variables passed to it).
	CLI *domain.AgentCLISettings
}

// ExampleAgent is the default demo agent: `exe example-agent autoreply`.
func ExampleAgent(exe string) Agent {
	cfg, _ := json.Marshal(map[string]any{"command": exe, "args": []string{"example-agent", "autoreply"}, "timeoutSec": 120})
	return Agent{Type: "process", Config: cfg}
}

// credentialVars are the environment variables each CLI takes its
// provider credentials from when it runs as an agent.
var credentialVars = map[string][]string{
	agentcli.Claude: {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
	agentcli.Codex:  {"CODEX_API_KEY"},
}

var packages = map[string]string{agentcli.Claude: "@anthropic-ai/claude-code", agentcli.Codex: "@openai/codex"}

// CLIAgent returns the demo agent for a CLI adapter type when the CLI is
// installed and its credentials are in the environment (lookupEnv), or
// says what is missing. The credentials stay in the environment: the
// instance setting names the variables, never their values.
func CLIAgent(typ string, lookupEnv func(string) (string, bool)) (Agent, error) {
	vars, ok := credentialVars[typ]
	if !ok {
		return Agent{}, fmt.Errorf("--agent must be example, %s", strings.Join(agentcli.Types, " or "))
	}
	command := map[string]string{agentcli.Claude: agentcli.DefaultClaudeCommand, agentcli.Codex: agentcli.DefaultCodexCommand}[typ]
	path, err := exec.LookPath(command)
	if err != nil {
		return Agent{}, fmt.Errorf("the demo agent %s needs the %s CLI on PATH: npm install -g %s", typ, command, packages[typ])
	}
	var pass []string
	for _, v := range vars {
		if val, ok := lookupEnv(v); ok && val != "" {
			pass = append(pass, v)
		}
	}
	if len(pass) == 0 {
		return Agent{}, fmt.Errorf("the demo agent %s needs its provider credentials in this shell: set %s", typ, strings.Join(vars, " or "))
	}
	cfg := map[string]any{"timeoutSec": 600}
	if typ == agentcli.Claude {
		cfg["maxTurns"] = 30
	}
	raw, _ := json.Marshal(cfg)
	return Agent{Type: typ, Config: raw, CLI: &domain.AgentCLISettings{Command: path, PassEnv: pass}}, nil
}
