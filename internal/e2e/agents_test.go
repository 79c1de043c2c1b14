package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// exampleAgentEnv is an email env whose agent runs a built-in example agent.
func exampleAgentEnv(t *testing.T, url, mode string) (*testkit.EmailEnv, map[string]any) {
	t.Helper()
	e := testkit.NewEmailEnv(t, url)
	// The agent keeps a copy of the skill it was given (its run directory
	// is removed when the run ends), then runs the example agent.
	copies := filepath.Join(e.Home, "skill-copies")
	if err := os.Mkdir(copies, 0o700); err != nil {
		t.Fatal(err)
	}
	script := `cp -p "$PAPERCLIP_SKILLS_DIR/agentmail/SKILL.md" "` + copies + `/$PAPERCLIP_RUN_ID.md" 2>/dev/null; exec "$0" example-agent ` + mode
	e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"adapterConfig": map[string]any{
		"command": "/bin/sh", "args": []string{"-c", script, testkit.Binary(t)}, "timeoutSec": 60}}, 200)
	return e, e.Setup("helpdesk", nil)
}

// waitOutbox waits for n messages to a recipient; on timeout it reports
// the runs and the server's log so the cause is visible.
func waitOutbox(t *testing.T, e *testkit.EmailEnv, to string, n int) []emulator.OutboxMessage {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := e.Em.Outbox(to, "")
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			runs, _ := json.Marshal(e.Board.List("/api/companies/" + e.CompanyID + "/heartbeat-runs"))
			var lines []string
			for _, l := range strings.Split(e.Logs.String(), "\n") {
				if !strings.Contains(l, "http request") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Fatalf("no reply to %s after 60s\nruns: %s\nlog:\n%s", to, runs, strings.Join(lines, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A real agent process answers inbound mail through the CLI
// (`paperclipai email thread` / `email reply`) and through the MCP tools.
func TestAgentRepliesThroughCLIAndMCP(t *testing.T) {
	for _, mode := range []string{"autoreply", "mcp-autoreply"} {
		t.Run(mode, func(t *testing.T) {
			dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
				e, ep := exampleAgentEnv(t, url, mode)
				res, err := e.Em.Deliver("helpdesk@agentmail.to", emulator.DeliverRequest{From: "Alice <alice@example.com>",
					Cc: []string{"bob@example.com"}, Subject: "Order 42", Text: "Where is my order?"})
				if err != nil {
					t.Fatal(err)
				}
				out := waitOutbox(t, e, "alice@example.com", 1)
				reply := out[0]
				if reply.InReplyTo != res.MessageID || reply.ThreadID != res.ThreadID || len(reply.Cc) != 0 || len(reply.Bcc) != 0 {
					t.Fatalf("reply threading/recipients: in-reply-to %q (want %q), cc %v, bcc %v", reply.InReplyTo, res.MessageID, reply.Cc, reply.Bcc)
				}
				if reply.Headers["Auto-Submitted"] != "auto-replied" || reply.Headers["X-Paperclip-Publication-Id"] != reply.IdempotencyKey {
					t.Fatalf("loop-guard and publication headers: %v", reply.Headers)
				}
				if len(e.Em.Outbox("bob@example.com", "")) != 0 {
					t.Fatal("reply-all was not requested, yet cc got mail")
				}
				issues := e.Board.List("/api/companies/" + e.CompanyID + "/issues?originKind=chat_channel")
				if len(issues) != 1 {
					t.Fatalf("want one email task, got %d", len(issues))
				}
				task := testkit.ID(issues[0])
				var d map[string]any
				testkit.Eventually(t, 30*time.Second, "delivery receipt", func() bool {
					d = e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/deliveries/"+reply.IdempotencyKey, nil, 200)
					return d["outcome"] == "delivered"
				})
				// The example agent completes its task after answering.
				testkit.Eventually(t, 30*time.Second, "the task marked done", func() bool {
					return e.Board.JSON("GET", "/api/issues/"+task, nil, 200)["status"] == "done"
				})
				// The run got the read-only skill listing the inbox, never a key.
				runs := e.Board.List("/api/companies/" + e.CompanyID + "/heartbeat-runs?issueId=" + task)
				if len(runs) == 0 || runs[len(runs)-1]["wakeReason"] != "email_received" {
					t.Fatalf("runs: %v", runs)
				}
				last := testkit.ID(runs[len(runs)-1])
				// The run's directory goes once its outcome is recorded.
				testkit.Eventually(t, 30*time.Second, "the run's directory removed", func() bool {
					_, err := os.Stat(filepath.Join(e.Home, "instance", "runs", last))
					return os.IsNotExist(err)
				})
				skill := filepath.Join(e.Home, "skill-copies", last+".md")
				info, err := os.Stat(skill)
				if err != nil || info.Mode().Perm() != 0o444 {
					t.Fatalf("skill file: %v %v", info, err)
				}
				body, _ := os.ReadFile(skill)
				if !strings.Contains(string(body), ep["id"].(string)) || !strings.Contains(string(body), "agentmail_send") || strings.Contains(string(body), e.OrgKey) {
					t.Fatalf("skill content wrong or leaks the key")
				}
				// Comments never go out as email.
				before := len(e.Em.Outbox("", ""))
				e.Board.JSON("POST", "/api/issues/"+task+"/comments", map[string]any{"body": "Please also tell Alice the ETA."}, 201)
				time.Sleep(300 * time.Millisecond)
				if after := len(e.Em.Outbox("", "")); after != before {
					t.Fatalf("a comment produced email: %d → %d", before, after)
				}
			})
		})
	}
}

// blockingAgentEnv wakes an agent that holds its run open and returns the
// run token, so the test can act as the agent.
func blockingAgentEnv(t *testing.T, url string) (*testkit.EmailEnv, string, string, string, func()) {
	t.Helper()
	e := testkit.NewEmailEnv(t, url)
	dir := t.TempDir()
	script := `printf %s "$PAPERCLIP_API_KEY" > ` + dir + `/t.tmp && mv ` + dir + `/t.tmp ` + dir + `/token; while [ ! -e ` + dir + `/release ]; do sleep 0.05; done`
	e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}}}, 200)
	task := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Outreach", "assigneeAgentId": e.AgentID}, 201))
	run := e.Board.JSON("POST", "/api/agents/"+e.AgentID+"/wakeup", map[string]any{"reason": "test", "issueId": task}, 202)
	var token string
	testkit.Eventually(t, 30*time.Second, "the agent's token", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "token"))
		token = string(b)
		return err == nil && token != ""
	})
	release := func() { _ = os.WriteFile(filepath.Join(dir, "release"), nil, 0o600) }
	t.Cleanup(release)
	return e, token, testkit.ID(run), task, release
}

func mcpSession(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
	s, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func callTool(t *testing.T, s *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// Tools exist only with an active,
// authorized inbox and are re-checked on every call; sends must belong to
// the run's task; board-only catalog operations refuse agents.
func TestMCPToolsFollowTheInboxAssignment(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e, token, runID, task, release := blockingAgentEnv(t, url)
		s := mcpSession(t, e.URL(), token)
		if names := strings.Join(toolNames(t, s), ","); strings.Contains(names, "agentmail_") || !strings.Contains(names, "search_api") {
			t.Fatalf("without an inbox the agent gets no email tools: %s", names)
		}
		ep := e.Setup("outreach", nil)
		s = mcpSession(t, e.URL(), token)
		if names := strings.Join(toolNames(t, s), ","); !strings.Contains(names, "agentmail_inboxes,agentmail_read_thread,agentmail_send,agentmail_delivery") &&
			!(strings.Contains(names, "agentmail_send") && strings.Contains(names, "agentmail_delivery")) {
			t.Fatalf("tools: %s", names)
		}
		text, isErr := callTool(t, s, "agentmail_inboxes", map[string]any{})
		if isErr || !strings.Contains(text, ep["id"].(string)) {
			t.Fatalf("inboxes: %s", text)
		}
		if text, isErr := callTool(t, s, "agentmail_read_thread", map[string]any{}); isErr || text != "null" {
			t.Fatalf("thread of a task without email: %q", text)
		}
		// A send for another task is refused; one for the run's task is queued.
		other := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "x", "assigneeAgentId": e.AgentID}, 201))
		req := map[string]any{"endpointId": ep["id"], "parentIssueId": other, "to": []string{"lead@example.com"}, "subject": "Hi",
			"text": "Hello", "idempotencyKey": testkit.NewUUID()}
		if text, isErr := callTool(t, s, "agentmail_send", map[string]any{"request": req}); !isErr || !strings.Contains(text, "current task") {
			t.Fatalf("send for another task: %s", text)
		}
		req["parentIssueId"] = task
		text, isErr = callTool(t, s, "agentmail_send", map[string]any{"request": req})
		var pub map[string]any
		if isErr || json.Unmarshal([]byte(text), &pub) != nil || pub["outcome"] != "queued" {
			t.Fatalf("send: %s", text)
		}
		if text, isErr := callTool(t, s, "agentmail_delivery", map[string]any{"publicationId": pub["id"]}); isErr || !strings.Contains(text, pub["id"].(string)) {
			t.Fatalf("delivery: %s", text)
		}
		// The same read by the send's new name; two different ids are refused.
		if text, isErr := callTool(t, s, "agentmail_delivery", map[string]any{"sendId": pub["id"]}); isErr || !strings.Contains(text, pub["id"].(string)) {
			t.Fatalf("delivery by sendId: %s", text)
		}
		if text, isErr := callTool(t, s, "agentmail_delivery", map[string]any{"sendId": pub["id"], "publicationId": testkit.NewUUID()}); !isErr || !strings.Contains(text, "different sends") {
			t.Fatalf("delivery by two ids: %s", text)
		}
		if text, isErr := callTool(t, s, "call_api", map[string]any{"operationId": "email.delivery", "pathParams": map[string]string{"sendId": pub["id"].(string)}}); isErr || !strings.Contains(text, pub["id"].(string)) {
			t.Fatalf("call_api email.delivery by sendId: %s", text)
		}
		waitOutbox(t, e, "lead@example.com", 1)
		// The catalog: board-only operations refuse; normal ones act as the run.
		if text, isErr := callTool(t, s, "search_api", map[string]any{"query": "email send"}); isErr || !strings.Contains(text, `"successStatus":202`) {
			t.Fatalf("search_api: %s", text)
		}
		if text, isErr := callTool(t, s, "call_api", map[string]any{"operationId": "email.inspectKey", "body": map[string]any{"apiKey": "x"}}); !isErr || !strings.Contains(text, "board users only") {
			t.Fatalf("board-only op: %s", text)
		}
		text, isErr = callTool(t, s, "call_api", map[string]any{"operationId": "issues.addComment", "pathParams": map[string]string{"issueId": task},
			"body": map[string]any{"body": "via call_api"}})
		if isErr || !strings.Contains(text, `"runId":"`+runID+`"`) {
			t.Fatalf("call_api comment: %s", text)
		}
		// Pausing the inbox removes the tools' authority at once.
		e.Control(t, ep["id"].(string), "pause")
		if text, isErr := callTool(t, s, "agentmail_inboxes", map[string]any{}); !isErr || !strings.Contains(text, "no longer assigned or authorized") {
			t.Fatalf("after pause: %s", text)
		}
		release()
		// After the run ends its token no longer opens the tool endpoint.
		testkit.Eventually(t, 30*time.Second, "run end", func() bool {
			return e.Board.JSON("GET", "/api/heartbeat-runs/"+runID, nil, 200)["status"] != "running"
		})
		client := mcp.NewClient(&mcp.Implementation{Name: "late", Version: "1"}, nil)
		hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+token)
			return http.DefaultTransport.RoundTrip(r)
		})}
		if _, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.URL() + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil); err == nil {
			t.Fatal("a finished run's token must not connect")
		}
	})
}

// An agent's send needs its running run bound
// to the task at acceptance, and its authority (here the budget) is checked
// again when the send executes.
func TestAgentSendAuthority(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e, token, runID, task, _ := blockingAgentEnv(t, url)
		ep := e.Setup("agentbox", nil)
		agent := e.Board.As(token, runID)
		sendPath := "/api/companies/" + e.CompanyID + "/email/send"
		req := func(parent, key string) map[string]any {
			return map[string]any{"endpointId": ep["id"], "parentIssueId": parent, "to": []string{"lead@example.com"},
				"subject": "Intro", "text": "Hello", "idempotencyKey": key}
		}
		// Not the run's task, and without the run id: refused.
		other := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "x", "assigneeAgentId": e.AgentID}, 201))
		if st, body := agent.Do("POST", sendPath, req(other, testkit.NewUUID())); st != 403 || !strings.Contains(string(body), "does not belong to this task run") {
			t.Fatalf("send for another task: %d %s", st, body)
		}
		if st, _ := e.Board.As(token, "").Do("POST", sendPath, req(task, testkit.NewUUID())); st != 403 {
			t.Fatalf("agent write without run id: %d", st)
		}
		// Queue a send while its thread is busy, exhaust the budget, then let
		// the worker run it: it fails without any provider call.
		key := testkit.NewUUID()
		ctx := context.Background()
		lease, _, err := e.Store.TryLease(ctx, e.DB, e.CompanyID, ep["id"].(string), store.ThreadLeaseKey("pending:"+key), "test", time.Minute)
		if err != nil || lease == nil {
			t.Fatalf("hold the thread: %v %v", lease, err)
		}
		acc := agent.JSON("POST", sendPath, req(task, key), 202)
		if acc["outcome"] != "queued" {
			t.Fatalf("acceptance: %v", acc)
		}
		e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"budgetMonthlyCents": 100}, 200)
		e.SetSpend(t, e.AgentID, 100)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		e.Outbound.Notify()
		var d map[string]any
		testkit.Eventually(t, 30*time.Second, "the send to fail", func() bool {
			d = e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/deliveries/"+key, nil, 200)
			return d["outcome"] == "failed"
		})
		if !strings.Contains(d["error"].(string), "Agent is not available to send email") {
			t.Fatalf("failure reason: %v", d["error"])
		}
		for _, r := range e.Em.Requests("/v0/inboxes/agentbox@agentmail.to/messages/send") {
			if r.IdempotencyKey != nil && *r.IdempotencyKey == key {
				t.Fatal("the provider was called for a send that lost its authority")
			}
		}
	})
}
