package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/mcpserver"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestAdapterSecretsAreWriteOnly is the canary over every route that
// returns agents, the MCP tools and catalog, the web UI's agent pages and
// the agent row: process env values and http header values are accepted,
// reach the run (env) and the agent's endpoint (headers), are vaulted (not
// stored in the agent row) and are never returned — not to board users
// (a viewer included), not to any run token, not through MCP — nor left in
// the run log. Sending
// the mask back keeps a value.
func TestAdapterSecretsAreWriteOnly(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		canary := "canary-env-" + testkit.NewUUID()
		headerCanary := "canary-header-" + testkit.NewUUID()
		dir := t.TempDir()
		// The expected value reaches the script through a file, not its
		// (readable) arguments.
		if err := os.WriteFile(filepath.Join(dir, "expected"), []byte(canary), 0o600); err != nil {
			t.Fatal(err)
		}
		script := `[ "$API_TOKEN" = "$(cat ` + dir + `/expected)" ] && echo env-ok; echo "printed:$API_TOKEN"; ` +
			`printf %s "$PAPERCLIP_API_KEY" > ` + dir + `/t.tmp && mv ` + dir + `/t.tmp ` + dir + `/token; ` +
			`while [ ! -e ` + dir + `/release ]; do sleep 0.05; done`
		cfg := map[string]any{"command": "/bin/sh", "args": []string{"-c", script}, "env": map[string]string{"API_TOKEN": canary, "PLAIN": ""}}
		patched := e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"adapterConfig": cfg}, 200)
		if env := patched["adapterConfig"].(map[string]any)["env"].(map[string]any); env["API_TOKEN"] != "********" {
			t.Fatalf("env in the PATCH answer: %v", env)
		}
		var mu sync.Mutex
		var gotHeader string
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			gotHeader = r.Header.Get("X-Api-Key")
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
		}))
		defer hook.Close()
		httpAgent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/agents", map[string]any{"name": "Hook",
			"adapterType": "http", "adapterConfig": map[string]any{"url": hook.URL, "headers": map[string]string{"X-Api-Key": headerCanary}}}, 201))
		sum := e.Setup("canary", nil)
		testkit.Eventually(t, 30*time.Second, "a subscribed WebSocket", func() bool { return e.Inbound.SocketConnected(sum["id"].(string)) })

		// The agent row holds no value; the vault does.
		for _, id := range []string{e.AgentID, httpAgent} {
			a, err := e.Store.GetAgent(context.Background(), e.Store.DB, id)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(a.AdapterConfig), canary) || strings.Contains(string(a.AdapterConfig), headerCanary) {
				t.Fatalf("a write-only value is stored in the agent row: %s", a.AdapterConfig)
			}
		}

		task := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Canary", "assigneeAgentId": e.AgentID}, 201))
		run := testkit.ID(e.Board.JSON("POST", "/api/agents/"+e.AgentID+"/wakeup", map[string]any{"reason": "test", "issueId": task}, 202))
		var token string
		testkit.Eventually(t, 30*time.Second, "the agent's token", func() bool {
			b, err := os.ReadFile(filepath.Join(dir, "token"))
			token = string(b)
			return err == nil && token != ""
		})
		agent := e.Board.As(token, run)
		agentReads := []string{"/api/agents/" + e.AgentID, "/api/agents/" + httpAgent, "/api/companies/" + e.CompanyID + "/agents",
			"/api/companies/" + e.CompanyID + "/heartbeat-runs", "/api/heartbeat-runs/" + run, "/api/issues/" + task,
			"/api/companies/" + e.CompanyID + "/email/inboxes"}
		for _, p := range agentReads {
			agent.Do("GET", p, nil)
		}
		// MCP: every tool listing, the whole catalog and every agent-callable
		// read in it.
		s := mcpSession(t, e.URL(), token)
		seen := strings.Join(toolNames(t, s), ",")
		text, _ := callTool(t, s, "search_api", map[string]any{"query": ""})
		seen += text
		for _, op := range mcpserver.Catalog {
			if op.Method != "GET" || op.BoardOnly {
				continue
			}
			params := map[string]string{}
			for _, p := range op.PathParams {
				params[p] = task
			}
			text, _ := callTool(t, s, "call_api", map[string]any{"operationId": op.OperationID, "pathParams": params})
			seen += text
		}
		for _, tool := range []string{"agentmail_inboxes"} {
			text, _ := callTool(t, s, tool, map[string]any{})
			seen += text
		}
		_ = os.WriteFile(filepath.Join(dir, "release"), nil, 0o600)
		testkit.Eventually(t, 30*time.Second, "the run to finish", func() bool {
			return e.Board.JSON("GET", "/api/heartbeat-runs/"+run, nil, 200)["status"] == "succeeded"
		})
		log := e.Board.JSON("GET", "/api/heartbeat-runs/"+run+"/log", nil, 200)["content"].(string)
		if !strings.Contains(log, "env-ok") || !strings.Contains(log, "printed:********") {
			t.Fatalf("the run did not get the value, or the log was not masked: %q", log)
		}

		// The mask keeps the value: a PATCH of the masked config, then a
		// run of the http agent, which must send the real header.
		masked := e.Board.JSON("GET", "/api/agents/"+httpAgent, nil, 200)["adapterConfig"]
		e.Board.JSON("PATCH", "/api/agents/"+httpAgent, map[string]any{"adapterConfig": masked}, 200)
		hr := testkit.ID(e.Board.JSON("POST", "/api/agents/"+httpAgent+"/wakeup", map[string]any{"reason": "hook"}, 202))
		testkit.Eventually(t, 30*time.Second, "the http run", func() bool {
			return e.Board.JSON("GET", "/api/heartbeat-runs/"+hr, nil, 200)["status"] == "succeeded"
		})
		mu.Lock()
		if gotHeader != headerCanary {
			t.Fatalf("the http agent got header %q", gotHeader)
		}
		mu.Unlock()

		// Board reads: every agent route, activity, secrets, runs, the UI.
		for _, p := range []string{"/api/agents/" + e.AgentID, "/api/agents/" + httpAgent, "/api/companies/" + e.CompanyID + "/agents",
			"/api/companies/" + e.CompanyID + "/activity", "/api/companies/" + e.CompanyID + "/secrets",
			"/api/companies/" + e.CompanyID + "/heartbeat-runs", "/api/heartbeat-runs/" + hr + "/log",
			"/c/" + e.CompanyID + "/agents", "/c/" + e.CompanyID + "/agents/" + e.AgentID, "/c/" + e.CompanyID + "/agents/" + e.AgentID + "/edit",
			"/c/" + e.CompanyID + "/agents/" + httpAgent + "/edit", "/c/" + e.CompanyID + "/activity"} {
			if st, body := e.Board.Do("GET", p, nil); st != 200 {
				t.Fatalf("GET %s: %d %s", p, st, body)
			}
		}
		// A viewer reads every agent route, activity and runs with its own
		// key: 200, and no value.
		vm := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/members", map[string]any{"email": "viewer@example.com", "role": "viewer"}, 201)
		viewer := e.Board.As(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/board-keys", map[string]any{"userId": vm["userId"]}, 201)["token"].(string), "")
		for _, p := range []string{"/api/agents/" + e.AgentID, "/api/agents/" + httpAgent, "/api/companies/" + e.CompanyID + "/agents",
			"/api/companies/" + e.CompanyID + "/activity", "/api/companies/" + e.CompanyID + "/heartbeat-runs",
			"/api/heartbeat-runs/" + run, "/api/heartbeat-runs/" + run + "/log", "/api/heartbeat-runs/" + hr + "/log"} {
			if st, body := viewer.Do("GET", p, nil); st != 200 {
				t.Fatalf("viewer GET %s: %d %s", p, st, body)
			}
		}
		if env := viewer.JSON("GET", "/api/agents/"+e.AgentID, nil, 200)["adapterConfig"].(map[string]any)["env"].(map[string]any); env["API_TOKEN"] != "********" {
			t.Fatalf("the viewer's agent env: %v", env)
		}
		all := e.Board.Seen.String() + agent.Seen.String() + viewer.Seen.String() + seen
		for _, c := range []string{canary, headerCanary} {
			if strings.Contains(all, c) {
				t.Fatalf("a write-only value was returned")
			}
		}
	})
}
