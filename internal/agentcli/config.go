// Package agentcli knows the command-line coding agents Paperclip runs as
// agents: Claude Code (adapter claude_local) and Codex (adapter
// codex_local). It turns a run into each CLI's arguments, its per-run MCP
// configuration and its wake prompt, and reads each CLI's streamed JSON
// events back into a session id, token usage and cost. It starts no
// processes itself; the heartbeat's adapters do (see docs/agents.md,
// "Bring your own agent").
package agentcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// Adapter types.
const (
	Claude = "claude_local"
	Codex  = "codex_local"
)

// Types lists the adapter types this package serves.
var Types = []string{Claude, Codex}

// Default commands, looked up on the server's PATH when the instance
// administrator configured none.
const (
	DefaultClaudeCommand = "claude"
	DefaultCodexCommand  = "codex"
)

// MCPServerName is the name our MCP server has in each CLI's configuration;
// Claude Code names its tools mcp__<server>__<tool>.
const MCPServerName = "paperclip"

// Config is an agent's adapterConfig for claude_local or codex_local. It
// holds nothing that executes on the host: the command, where it is
// installed and which server environment variables reach it are instance
// settings (domain.AgentCLISettings), so any company member may configure
// these fields.
type Config struct {
	// Model is passed as --model (Claude Code) or -m (Codex); empty keeps
	// the CLI's default.
	Model string `json:"model,omitempty"`
	// AllowedTools are Claude Code tools allowed beyond our MCP server
	// (for example "Read", "Bash(git diff *)"). Codex has no such list.
	AllowedTools []string `json:"allowedTools,omitempty"`
	// MaxTurns caps Claude Code's agentic turns (--max-turns); 0 = CLI default.
	MaxTurns int `json:"maxTurns,omitempty"`
	// TimeoutSec bounds the whole run (both attempts when a resume falls
	// back to a fresh session); 0 = the server default.
	TimeoutSec int `json:"timeoutSec,omitempty"`
	// Pricing converts Codex token usage to cost (Codex reports tokens,
	// not money). Claude Code reports its own cost; Pricing is ignored there.
	Pricing *Pricing `json:"pricing,omitempty"`
}

// Pricing is a model's price in US dollars per million tokens.
type Pricing struct {
	InputPerMTok       float64 `json:"inputPerMTok"`
	CachedInputPerMTok float64 `json:"cachedInputPerMTok,omitempty"`
	OutputPerMTok      float64 `json:"outputPerMTok"`
}

// Limits of a Config.
const (
	MaxAllowedTools = 50
	MaxTurnsLimit   = 1000
	MaxTimeoutSec   = 86400
)

var (
	modelRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,127}$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ErrInvalidConfig wraps every validation failure of a Config or of
// instance settings.
var ErrInvalidConfig = errors.New("invalid adapter config")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
}

// ParseConfig strictly decodes and validates the adapterConfig of
// adapterType (unknown fields are refused) and returns it.
func ParseConfig(adapterType string, raw json.RawMessage) (Config, error) {
	var c Config
	if !slices.Contains(Types, adapterType) {
		return c, invalid("unknown adapter type %q", adapterType)
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, invalid("%s: %v (fields: model, allowedTools, maxTurns, timeoutSec, pricing)", adapterType, err)
	}
	if c.Model != "" && !modelRe.MatchString(c.Model) {
		return c, invalid("model must be a model name or alias (letters, digits and . _ : / @ [ ] -)")
	}
	if len(c.AllowedTools) > MaxAllowedTools {
		return c, invalid("allowedTools may list at most %d tools", MaxAllowedTools)
	}
	if adapterType == Codex && len(c.AllowedTools) > 0 {
		return c, invalid("allowedTools applies to claude_local only")
	}
	for _, t := range c.AllowedTools {
		// A leading dash would be read as an option by the CLI's parser.
		if strings.TrimSpace(t) == "" || strings.HasPrefix(t, "-") || len(t) > 200 || hasControl(t) {
			return c, invalid("allowedTools: %q is not a tool name or pattern", t)
		}
	}
	if c.MaxTurns < 0 || c.MaxTurns > MaxTurnsLimit {
		return c, invalid("maxTurns must be between 0 and %d", MaxTurnsLimit)
	}
	if adapterType == Codex && c.MaxTurns != 0 {
		return c, invalid("maxTurns applies to claude_local only")
	}
	if c.TimeoutSec < 0 || c.TimeoutSec > MaxTimeoutSec {
		return c, invalid("timeoutSec must be between 0 and %d", MaxTimeoutSec)
	}
	if p := c.Pricing; p != nil {
		if adapterType == Claude {
			return c, invalid("pricing applies to codex_local only (Claude Code reports its own cost)")
		}
		if p.InputPerMTok < 0 || p.CachedInputPerMTok < 0 || p.OutputPerMTok < 0 ||
			p.InputPerMTok > 10000 || p.CachedInputPerMTok > 10000 || p.OutputPerMTok > 10000 {
			return c, invalid("pricing: prices must be between 0 and 10000 USD per million tokens")
		}
	}
	return c, nil
}

// DefaultEgress are the destinations a sandboxed run of adapterType may
// reach when its environment allows network and the instance
// administrator named none: the provider's API (and, for Codex, the
// ChatGPT sign-in's backend and token refresh).
func DefaultEgress(adapterType string) []string {
	if adapterType == Codex {
		return []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}
	}
	return []string{"api.anthropic.com:443"}
}

// CheckSettings validates an instance administrator's setting of a CLI
// adapter.
func CheckSettings(i domain.AgentCLISettings) error {
	if i.Command != "" && (strings.HasPrefix(i.Command, "-") || hasControl(i.Command)) {
		return invalid("command %q is not a command", i.Command)
	}
	if i.InstallDir != "" && !strings.HasPrefix(i.InstallDir, "/") {
		return invalid("installDir must be an absolute path")
	}
	for _, n := range i.PassEnv {
		if !envNameRe.MatchString(n) {
			return invalid("passEnv: %q is not an environment variable name", n)
		}
		// The server's own settings (the vault master key among them) and
		// the run variables never pass through.
		if strings.HasPrefix(strings.ToUpper(n), "PAPERCLIP_") {
			return invalid("passEnv may not pass %s (PAPERCLIP_* variables belong to the server or the run)", n)
		}
	}
	for _, h := range i.EgressHosts {
		if h == "" || len(h) > 260 || hasControl(h) || strings.ContainsAny(h, "/@ *") {
			return invalid("egressHosts: %q is not host or host:port", h)
		}
	}
	return nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
