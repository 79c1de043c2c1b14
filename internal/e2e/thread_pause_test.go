package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// While its inbox is paused an agent reads the thread of its email task
// neither over HTTP (`paperclipai email thread`) nor through the MCP tool,
// and both say it is paused; after resuming both read it again. Board
// users read it throughout.
func TestPausedInboxThreadReadsAgree(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		dir := t.TempDir()
		script := `printf %s "$PAPERCLIP_API_KEY:$PAPERCLIP_RUN_ID:$PAPERCLIP_TASK_ID" > ` + dir + `/t.tmp && mv ` + dir + `/t.tmp ` + dir +
			`/token; while [ ! -e ` + dir + `/release ]; do sleep 0.05; done`
		e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}}}, 200)
		ep := e.Setup("pausable", nil)
		t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "release"), nil, 0o600) })
		if _, err := e.Em.Deliver(ep["address"].(string), emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "Paused?", Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		var parts []string
		testkit.Eventually(t, 30*time.Second, "the email run's token", func() bool {
			b, err := os.ReadFile(filepath.Join(dir, "token"))
			parts = strings.Split(string(b), ":")
			return err == nil && len(parts) == 3 && parts[2] != ""
		})
		token, runID, task := parts[0], parts[1], parts[2]
		agent := e.Board.As(token, runID)
		threadPath := "/api/companies/" + e.CompanyID + "/email/tasks/" + task
		s := mcpSession(t, e.URL(), token)
		if text, isErr := callTool(t, s, "agentmail_read_thread", map[string]any{}); isErr || !strings.Contains(text, `"subject":"Paused?"`) {
			t.Fatalf("MCP thread read while active: %s", text)
		}
		agent.JSON("GET", threadPath, nil, 200)

		e.Control(t, ep["id"].(string), "pause")
		st, body := agent.Do("GET", threadPath, nil)
		if st != 409 || !strings.Contains(string(body), "This email inbox is paused") || !strings.Contains(string(body), `"code":"inbox_paused"`) {
			t.Fatalf("HTTP thread read while paused: %d %s", st, body)
		}
		if text, isErr := callTool(t, s, "agentmail_read_thread", map[string]any{}); !isErr || !strings.Contains(text, "This email inbox is paused") {
			t.Fatalf("MCP thread read while paused: %s", text)
		}
		e.Board.JSON("GET", threadPath, nil, 200)

		e.Control(t, ep["id"].(string), "resume")
		agent.JSON("GET", threadPath, nil, 200)
		if text, isErr := callTool(t, s, "agentmail_read_thread", map[string]any{}); isErr || !strings.Contains(text, `"subject":"Paused?"`) {
			t.Fatalf("MCP thread read after resume: %s", text)
		}
	})
}
