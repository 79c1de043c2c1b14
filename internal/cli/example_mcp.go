package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
)

// bearer adds the run token to every MCP request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// toolJSON calls a tool and decodes its JSON text result into out.
func toolJSON(ctx context.Context, s *mcp.ClientSession, name string, args any, out any) error {
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", name, text.String())
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal([]byte(text.String()), out)
}

func newMCPAutoreplyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp-autoreply",
		Short: "Like autoreply, but through the MCP tools agentmail_read_thread / agentmail_send / agentmail_delivery / call_api",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := config.LoadClient(nil)
			api, token := env.APIURL, env.APIKey
			if api == "" || token == "" {
				return errors.New("PAPERCLIP_API_URL and PAPERCLIP_API_KEY must be set: run me as an agent")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			endpoint := strings.TrimSuffix(strings.TrimRight(api, "/"), "/api") + "/mcp"
			client := mcp.NewClient(&mcp.Implementation{Name: "paperclip-example-agent", Version: "1"}, nil)
			session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true,
				HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}, nil)
			if err != nil {
				return fmt.Errorf("connect to %s: %w", endpoint, err)
			}
			defer session.Close()
			var th *threadView
			if err := toolJSON(ctx, session, "agentmail_read_thread", map[string]any{}, &th); err != nil {
				return err
			}
			if th == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "task has no email thread; nothing to do")
				return nil
			}
			task := env.TaskID
			done := func() error {
				if task == "" {
					return nil
				}
				return toolJSON(ctx, session, "call_api", map[string]any{"operationId": "issues.update",
					"pathParams": map[string]string{"issueId": task}, "body": json.RawMessage(doneRequest)}, nil)
			}
			m, ok := th.nextUnanswered()
			if !ok {
				fmt.Fprintln(cmd.OutOrStdout(), "no unanswered inbound email")
				return done()
			}
			req := map[string]any{"endpointId": th.Endpoint.ID, "conversationId": th.ConversationID,
				"replyToMessageId": m.ProviderMessageID, "text": "Received via MCP: " + strings.TrimSpace(m.Text),
				"idempotencyKey": stableUUID("mcp|" + th.ConversationID + "|" + m.ProviderMessageID)}
			var pub struct {
				ID      string `json:"id"`
				Outcome string `json:"outcome"`
			}
			if err := toolJSON(ctx, session, "agentmail_send", map[string]any{"request": req}, &pub); err != nil {
				return err
			}
			var d map[string]any
			if err := toolJSON(ctx, session, "agentmail_delivery", map[string]any{"publicationId": pub.ID}, &d); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replied through MCP: publication %s is %v\n", pub.ID, d["outcome"])
			return done()
		},
	}
}
