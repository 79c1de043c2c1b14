package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Issue 28 item 11: the MCP email tools obey the email channel's gate
// like the HTTP routes. With experimental email connections switched off
// after an inbox was set up, an agent's agentmail_send, read_thread and
// delivery calls are refused and nothing is queued.
func TestMCPEmailToolsObeyTheEmailSwitch(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e, token, _, task, _ := blockingAgentEnv(t, url)
		ep := e.Setup("gated", nil)
		s := mcpSession(t, e.URL(), token)
		e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": false}}, 200)
		// The HTTP send route is closed...
		req := map[string]any{"endpointId": ep["id"], "parentIssueId": task, "to": []string{"lead@example.com"}, "subject": "Hi",
			"text": "Hello", "idempotencyKey": testkit.NewUUID()}
		if st, body := e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/send", req); st != 403 || !strings.Contains(string(body), "turned off") {
			t.Fatalf("HTTP send while switched off: %d %s", st, body)
		}
		// ...and so are the MCP tools.
		if text, isErr := callTool(t, s, "agentmail_send", map[string]any{"request": req}); !isErr || !strings.Contains(text, "turned off") {
			t.Fatalf("MCP send while switched off: %v %s", isErr, text)
		}
		if text, isErr := callTool(t, s, "agentmail_read_thread", map[string]any{}); !isErr || !strings.Contains(text, "turned off") {
			t.Fatalf("MCP thread read while switched off: %v %s", isErr, text)
		}
		if text, isErr := callTool(t, s, "agentmail_delivery", map[string]any{"publicationId": testkit.NewUUID()}); !isErr || !strings.Contains(text, "turned off") {
			t.Fatalf("MCP delivery read while switched off: %v %s", isErr, text)
		}
		var n int
		if err := e.DB.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM email_publications`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 || len(e.Em.Outbox("", "")) != 0 {
			t.Fatalf("a send got through the switched-off channel: %d publications, %d mails", n, len(e.Em.Outbox("", "")))
		}
	})
}
