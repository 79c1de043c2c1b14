package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// codexArgs is the parsed subset of `codex exec [resume]`.
type codexArgs struct {
	json, skipGit  bool
	strict         bool
	model          string
	resume         bool
	session        string
	prompt         string
	configOverride []string
}

// parseCodex follows Codex's parser for the options Paperclip uses; an
// unknown option is clap's "unexpected argument" with exit code 2.
func parseCodex(args []string) (codexArgs, error) {
	var a codexArgs
	if len(args) == 0 || args[0] != "exec" {
		return a, fmt.Errorf("fakecli: only `codex exec` is implemented")
	}
	args = args[1:]
	if len(args) > 0 && args[0] == "resume" {
		a.resume, args = true, args[1:]
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			// clap: everything after it is positional.
			pos = append(pos, args[i+1:]...)
			break
		}
		switch {
		case arg == "--json":
			a.json = true
		case arg == "--skip-git-repo-check":
			a.skipGit = true
		case arg == "--strict-config":
			a.strict = true
		case arg == "-m" || arg == "--model" || arg == "-c" || arg == "--config":
			if i+1 >= len(args) {
				return a, fmt.Errorf("error: a value is required for '%s <VALUE>' but none was supplied", arg)
			}
			i++
			if arg == "-m" || arg == "--model" {
				a.model = args[i]
			} else {
				a.configOverride = append(a.configOverride, args[i])
			}
		case (arg == "-s" || arg == "--sandbox" || arg == "-C" || arg == "--cd") && !a.resume:
			i++
		case arg == "-":
			pos = append(pos, arg)
		case strings.HasPrefix(arg, "-"):
			return a, fmt.Errorf("error: unexpected argument '%s' found\n\nUsage: codex exec [OPTIONS] [PROMPT]", arg)
		default:
			pos = append(pos, arg)
		}
	}
	if a.resume {
		if len(pos) > 0 {
			a.session, pos = pos[0], pos[1:]
		}
	}
	if len(pos) > 1 {
		return a, fmt.Errorf("error: unexpected argument '%s' found", pos[1])
	}
	if len(pos) == 1 {
		a.prompt = pos[0]
	}
	return a, nil
}

func runCodex(argv []string) int {
	a, err := parseCodex(argv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r := newRecord("codex", argv)
	defer r.save()
	if !a.json || !a.skipGit || !a.strict {
		r.fail("want --json, --skip-git-repo-check and --strict-config: %q", argv)
	}
	if a.prompt != "-" {
		r.fail("the prompt must be read from stdin (\"-\"), got %q", a.prompt)
	}
	r.Prompt = readPrompt()
	r.commonChecks()
	home := os.Getenv("CODEX_HOME")
	srv, sandboxMode := r.codexConfig(home)
	sessions := filepath.Join(home, "sessions")
	var rollout string
	if a.resume {
		r.Resumed = a.session
		rollout = findRollout(sessions, a.session)
		if rollout == "" {
			fmt.Fprintf(os.Stderr, "Error: thread/resume: thread/resume failed: no rollout found for thread id %s (code -32600)\n", a.session)
			return 1
		}
		turns, _ := sessionTurns(rollout)
		r.SessionID, r.Turn = a.session, turns+1
	} else {
		r.SessionID, r.Turn = newSessionID(), 1
		now := time.Now().UTC()
		rollout = filepath.Join(sessions, now.Format("2006/01/02"), "rollout-"+now.Format("2006-01-02T15-04-05")+"-"+r.SessionID+".jsonl")
	}
	emit(map[string]any{"type": "thread.started", "thread_id": r.SessionID})
	emit(map[string]any{"type": "turn.started"})
	ctx, cancel := ctxTimeout()
	defer cancel()
	sess, tools, err := open(ctx, r, srv)
	if err != nil {
		r.fail("%v", err)
	}
	if tools["agentmail_read_thread"] && !strings.Contains(r.Prompt, "# Email through your assigned inbox") {
		r.fail("the agentmail skill text is not in the prompt")
	}
	r.Env["sandbox_mode"] = sandboxMode
	if sess != nil {
		defer sess.Close()
		if tools["agentmail_read_thread"] {
			n := 0
			err = answer(ctx, r, sess, "Fake Codex", func(tool string, args any, out string, err error) {
				n++
				item := map[string]any{"id": "item_" + strconv.Itoa(n), "type": "mcp_tool_call", "server": "paperclip", "tool": tool,
					"arguments": args, "result": nil, "error": nil, "status": "in_progress"}
				emit(map[string]any{"type": "item.started", "item": item})
				item["status"] = "completed"
				item["result"] = map[string]any{"content": []map[string]string{{"type": "text", "text": out}}, "structured_content": nil}
				if err != nil {
					item["status"], item["result"], item["error"] = "failed", nil, map[string]string{"message": err.Error()}
				}
				emit(map[string]any{"type": "item.completed", "item": item})
			})
			if err != nil {
				r.fail("answer the email: %v", err)
			}
		}
	}
	noise(func(n int, filler string) any {
		return map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_noise_" + strconv.Itoa(n), "type": "reasoning", "text": filler}}
	})
	if err := appendTurn(rollout, r.Prompt); err != nil {
		r.fail("keep the session: %v", err)
	}
	if len(r.Failures) > 0 {
		emit(map[string]any{"type": "turn.failed", "error": map[string]string{"message": strings.Join(r.Failures, "; ")}})
		return assertionFailure
	}
	text := "Nothing to answer."
	if r.Replied != "" {
		text = "Replied to the email (publication " + r.Replied + ")."
	}
	emit(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_final", "type": "agent_message", "text": text}})
	emit(map[string]any{"type": "turn.completed", "usage": map[string]int{"input_tokens": fakeCodexInput,
		"cached_input_tokens": fakeCodexCached, "output_tokens": fakeCodexOutput}})
	return 0
}

// findRollout finds a session's rollout file the way Codex does, following
// a symlinked sessions directory.
func findRollout(sessions, id string) string {
	found := ""
	_ = filepath.WalkDir(sessions+"/", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), "-"+id+".jsonl") {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	return found
}

// codexConfig checks and reads CODEX_HOME/config.toml (the subset
// Paperclip writes: top-level keys and the [mcp_servers.paperclip] table
// with basic strings, string arrays and inline tables of strings).
func (r *record) codexConfig(home string) (server, string) {
	if home == "" {
		r.fail("CODEX_HOME is not set")
		return server{}, ""
	}
	r.MCPConfig = filepath.Join(home, "config.toml")
	r.checkPrivateFile(r.MCPConfig)
	raw, err := os.ReadFile(r.MCPConfig)
	if err != nil {
		r.fail("read config.toml: %v", err)
		return server{}, ""
	}
	var s server
	top, section, servers := map[string]string{}, "", 0
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			if strings.HasPrefix(section, "mcp_servers.") {
				servers++
			}
			continue
		}
		k, v, ok := strings.Cut(line, " = ")
		if !ok {
			r.fail("config.toml: cannot read %q", line)
			continue
		}
		switch {
		case section == "":
			top[k], _ = unquote(v)
		case section == "mcp_servers.paperclip":
			switch k {
			case "url":
				s.URL, _ = unquote(v)
			case "command":
				s.Command, _ = unquote(v)
			case "args":
				s.Args = list(v)
			case "http_headers":
				s.Headers = table(v)
			case "env":
				s.Env = table(v)
			}
		}
	}
	if servers != 1 {
		r.fail("config.toml must configure the paperclip MCP server alone (%d servers)", servers)
	}
	if top["approval_policy"] != "never" {
		r.fail("approval_policy is %q, want never (nobody can approve)", top["approval_policy"])
	}
	r.checkServer(s)
	return s, top["sandbox_mode"]
}

// unquote reads one TOML basic string from the start of v and returns it
// and the rest.
func unquote(v string) (string, string) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, `"`) {
		return "", v
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; c {
		case '"':
			return b.String(), v[i+1:]
		case '\\':
			if i+1 >= len(v) {
				return b.String(), ""
			}
			i++
			switch v[i] {
			case 'u':
				if n, err := strconv.ParseUint(v[i+1:min(i+5, len(v))], 16, 32); err == nil {
					b.WriteRune(rune(n))
				}
				i += 4
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(v[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

func list(v string) []string {
	var out []string
	rest := strings.TrimPrefix(strings.TrimSpace(v), "[")
	for {
		rest = strings.TrimLeft(rest, " ,")
		if !strings.HasPrefix(rest, `"`) {
			return out
		}
		var s string
		s, rest = unquote(rest)
		out = append(out, s)
	}
}

func table(v string) map[string]string {
	out := map[string]string{}
	rest := strings.TrimPrefix(strings.TrimSpace(v), "{")
	for {
		rest = strings.TrimLeft(rest, " ,")
		if !strings.HasPrefix(rest, `"`) {
			return out
		}
		var k, val string
		k, rest = unquote(rest)
		rest = strings.TrimPrefix(strings.TrimLeft(rest, " "), "=")
		val, rest = unquote(rest)
		out[k] = val
	}
}
