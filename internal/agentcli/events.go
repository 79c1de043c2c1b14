package agentcli

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Outcome is what a CLI's event stream reported about its run.
type Outcome struct {
	// SessionID continues the conversation in a later run (Claude Code's
	// session_id, Codex's thread_id).
	SessionID string
	// Usage is the run's consumption, cost included when known.
	Usage Usage
	// Result is the agent's final message.
	Result string
	// IsError is set when the CLI reported the run as failed.
	IsError bool
	// Errors are the CLI's error messages (bounded).
	Errors []string
	// Started is set once the CLI really began working on the prompt: an
	// assistant message (Claude Code) or a started thread (Codex). A
	// resume that fails before that point is retried as a fresh session.
	Started bool
	// Finished is set when the terminal event arrived (Claude Code's
	// result, Codex's turn.completed or turn.failed).
	Finished bool
	// MCPStatus is Claude Code's status of our MCP server at start
	// ("connected", "failed", …), when reported.
	MCPStatus string
	// ToolCalls counts calls of our MCP server's tools.
	ToolCalls int
	// Events counts the decoded events.
	Events int
}

// maxLine bounds one event line; longer lines (huge tool output) are
// skipped by the parser (the run log keeps its own bounded copy).
const maxLine = 8 << 20

const maxErrors = 10

// Parser decodes a CLI's newline-delimited JSON events written to it. It
// is an io.Writer so it can sit beside the run log on the process's
// standard output; lines that are not JSON are ignored.
type Parser struct {
	mu      sync.Mutex
	line    []byte
	skip    bool
	decode  func(o *Outcome, raw []byte)
	outcome Outcome
}

// NewParser returns a parser for adapter type Claude or Codex.
func NewParser(adapterType string) *Parser {
	if adapterType == Codex {
		return &Parser{decode: decodeCodex}
	}
	return &Parser{decode: decodeClaude}
}

// Write implements io.Writer.
func (p *Parser) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.appendPart(b)
			break
		}
		p.appendPart(b[:i])
		if !p.skip {
			p.handle(p.line)
		}
		p.line, p.skip = p.line[:0], false
		b = b[i+1:]
	}
	return n, nil
}

func (p *Parser) appendPart(b []byte) {
	if p.skip {
		return
	}
	if len(p.line)+len(b) > maxLine {
		p.skip, p.line = true, p.line[:0]
		return
	}
	p.line = append(p.line, b...)
}

func (p *Parser) handle(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !json.Valid(line) {
		return
	}
	p.outcome.Events++
	p.decode(&p.outcome, line)
}

// Outcome returns what was decoded so far (a final unterminated line is
// decoded too).
func (p *Parser) Outcome() Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.line) > 0 && !p.skip {
		p.handle(p.line)
		p.line = p.line[:0]
	}
	o := p.outcome
	o.Errors = append([]string(nil), o.Errors...)
	return o
}

func (o *Outcome) addError(msg string) {
	msg = strings.TrimSpace(msg)
	if msg == "" || len(o.Errors) >= maxErrors {
		return
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	o.Errors = append(o.Errors, msg)
}

// claudeEvent is the part of Claude Code's stream-json events we read:
// {"type":"system","subtype":"init","session_id",…,"mcp_servers":[{name,status}]},
// {"type":"assistant","message":{"content":[{type:"text"|"tool_use",…}]}},
// {"type":"user",…} (tool results) and the final {"type":"result",
// "subtype":"success"|"error_max_turns"|"error_during_execution",
// "is_error","num_turns","result","session_id","total_cost_usd",
// "usage":{input_tokens,cache_creation_input_tokens,cache_read_input_tokens,
// output_tokens},"errors":[…]}.
type claudeEvent struct {
	Type       string `json:"type"`
	Subtype    string `json:"subtype"`
	SessionID  string `json:"session_id"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"mcp_servers"`
	Message *struct {
		Content []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"content"`
	} `json:"message"`
	IsError      bool     `json:"is_error"`
	NumTurns     int      `json:"num_turns"`
	Result       string   `json:"result"`
	TotalCostUSD float64  `json:"total_cost_usd"`
	Errors       []string `json:"errors"`
	Usage        *struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	} `json:"usage"`
}

func decodeClaude(o *Outcome, raw []byte) {
	var ev claudeEvent
	if json.Unmarshal(raw, &ev) != nil {
		return
	}
	switch ev.Type {
	case "system":
		if ev.Subtype != "init" {
			return
		}
		if ValidSessionID(ev.SessionID) {
			o.SessionID = ev.SessionID
		}
		for _, s := range ev.MCPServers {
			if s.Name == MCPServerName {
				o.MCPStatus = s.Status
			}
		}
	case "assistant":
		o.Started = true
		if ev.Message != nil {
			for _, c := range ev.Message.Content {
				if c.Type == "tool_use" && strings.HasPrefix(c.Name, "mcp__"+MCPServerName+"__") {
					o.ToolCalls++
				}
			}
		}
	case "result":
		o.Finished = true
		if ValidSessionID(ev.SessionID) {
			o.SessionID = ev.SessionID
		}
		o.IsError = ev.IsError || (ev.Subtype != "" && ev.Subtype != "success")
		o.Result = ev.Result
		if ev.Usage != nil {
			o.Usage.InputTokens = ev.Usage.InputTokens
			o.Usage.CacheCreationTokens = ev.Usage.CacheCreationInputTokens
			o.Usage.CachedInputTokens = ev.Usage.CacheReadInputTokens
			o.Usage.OutputTokens = ev.Usage.OutputTokens
		}
		o.Usage.CostMicros = usdToMicros(ev.TotalCostUSD)
		for _, e := range ev.Errors {
			o.addError(e)
		}
		if ev.IsError && len(ev.Errors) == 0 && ev.Result != "" {
			o.addError(ev.Result)
		}
	}
}

// codexEvent is the part of `codex exec --json` events we read:
// {"type":"thread.started","thread_id"}, {"type":"turn.started"},
// {"type":"turn.completed","usage":{input_tokens,cached_input_tokens,output_tokens}},
// {"type":"turn.failed","error":{"message"}}, {"type":"error","message"}
// and item events {"type":"item.completed","item":{"id","type":
// "agent_message"|"mcp_tool_call"|…,"text","server","tool","status"}}.
type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Usage    *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Item *struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Server string `json:"server"`
		Status string `json:"status"`
	} `json:"item"`
}

func decodeCodex(o *Outcome, raw []byte) {
	var ev codexEvent
	if json.Unmarshal(raw, &ev) != nil {
		return
	}
	switch ev.Type {
	case "thread.started":
		o.Started = true
		if ValidSessionID(ev.ThreadID) {
			o.SessionID = ev.ThreadID
		}
	case "turn.completed":
		o.Finished = true
		if ev.Usage != nil {
			o.Usage.InputTokens += ev.Usage.InputTokens
			o.Usage.CachedInputTokens += ev.Usage.CachedInputTokens
			o.Usage.OutputTokens += ev.Usage.OutputTokens
		}
	case "turn.failed":
		o.Finished, o.IsError = true, true
		if ev.Error != nil {
			o.addError(ev.Error.Message)
		}
	case "error":
		// Codex also reports recoverable conditions ("Reconnecting…") as
		// error events; only turn.failed fails the run.
		o.addError(ev.Message)
	case "item.completed":
		if ev.Item == nil {
			return
		}
		switch ev.Item.Type {
		case "agent_message":
			o.Result = ev.Item.Text
		case "mcp_tool_call":
			if ev.Item.Server == MCPServerName {
				o.ToolCalls++
			}
		}
	}
}
