package email_test

import (
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Issue 9 item 13: a provider key with CR/LF and control characters in
// user text are 400 with a clear message, never 500, on every route that
// takes them; tabs and line breaks stay allowed in multi-line text.
func TestControlCharactersRefused(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		sum := e.Setup("texty", nil)
		epID := testkit.ID(sum)
		conn := testkit.ID(e.Board.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "idempotencyKey": testkit.NewUUID()}, 201))
		issue := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Parent"}, 201))
		company := "/api/companies/" + e.CompanyID
		cases := []struct {
			name, method, path string
			body               map[string]any
			want               string
		}{
			{"key with CRLF: inspect", "POST", company + "/email/inspect", map[string]any{"apiKey": e.OrgKey + "\r\n"}, "line break"},
			{"key with LF: connect", "POST", connectionsPath(e), map[string]any{"apiKey": "am_x\nX-Evil: 1", "idempotencyKey": testkit.NewUUID()}, "line break"},
			{"key with CRLF: setup", "POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey + "\r\n",
				"username": "crlf", "idempotencyKey": testkit.NewUUID()}, "line break"},
			{"key with CRLF: reconnect", "POST", "/api/email/inboxes/" + epID + "/reconnect", map[string]any{"apiKey": "\r\n" + e.OrgKey, "receiveMode": "websocket"}, "line break"},
			{"check-address domain", "POST", connectionsPath(e) + "/" + conn + "/check-address", map[string]any{"username": "ok", "domain": "agentmail.to\r\nx"}, "domain"},
			{"check-address NUL", "POST", connectionsPath(e) + "/" + conn + "/check-address", map[string]any{"username": "ok\x00", "domain": "agentmail.to"}, "NUL"},
			{"connection name", "POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "name": "a\nb", "idempotencyKey": testkit.NewUUID()}, "line break"},
			{"send subject NUL", "POST", company + "/email/send", map[string]any{"endpointId": epID, "parentIssueId": issue, "to": []string{"a@example.com"},
				"subject": "Hi\x00", "text": "x", "idempotencyKey": testkit.NewUUID()}, "NUL"},
			{"send text escape", "POST", company + "/email/send", map[string]any{"endpointId": epID, "parentIssueId": issue, "to": []string{"a@example.com"},
				"subject": "Hi", "text": "x\x1b[2J", "idempotencyKey": testkit.NewUUID()}, "U+001B"},
			{"send address C1", "POST", company + "/email/send", map[string]any{"endpointId": epID, "parentIssueId": issue, "to": []string{"a\u0085@example.com"},
				"subject": "Hi", "text": "x", "idempotencyKey": testkit.NewUUID()}, "U+0085"},
			{"company name NUL", "POST", "/api/companies", map[string]any{"name": "Acme\x00"}, "NUL"},
			{"company name newline", "POST", "/api/companies", map[string]any{"name": "Acme\nInc"}, "line break"},
			{"agent name", "POST", company + "/agents", map[string]any{"name": "A\rB", "adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, "line break"},
			{"task description NUL", "POST", company + "/issues", map[string]any{"title": "T", "description": "a\x00b"}, `description\" contains a NUL`},
			{"comment bell", "POST", "/api/issues/" + issue + "/comments", map[string]any{"body": "ding\a"}, "U+0007"},
			{"member email", "POST", company + "/members", map[string]any{"email": "x\u0085y@example.com", "role": "viewer"}, "U+0085"},
		}
		for _, c := range cases {
			st, out := e.Board.Do(c.method, c.path, c.body)
			if st != 400 || !strings.Contains(string(out), c.want) {
				t.Errorf("%s: %d %s, want 400 mentioning %q", c.name, st, out, c.want)
			}
		}
		// Tabs and line breaks stay allowed in text.
		e.Board.JSON("POST", "/api/issues/"+issue+"/comments", map[string]any{"body": "col1\tcol2\r\nline two\n"}, 201)
		e.Board.JSON("POST", company+"/email/send", map[string]any{"endpointId": epID, "parentIssueId": issue, "to": []string{"a@example.com"},
			"subject": "Tabs\tok", "text": "Hello,\n\n\tindented\r\n", "idempotencyKey": testkit.NewUUID()}, 202)
		if strings.Contains(e.Logs.String(), "request failed") {
			t.Fatalf("a refused input reached a 500: %s", e.Logs.String())
		}
	})
}
