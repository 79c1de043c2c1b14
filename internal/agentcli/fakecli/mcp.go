package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// server is our MCP server's entry of a CLI configuration.
type server struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// connect opens an MCP session the way the real CLI would for s.
func connect(ctx context.Context, s server) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "fakecli", Version: "1"}, nil)
	if s.URL != "" {
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: headerTransport{headers: s.Headers, next: http.DefaultTransport}}}, nil)
	}
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	return client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
}

// call runs one tool and returns its text; a tool error is an error.
func call(ctx context.Context, s *mcp.ClientSession, name string, args any) (string, error) {
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	if res.IsError {
		return b.String(), fmt.Errorf("%s: %s", name, b.String())
	}
	return b.String(), nil
}

type thread struct {
	ConversationID string `json:"conversationId"`
	Subject        string `json:"subject"`
	Endpoint       struct {
		ID string `json:"id"`
	} `json:"endpoint"`
	Messages []struct {
		ProviderMessageID string `json:"providerMessageId"`
		Text              string `json:"text"`
		Direction         string `json:"direction"`
		Automatic         bool   `json:"automatic"`
	} `json:"messages"`
	Publications []struct {
		Request struct {
			ReplyToMessageID string `json:"replyToMessageId"`
		} `json:"request"`
	} `json:"publications"`
}

// toolEvent reports one MCP tool call to the CLI's event stream.
type toolEvent func(tool string, args any, result string, err error)

// open connects to the MCP server and lists its tools.
func open(ctx context.Context, r *record, s server) (*mcp.ClientSession, map[string]bool, error) {
	sess, err := connect(ctx, s)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the MCP server: %w", err)
	}
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("list tools: %w", err)
	}
	has := map[string]bool{}
	for _, t := range tools.Tools {
		r.Tools = append(r.Tools, t.Name)
		has[t.Name] = true
	}
	return sess, has, nil
}

// answer is the fake agent's job: answer the newest unanswered inbound
// email of the task's thread, check its delivery and note it on the task.
func answer(ctx context.Context, r *record, sess *mcp.ClientSession, label string, ev toolEvent) error {
	invoke := func(tool string, args any) (string, error) {
		out, err := call(ctx, sess, tool, args)
		ev(tool, args, out, err)
		return out, err
	}
	out, err := invoke("agentmail_read_thread", map[string]any{})
	if err != nil {
		return err
	}
	var th *thread
	if err := json.Unmarshal([]byte(out), &th); err != nil || th == nil {
		return err
	}
	answered := map[string]bool{}
	for _, p := range th.Publications {
		answered[p.Request.ReplyToMessageID] = true
	}
	for i := len(th.Messages) - 1; i >= 0; i-- {
		m := th.Messages[i]
		if m.Direction != "inbound" || m.Automatic || answered[m.ProviderMessageID] {
			continue
		}
		text := fmt.Sprintf("%s (session %s, turn %d) read your message: %q", label, r.SessionID, r.Turn, strings.TrimSpace(m.Text))
		req := map[string]any{"endpointId": th.Endpoint.ID, "conversationId": th.ConversationID, "replyToMessageId": m.ProviderMessageID,
			"replyAll": false, "text": text, "idempotencyKey": stableUUID(th.ConversationID + "|" + m.ProviderMessageID)}
		out, err := invoke("agentmail_send", map[string]any{"request": req})
		if err != nil {
			return err
		}
		var pub struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(out), &pub); err != nil || pub.ID == "" {
			return errors.New("agentmail_send returned no publication")
		}
		if _, err := invoke("agentmail_delivery", map[string]any{"publicationId": pub.ID}); err != nil {
			return err
		}
		r.Replied = pub.ID
		_, err = invoke("call_api", map[string]any{"operationId": "issues.addComment",
			"pathParams": map[string]string{"issueId": os.Getenv("PAPERCLIP_TASK_ID")},
			"body":       map[string]string{"body": "Answered the email (publication " + pub.ID + ")."}})
		return err
	}
	return nil
}

func stableUUID(s string) string {
	sum := sha256.Sum256([]byte("fakecli:" + s))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}
