package agentcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MCPServer is how a CLI reaches the control plane's /mcp endpoint during
// one run. Host runs use URL and Headers (the run token and run id in the
// Authorization and X-Paperclip-Run-Id headers); sandboxed runs have no
// network path to the server and use Command/Args/Env instead: the
// `paperclipai mcp stdio` proxy, which speaks to the run's bridge socket
// (the bridge adds the credentials, so the configuration holds none).
type MCPServer struct {
	URL     string
	Headers map[string]string
	Command string
	Args    []string
	Env     map[string]string
}

func (s MCPServer) check() error {
	if (s.URL == "") == (s.Command == "") {
		return errors.New("agentcli: an MCP server needs exactly one of URL or Command")
	}
	return nil
}

// Invocation describes one CLI process of a run.
type Invocation struct {
	Config Config
	// MCPConfigPath is the per-run MCP configuration file (Claude Code).
	MCPConfigPath string
	// Resume is the session to continue, or "" for a fresh session.
	Resume string
}

// ClaudeArgs returns Claude Code's arguments: print mode with streamed JSON
// events, our MCP server only (--strict-mcp-config ignores any other MCP
// configuration the directory or home may hold), its tools allowed, and
// the agent's model, extra tools and turn limit, and --resume=<id> when
// Resume is ValidSessionID. The prompt is written to the process's
// standard input, never put in argv.
func ClaudeArgs(inv Invocation) []string {
	a := []string{"-p", "--output-format", "stream-json", "--verbose",
		"--mcp-config", inv.MCPConfigPath, "--strict-mcp-config"}
	// --allowedTools takes several values; the next option ends the list.
	a = append(a, "--allowedTools", "mcp__"+MCPServerName)
	a = append(a, inv.Config.AllowedTools...)
	if inv.Config.Model != "" {
		a = append(a, "--model", inv.Config.Model)
	}
	if inv.Config.MaxTurns > 0 {
		a = append(a, "--max-turns", strconv.Itoa(inv.Config.MaxTurns))
	}
	if ValidSessionID(inv.Resume) {
		// One argument: the id can never be read as an option.
		a = append(a, "--resume="+inv.Resume)
	}
	return a
}

// ValidSessionID reports whether id has the shape of a CLI session id (a
// UUID, or letters, digits, "_" and "-" not starting with "-", at most
// 128). The id comes from the CLI's own output, which an agent can
// influence; it is data, and must never become an option of the next
// run's command line (`--resume --dangerously-skip-permissions`).
func ValidSessionID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '-' {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ClaudeMCPConfig renders the --mcp-config file naming our server alone.
func ClaudeMCPConfig(s MCPServer) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	srv := map[string]any{}
	if s.URL != "" {
		srv["type"], srv["url"] = "http", s.URL
		if len(s.Headers) > 0 {
			srv["headers"] = s.Headers
		}
	} else {
		srv["type"], srv["command"] = "stdio", s.Command
		srv["args"] = append([]string{}, s.Args...)
		if len(s.Env) > 0 {
			srv["env"] = s.Env
		}
	}
	return json.MarshalIndent(map[string]any{"mcpServers": map[string]any{MCPServerName: srv}}, "", "  ")
}

// CodexArgs returns Codex's arguments: `exec` (or `exec resume -- <id>`)
// with JSONL events, outside a git repository if need be, the prompt read
// from standard input ("-"). A Resume that is not ValidSessionID starts a
// fresh session. The MCP server, sandbox and approval policy come
// from the per-run CODEX_HOME/config.toml (CodexConfigTOML), which `exec
// resume` reads as well; resume accepts neither --sandbox nor --cd.
func CodexArgs(inv Invocation) []string {
	resume := ValidSessionID(inv.Resume)
	a := []string{"exec"}
	if resume {
		a = append(a, "resume")
	}
	// --strict-config: a configuration key this Codex does not know fails
	// the run loudly instead of silently dropping our MCP server.
	a = append(a, "--json", "--skip-git-repo-check", "--strict-config")
	if inv.Config.Model != "" {
		a = append(a, "--model", inv.Config.Model)
	}
	// Positionals only after "--": a session id is never parsed as an option.
	a = append(a, "--")
	if resume {
		a = append(a, inv.Resume)
	}
	return append(a, "-")
}

// Env returns the fixed environment of adapterType's CLI: Claude Code must
// not update itself in place (its install directory is shared, and
// read-only inside sandboxes).
func Env(adapterType string) map[string]string {
	if adapterType == Claude {
		return map[string]string{"DISABLE_AUTOUPDATER": "1"}
	}
	return map[string]string{}
}

// Codex sandbox modes written to config.toml.
const (
	// CodexHostSandbox confines commands Codex runs on the host to the
	// working directory (no network for them; MCP calls are Codex's own).
	CodexHostSandbox = "workspace-write"
	// CodexInSandbox is used inside Paperclip's bubblewrap sandbox, which
	// is the boundary; Codex's own nested sandbox cannot start there.
	CodexInSandbox = "danger-full-access"
)

// CodexConfigTOML renders the per-run CODEX_HOME/config.toml: never ask for
// approval (nobody is there to answer), the given sandbox mode, and our MCP
// server.
func CodexConfigTOML(s MCPServer, sandboxMode string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if sandboxMode != CodexHostSandbox && sandboxMode != CodexInSandbox {
		return nil, fmt.Errorf("agentcli: unknown codex sandbox mode %q", sandboxMode)
	}
	var b strings.Builder
	b.WriteString("# Written by Paperclip for one run and removed when it ends.\n")
	fmt.Fprintf(&b, "approval_policy = %s\nsandbox_mode = %s\n\n", tomlString("never"), tomlString(sandboxMode))
	fmt.Fprintf(&b, "[mcp_servers.%s]\n", MCPServerName)
	if s.URL != "" {
		fmt.Fprintf(&b, "url = %s\n", tomlString(s.URL))
		if len(s.Headers) > 0 {
			fmt.Fprintf(&b, "http_headers = %s\n", tomlInlineTable(s.Headers))
		}
	} else {
		fmt.Fprintf(&b, "command = %s\n", tomlString(s.Command))
		args := make([]string, 0, len(s.Args))
		for _, a := range s.Args {
			args = append(args, tomlString(a))
		}
		fmt.Fprintf(&b, "args = [%s]\n", strings.Join(args, ", "))
		if len(s.Env) > 0 {
			fmt.Fprintf(&b, "env = %s\n", tomlInlineTable(s.Env))
		}
	}
	b.WriteString("startup_timeout_sec = 30\ntool_timeout_sec = 120\n")
	return []byte(b.String()), nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlInlineTable(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, tomlString(k)+" = "+tomlString(m[k]))
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}
