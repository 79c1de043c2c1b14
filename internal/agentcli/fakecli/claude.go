package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// claudeArgs is the parsed subset of Claude Code's options.
type claudeArgs struct {
	print, verbose, strictMCP bool
	outputFormat, model       string
	resume                    string
	maxTurns                  int
	mcpConfigs, allowedTools  []string
	prompt                    []string
}

// parseClaude follows Claude Code's parser for the options Paperclip uses:
// variadic options take values up to the next option; anything else
// starting with "-" is "error: unknown option".
func parseClaude(args []string) (claudeArgs, error) {
	var a claudeArgs
	value := func(i *int, name string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("error: option '%s <value>' argument missing", name)
		}
		*i++
		return args[*i], nil
	}
	variadic := func(i *int) []string {
		var vs []string
		for *i+1 < len(args) && !strings.HasPrefix(args[*i+1], "-") {
			*i++
			vs = append(vs, args[*i])
		}
		return vs
	}
	for i := 0; i < len(args); i++ {
		var err error
		arg := args[i]
		// Commander's --option=value form (Paperclip resumes with it).
		if name, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(name, "--") {
			switch name {
			case "--resume":
				a.resume = v
			case "--model":
				a.model = v
			case "--output-format":
				a.outputFormat = v
			default:
				return a, fmt.Errorf("error: unknown option '%s'", arg)
			}
			continue
		}
		switch arg {
		case "-p", "--print":
			a.print = true
		case "--verbose":
			a.verbose = true
		case "--strict-mcp-config":
			a.strictMCP = true
		case "--output-format":
			a.outputFormat, err = value(&i, arg)
		case "--model":
			a.model, err = value(&i, arg)
		case "-r", "--resume":
			a.resume, err = value(&i, arg)
		case "--max-turns":
			var v string
			if v, err = value(&i, arg); err == nil {
				a.maxTurns, err = strconv.Atoi(v)
			}
		case "--mcp-config":
			a.mcpConfigs = append(a.mcpConfigs, variadic(&i)...)
		case "--allowedTools", "--allowed-tools":
			a.allowedTools = append(a.allowedTools, variadic(&i)...)
		default:
			if strings.HasPrefix(arg, "-") {
				return a, fmt.Errorf("error: unknown option '%s'", arg)
			}
			a.prompt = append(a.prompt, arg)
		}
		if err != nil {
			return a, err
		}
	}
	if a.print && a.outputFormat == "stream-json" && !a.verbose {
		return a, fmt.Errorf("Error: When using --print, --output-format=stream-json requires --verbose")
	}
	return a, nil
}

// claudeProjectDir is where Claude Code keeps a directory's sessions.
func claudeProjectDir(home, cwd string) string {
	enc := strings.NewReplacer("/", "-", ".", "-").Replace(cwd)
	return filepath.Join(home, ".claude", "projects", enc)
}

func runClaude(argv []string) int {
	a, err := parseClaude(argv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := newRecord("claude", argv)
	defer r.save()
	if !a.print || a.outputFormat != "stream-json" {
		r.fail("not print mode with stream-json output: %q", argv)
	}
	if len(a.prompt) > 0 {
		r.fail("the prompt was passed in argv")
	}
	r.Prompt = readPrompt()
	r.commonChecks()
	srv := r.claudeConfig(a)
	projects := claudeProjectDir(r.Home, r.Cwd)
	if a.resume != "" {
		r.Resumed = a.resume
		turns, err := sessionTurns(filepath.Join(projects, a.resume+".jsonl"))
		if err != nil {
			// The real CLI's answer to an unknown session.
			msg := "No conversation found with session ID: " + a.resume
			emit(map[string]any{"type": "result", "subtype": "error_during_execution", "duration_ms": 0, "is_error": true,
				"num_turns": 0, "session_id": a.resume, "total_cost_usd": 0, "usage": claudeUsage(0, 0, 0, 0), "errors": []string{msg}})
			fmt.Fprintln(os.Stderr, msg)
			return 1
		}
		r.SessionID, r.Turn = a.resume, turns+1
	} else {
		r.SessionID, r.Turn = newSessionID(), 1
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	sess, tools, err := open(ctx, r, srv)
	status := "connected"
	if err != nil {
		status = "failed"
		r.fail("%v", err)
	}
	toolNames := []string{"Read", "Glob", "Grep"}
	for _, t := range r.Tools {
		toolNames = append(toolNames, "mcp__paperclip__"+t)
	}
	emit(map[string]any{"type": "system", "subtype": "init", "cwd": r.Cwd, "session_id": r.SessionID, "tools": toolNames,
		"mcp_servers": []map[string]string{{"name": "paperclip", "status": status}}, "model": a.model,
		"permissionMode": "default", "apiKeySource": "none", "claude_code_version": "fakecli"})
	if tools["agentmail_read_thread"] {
		r.checkSkill()
	}
	n := 0
	if sess != nil {
		defer sess.Close()
		if tools["agentmail_read_thread"] {
			err = answer(ctx, r, sess, "Fake Claude Code", func(tool string, args any, out string, err error) {
				n++
				id := fmt.Sprintf("toolu_fake%02d", n)
				emit(map[string]any{"type": "assistant", "session_id": r.SessionID, "parent_tool_use_id": nil,
					"message": map[string]any{"role": "assistant", "type": "message", "model": a.model,
						"content": []map[string]any{{"type": "tool_use", "id": id, "name": "mcp__paperclip__" + tool, "input": args}}}})
				emit(map[string]any{"type": "user", "session_id": r.SessionID, "parent_tool_use_id": nil,
					"message": map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id,
						"is_error": err != nil, "content": []map[string]string{{"type": "text", "text": out}}}}}})
			})
			if err != nil {
				r.fail("answer the email: %v", err)
			}
		}
	}
	text := "Nothing to answer."
	if r.Replied != "" {
		text = "Replied to the email (publication " + r.Replied + ")."
	}
	emit(map[string]any{"type": "assistant", "session_id": r.SessionID, "parent_tool_use_id": nil,
		"message": map[string]any{"role": "assistant", "type": "message", "model": a.model, "content": []map[string]string{{"type": "text", "text": text}}}})
	noise(func(n int, filler string) any {
		return map[string]any{"type": "assistant", "session_id": r.SessionID, "parent_tool_use_id": nil,
			"message": map[string]any{"role": "assistant", "type": "message", "model": a.model,
				"content": []map[string]string{{"type": "thinking", "thinking": strconv.Itoa(n) + " " + filler}}}}
	})
	if err := appendTurn(filepath.Join(projects, r.SessionID+".jsonl"), r.Prompt); err != nil {
		r.fail("keep the session: %v", err)
	}
	result := map[string]any{"type": "result", "subtype": "success", "is_error": false, "duration_ms": 12, "duration_api_ms": 10,
		"num_turns": n + 1, "result": text, "session_id": r.SessionID, "total_cost_usd": fakeCostUSD,
		"usage": claudeUsage(fakeInput, fakeCacheCreate, fakeCacheRead, fakeOutput), "permission_denials": []any{}}
	if len(r.Failures) > 0 {
		result["subtype"], result["is_error"], result["errors"] = "error_during_execution", true, r.Failures
		emit(result)
		return assertionFailure
	}
	emit(result)
	return 0
}

func claudeUsage(in, create, read, out int) map[string]any {
	return map[string]any{"input_tokens": in, "cache_creation_input_tokens": create, "cache_read_input_tokens": read,
		"output_tokens": out, "server_tool_use": map[string]int{"web_search_requests": 0}, "service_tier": "standard"}
}

// claudeConfig checks and reads the --mcp-config file.
func (r *record) claudeConfig(a claudeArgs) server {
	if !a.strictMCP {
		r.fail("--strict-mcp-config is missing: other MCP configurations would load")
	}
	if len(a.mcpConfigs) != 1 {
		r.fail("want exactly one --mcp-config, got %q", a.mcpConfigs)
		return server{}
	}
	r.MCPConfig = a.mcpConfigs[0]
	r.checkPrivateFile(r.MCPConfig)
	raw, err := os.ReadFile(r.MCPConfig)
	if err != nil {
		r.fail("read MCP configuration: %v", err)
		return server{}
	}
	var c struct {
		MCPServers map[string]struct {
			Type string `json:"type"`
			server
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		r.fail("MCP configuration is not JSON: %v", err)
		return server{}
	}
	s, ok := c.MCPServers["paperclip"]
	if len(c.MCPServers) != 1 || !ok {
		r.fail("MCP configuration must name the paperclip server alone")
	}
	if (s.Type == "http") != (s.URL != "") || (s.Type == "stdio") != (s.Command != "") {
		r.fail("MCP server type %q does not match its fields", s.Type)
	}
	r.checkServer(s.server)
	return s.server
}

// checkSkill asserts the agentmail skill is staged where Claude Code reads
// project skills, read-only, with no credential in it.
func (r *record) checkSkill() {
	p := filepath.Join(r.Cwd, ".claude", "skills", "agentmail", "SKILL.md")
	fi, err := os.Stat(p)
	if err != nil {
		r.fail("agentmail skill not staged: %v", err)
		return
	}
	info := &skillInfo{Path: p, Mode: fmt.Sprintf("%04o", fi.Mode().Perm())}
	if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
		info.Writable = true
		f.Close()
	}
	b, _ := os.ReadFile(p)
	info.Bytes = len(b)
	r.Skill = info
	if fi.Mode().Perm()&0o222 != 0 {
		r.fail("agentmail skill is writable (%s)", fi.Mode().Perm())
	}
	if !strings.Contains(string(b), "name: agentmail") || strings.Contains(string(b), "pcr_") {
		r.fail("agentmail skill content is wrong or holds a token")
	}
}
