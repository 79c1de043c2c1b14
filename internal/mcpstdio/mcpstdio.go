// Package mcpstdio connects an MCP client that only speaks stdio (one
// JSON-RPC message per line) to the control plane's /mcp endpoint (MCP
// Streamable HTTP). It is what `paperclipai mcp stdio` runs: inside a
// sandbox, where the endpoint is reachable only through the run's bridge
// socket, and for any stdio-only MCP client on the host.
package mcpstdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
)

// MaxMessage bounds one message in either direction.
const MaxMessage = 16 << 20

// maxInFlight bounds concurrent requests to the endpoint.
const maxInFlight = 8

// Target is the Streamable HTTP endpoint and how to reach it.
type Target struct {
	// Endpoint is the /mcp URL.
	Endpoint string
	// Client sends the requests (a unix-socket transport for a bridge).
	Client *http.Client
	// Header is added to every request (Authorization, X-Paperclip-Run-Id
	// on the host; nothing through a bridge, which adds its own).
	Header http.Header
}

// message is the part of a JSON-RPC message the proxy looks at.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
}

type proxy struct {
	t       Target
	out     io.Writer
	outMu   sync.Mutex
	mu      sync.Mutex
	version string
	session string
}

// Run forwards every line read from in to the endpoint and writes the
// answers to out, one per line, until in ends and the requests in flight
// are answered (or ctx ends). A request the endpoint refuses is answered
// with a JSON-RPC error, so the client never waits forever.
func Run(ctx context.Context, in io.Reader, out io.Writer, t Target) error {
	if t.Client == nil {
		t.Client = http.DefaultClient
	}
	p := &proxy{t: t, out: out}
	r := bufio.NewReaderSize(in, 64<<10)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			var m message
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				p.write(errorResponse(nil, -32700, "parse error: "+jerr.Error()))
			} else if m.Method == "initialize" {
				// The negotiated protocol version is needed on every later
				// request, so initialize is answered before the next line.
				p.forward(ctx, line, m)
			} else {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				wg.Add(1)
				go func(line []byte, m message) {
					defer wg.Done()
					defer func() { <-sem }()
					p.forward(ctx, line, m)
				}(line, m)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line without its newline; a line over
// MaxMessage is an error (the stream cannot be resynchronised).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, isPrefix, err := r.ReadLine()
		line = append(line, part...)
		if len(line) > MaxMessage {
			return nil, fmt.Errorf("mcp stdio: message over %d bytes", MaxMessage)
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}

func (p *proxy) forward(ctx context.Context, line []byte, m message) {
	isRequest := len(m.ID) > 0 && m.Method != ""
	fail := func(format string, a ...any) {
		if isRequest {
			p.write(errorResponse(m.ID, -32000, fmt.Sprintf(format, a...)))
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.t.Endpoint, bytes.NewReader(line))
	if err != nil {
		fail("mcp stdio: %v", err)
		return
	}
	for k, vs := range p.t.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	p.mu.Lock()
	if p.version != "" {
		req.Header.Set("Mcp-Protocol-Version", p.version)
	}
	if p.session != "" {
		req.Header.Set("Mcp-Session-Id", p.session)
	}
	p.mu.Unlock()
	resp, err := p.t.Client.Do(req)
	if err != nil {
		fail("mcp stdio: the Paperclip endpoint is unreachable: %v", err)
		return
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		p.mu.Lock()
		p.session = sid
		p.mu.Unlock()
	}
	body := io.LimitReader(resp.Body, MaxMessage)
	if resp.StatusCode == http.StatusAccepted {
		return
	}
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(body, 4096))
		fail("mcp stdio: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(raw)))
		return
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		raw, err := io.ReadAll(body)
		if err != nil {
			fail("mcp stdio: read answer: %v", err)
			return
		}
		p.deliver(raw, m)
	case "text/event-stream":
		if err := readEvents(body, func(data []byte) { p.deliver(data, m) }); err != nil {
			fail("mcp stdio: read event stream: %v", err)
		}
	default:
		fail("mcp stdio: unexpected answer type %q", ct)
	}
}

// deliver writes one answer, noting the protocol version an initialize
// result negotiates.
func (p *proxy) deliver(raw []byte, m message) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	if m.Method == "initialize" {
		var res struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(raw, &res) == nil && res.Result.ProtocolVersion != "" {
			p.mu.Lock()
			p.version = res.Result.ProtocolVersion
			p.mu.Unlock()
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return
	}
	p.write(buf.Bytes())
}

func (p *proxy) write(b []byte) {
	p.outMu.Lock()
	defer p.outMu.Unlock()
	_, _ = p.out.Write(append(b, '\n'))
}

// readEvents calls fn with the data of each server-sent event.
func readEvents(r io.Reader, fn func([]byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxMessage)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				fn(data)
				data = nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	if len(data) > 0 {
		fn(data)
	}
	return sc.Err()
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	return b
}
