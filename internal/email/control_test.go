package email_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func installsOf(t *testing.T, c *testkit.Client, e *testkit.EmailEnv, connID string) []string {
	t.Helper()
	conn := c.JSON("GET", connectionsPath(e)+"/"+connID, nil, 200)
	var out []string
	list, _ := conn["installs"].([]any)
	for _, i := range list {
		m := i.(map[string]any)
		out = append(out, m["targetType"].(string)+":"+m["targetId"].(string))
	}
	return out
}

// A credential created by the same setup request has
// its initial installs replaced by the final agent; a reused or edited one
// keeps its installs and gains the agent. Only tools:manage_connections is
// needed.
func TestSetupGivesTheFinalAgentAccess(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		mgr, _ := memberClient(t, e, "mgr@example.com")
		other := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/agents", map[string]any{"name": "Other", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		// New: the credential is created with the setup request id.
		setupID := testkit.NewUUID()
		conn := testkit.ID(mgr.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "grantKind": "organization",
			"agentIds": []string{other}, "idempotencyKey": setupID}, 201))
		req := map[string]any{"assignedAgentId": e.AgentID, "credentialConnectionId": conn, "username": "newacct", "idempotencyKey": setupID}
		mgr.JSON("POST", inboxesPath(e), req, 201)
		mgr.JSON("POST", inboxesPath(e), req, 201)
		if got := installsOf(t, mgr, e, conn); len(got) != 1 || got[0] != "agent:"+e.AgentID {
			t.Fatalf("new account: installs %v, want only the final agent", got)
		}
		// Reused: another setup request keeps existing installs and adds.
		reused := testkit.ID(mgr.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "grantKind": "organization",
			"agentIds": []string{other}, "idempotencyKey": testkit.NewUUID()}, 201))
		mgr.JSON("POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "credentialConnectionId": reused, "username": "reused",
			"idempotencyKey": testkit.NewUUID()}, 201)
		if got := installsOf(t, mgr, e, reused); len(got) != 2 {
			t.Fatalf("reused account: both agents keep access: %v", got)
		}
		// Edited before setup to company-wide: preserved (no extra agent install needed).
		setup2 := testkit.NewUUID()
		edited := testkit.ID(mgr.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "grantKind": "organization",
			"agentIds": []string{other}, "idempotencyKey": setup2}, 201))
		mgr.JSON("POST", connectionsPath(e)+"/"+edited+"/installs", map[string]any{"targetType": "company"}, 201)
		mgr.JSON("POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "credentialConnectionId": edited, "username": "edited",
			"idempotencyKey": setup2}, 201)
		got := installsOf(t, mgr, e, edited)
		if len(got) != 2 || !strings.Contains(strings.Join(got, ","), "company:"+e.CompanyID) {
			t.Fatalf("edited permissions must be preserved: %v", got)
		}
		// Wrong company → 404.
		otherCo := testkit.ID(e.Board.JSON("POST", "/api/companies", map[string]any{"name": "Else"}, 201))
		if st, _ := e.Board.Do("POST", "/api/companies/"+otherCo+"/email/inboxes", map[string]any{"assignedAgentId": e.AgentID,
			"credentialConnectionId": conn, "idempotencyKey": testkit.NewUUID()}); st != 400 && st != 404 {
			t.Fatalf("wrong company: %d", st)
		}
	})
}

// Disconnect, with the canary: archived, resume refused,
// history kept, only Paperclip-owned registrations removed, the vaulted key
// gone unless another binding still uses it.
func TestDisconnect(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url, func(c *config.Config) { c.PublicURL = "https://paperclip.example.test" })
		ctx := context.Background()
		// A raw-key endpoint in webhook mode and a saved-credential endpoint.
		raw := e.Setup("rawbox", map[string]any{"receiveMode": "webhook"})
		conn := testkit.ID(e.Board.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "grantKind": "organization", "idempotencyKey": testkit.NewUUID()}, 201))
		saved := e.Board.JSON("POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "credentialConnectionId": conn,
			"username": "savedbox", "idempotencyKey": testkit.NewUUID()}, 201)
		var before int
		e.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM company_secrets WHERE status = 'active'`).Scan(&before)
		out := e.Board.JSON("POST", "/api/email/inboxes/"+raw["id"].(string)+"/control", map[string]any{"action": "remove"}, 200)
		if out["status"] != "archived" || out["lastError"] != nil {
			t.Fatalf("remove: %v", out)
		}
		if st, body := e.Board.Do("POST", "/api/email/inboxes/"+raw["id"].(string)+"/control", map[string]any{"action": "resume"}); st != 409 || !strings.Contains(string(body), "disconnected") {
			t.Fatalf("resume after remove: %d %s", st, body)
		}
		if n := providerWebhooks(t, e, "rawbox@agentmail.to"); n != 0 {
			t.Fatalf("owned webhook not removed: %d", n)
		}
		if n := len(providerKeys(t, e, "rawbox@agentmail.to")); n != 0 {
			t.Fatalf("owned runtime key not removed: %d", n)
		}
		if n := providerInboxes(t, e); n != 2 {
			t.Fatalf("the provider inbox must be kept: %d inboxes", n)
		}
		var after int
		e.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM company_secrets WHERE status = 'active'`).Scan(&after)
		if after != before-3 { // control key, runtime key, webhook secret
			t.Fatalf("secrets: %d before, %d after; want 3 removed", before, after)
		}
		// The saved credential's secret survives disconnecting its endpoint.
		e.Board.JSON("POST", "/api/email/inboxes/"+saved["id"].(string)+"/control", map[string]any{"action": "remove"}, 200)
		e.Board.JSON("POST", connectionsPath(e)+"/"+conn+"/inspect", nil, 200)
		// A new endpoint can take over the archived address.
		again := e.Setup("rawbox", map[string]any{"inboxId": "rawbox@agentmail.to"})
		if again["status"] != "active" {
			t.Fatalf("reconnecting an archived inbox: %v", again)
		}
		noSecrets(t, e, e.OrgKey)
	})
}

func TestDisconnectWithRevokedKeyStillCompletesLocally(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		ep := e.Setup("revoked", nil)
		providerFault(e, "delete_inbox_key", 403, "", nil)
		out := e.Board.JSON("POST", "/api/email/inboxes/"+ep["id"].(string)+"/control", map[string]any{"action": "remove"}, 200)
		if out["status"] != "archived" || !strings.HasPrefix(out["lastError"].(string), "Disconnected locally.") {
			t.Fatalf("remove with failing cleanup: %v", out)
		}
	})
}

func TestPauseResume(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		ep := e.Setup("pauser", nil)
		id := ep["id"].(string)
		if out := e.Control(t, id, "pause"); out.Status != "paused" {
			t.Fatalf("pause: %v", out)
		}
		if _, _, err := e.Email.ActiveEndpoint(context.Background(), e.DB, id); err == nil {
			t.Fatal("a paused inbox must not be active for intake or sending")
		}
		if out := e.Board.JSON("POST", "/api/email/inboxes/"+id+"/control", map[string]any{"action": "resume"}, 200); out["status"] != "active" {
			t.Fatalf("resume: %v", out)
		}
		if st, _ := e.Board.Do("POST", "/api/email/inboxes/"+id+"/control", map[string]any{"action": "explode"}); st != 400 {
			t.Fatalf("bad action: %d", st)
		}
		// A held thread lease blocks stopping.
		if _, _, err := e.Store.TryLease(context.Background(), e.DB, e.CompanyID, id, store.ThreadLeaseKey("t1"), "test", 60e9); err != nil {
			t.Fatal(err)
		}
		if st, body := e.Board.Do("POST", "/api/email/inboxes/"+id+"/control", map[string]any{"action": "pause"}); st != 409 || !strings.Contains(string(body), "retry shortly") {
			t.Fatalf("pause during a thread operation: %d %s", st, body)
		}
	})
}

// One owner across companies; reconnect keeps the
// identity; a refused webhook registration leaves WebSocket receiving on.
func TestOneOwnerAndReconnect(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url, func(c *config.Config) { c.PublicURL = "https://paperclip.example.test" })
		ep := e.Setup("owned", nil)
		id := ep["id"].(string)
		// Another company cannot own the same inbox.
		other := testkit.ID(e.Board.JSON("POST", "/api/companies", map[string]any{"name": "Rival"}, 201))
		otherAgent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+other+"/agents", map[string]any{"name": "R", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		st, body := e.Board.Do("POST", "/api/companies/"+other+"/email/inboxes", map[string]any{"assignedAgentId": otherAgent,
			"apiKey": e.OrgKey, "inboxId": "owned@agentmail.to", "idempotencyKey": testkit.NewUUID()})
		if st != 409 || !strings.Contains(string(body), "This AgentMail inbox already has a Paperclip owner") {
			t.Fatalf("second owner: %d %s", st, body)
		}
		_, err := e.DB.ExecContext(context.Background(), `UPDATE email_endpoints SET address = 'owned@agentmail.to' WHERE id <> $1`, id)
		if !db.IsUniqueViolation(err) {
			t.Fatalf("the database must refuse a second owner of one inbox: %v", err)
		}
		// A conversation bound to the endpoint survives reconnect unchanged.
		ctx := context.Background()
		issue := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "thread"}, 201))
		stamp := e.Store.Now()
		if _, err := e.DB.ExecContext(ctx, `INSERT INTO email_conversations (id, company_id, endpoint_id, issue_id, external_conversation_id,
			external_thread_id, subject, state, last_activity_at, created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,'active',$8,$8,$8)`,
			testkit.NewUUID(), e.CompanyID, id, issue, "owned@agentmail.to", "thread-1", "Hello", stamp); err != nil {
			t.Fatal(err)
		}
		convs := func() string {
			var s string
			e.DB.QueryRowContext(ctx, `SELECT id || issue_id || external_thread_id FROM email_conversations WHERE endpoint_id = $1`, id).Scan(&s)
			return s
		}
		before := convs()
		// Reconnect with a new inbox-scoped key over WebSocket keeps the address.
		newKey := inboxKeyFor(t, e, "owned@agentmail.to")
		out := e.Board.JSON("POST", "/api/email/inboxes/"+id+"/reconnect", map[string]any{"apiKey": newKey, "receiveMode": "websocket"}, 200)
		if out["status"] != "active" || out["address"] != "owned@agentmail.to" || out["id"] != id {
			t.Fatalf("reconnect: %v", out)
		}
		if after := convs(); after != before || after == "" {
			t.Fatalf("conversations changed across reconnect: %q → %q", before, after)
		}
		// A key without webhook permission cannot switch to webhook; receiving stays active.
		limited := inboxKeyWithout(t, e, "owned@agentmail.to")
		st, body = e.Board.Do("POST", "/api/email/inboxes/"+id+"/reconnect", map[string]any{"apiKey": limited, "receiveMode": "webhook"})
		if st < 400 || !strings.Contains(string(body), "Enable webhook create/read/delete permissions") {
			t.Fatalf("reconnect to webhook without permission: %d %s", st, body)
		}
		now := e.Board.JSON("GET", "/api/email/inboxes/"+id, nil, 200)
		if now["status"] != "active" || now["receiveMode"] != "websocket" {
			t.Fatalf("a refused registration must leave receiving untouched: %v", now)
		}
		noSecrets(t, e, e.OrgKey, newKey, limited)
	})
}

func TestTwoCompaniesRaceForOneInbox(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		provider(t, e).CreateInbox(context.Background(), agentmailCreate("contested"))
		type co struct{ id, agent string }
		cos := []co{{e.CompanyID, e.AgentID}}
		other := testkit.ID(e.Board.JSON("POST", "/api/companies", map[string]any{"name": "Racer"}, 201))
		oa := testkit.ID(e.Board.JSON("POST", "/api/companies/"+other+"/agents", map[string]any{"name": "R", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		cos = append(cos, co{other, oa})
		var wg sync.WaitGroup
		status := make([]int, 2)
		bodies := make([]string, 2)
		for i, c := range cos {
			wg.Add(1)
			go func(i int, c co) {
				defer wg.Done()
				st, b := e.Board.Do("POST", "/api/companies/"+c.id+"/email/inboxes", map[string]any{"assignedAgentId": c.agent,
					"apiKey": e.OrgKey, "inboxId": "contested@agentmail.to", "idempotencyKey": testkit.NewUUID()})
				status[i], bodies[i] = st, string(b)
			}(i, c)
		}
		wg.Wait()
		wins, losses := 0, 0
		for i := range status {
			switch {
			case status[i] == 201:
				wins++
			case status[i] == 409 && strings.Contains(bodies[i], "This AgentMail inbox already has a Paperclip owner"):
				losses++
			default:
				t.Fatalf("unexpected result %d %s", status[i], bodies[i])
			}
		}
		if wins != 1 || losses != 1 {
			t.Fatalf("wins %d losses %d", wins, losses)
		}
		if n := endpointCount(t, e, "contested@agentmail.to"); n != 1 {
			t.Fatalf("%d owners", n)
		}
	})
}

// Setup gates for agents and low-trust agents, and the experimental gate.
func TestSetupGates(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		lt := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/agents", map[string]any{"name": "Careful", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}, "permissions": map[string]any{"trustPreset": "low_trust_review"}}, 201))
		try := func(agent string) (int, string) {
			st, b := e.Board.Do("POST", inboxesPath(e), map[string]any{"assignedAgentId": agent, "apiKey": e.OrgKey, "username": "lt",
				"idempotencyKey": testkit.NewUUID()})
			return st, string(b)
		}
		// Every unmet requirement is named at once.
		st, b := try(lt)
		if st != 400 || !strings.Contains(b, "Configure a project or root task boundary for this low-trust email agent (permissions.authorizationPolicy.trustBoundary") ||
			!strings.Contains(b, "Also still needed: isolated workspaces (instance setting experimental.enableIsolatedWorkspaces); an active sandbox environment") ||
			!strings.Contains(b, `"missing":["trust_boundary","isolated_workspaces","sandbox_environment"]`) {
			t.Fatalf("no boundary, isolated workspaces or sandbox: %d %s", st, b)
		}
		proj := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/projects", map[string]any{"name": "Mail"}, 201))
		e.Board.JSON("PATCH", "/api/agents/"+lt, map[string]any{"permissions": map[string]any{"trustPreset": "low_trust_review",
			"authorizationPolicy": map[string]any{"trustBoundary": map[string]any{"projectIds": []string{proj}}}}}, 200)
		if st, b := try(lt); st != 400 || !strings.Contains(b, "sandbox environment") || !strings.Contains(b, `"missing":["isolated_workspaces","sandbox_environment"]`) {
			t.Fatalf("no isolated workspaces: %d %s", st, b)
		}
		e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableIsolatedWorkspaces": true}}, 200)
		if st, b := try(lt); st != 400 || !strings.Contains(b, "Select an active sandbox environment") {
			t.Fatalf("no sandbox: %d %s", st, b)
		}
		local := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/environments", map[string]any{"name": "local", "driver": "local"}, 201))
		e.Board.JSON("PATCH", "/api/agents/"+lt, map[string]any{"environmentId": local}, 200)
		if st, _ := try(lt); st != 400 {
			t.Fatalf("a local environment is not a sandbox: %d", st)
		}
		sb := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/environments", map[string]any{"name": "sb", "driver": "sandbox"}, 201))
		e.Board.JSON("PATCH", "/api/agents/"+lt, map[string]any{"environmentId": sb}, 200)
		// A program no sandbox can run (inside the Paperclip home, or in a
		// directory holding it) is refused when it is configured, and, for
		// an agent configured before that check, by the inbox setup.
		for _, cmd := range []string{filepath.Join(e.Home, "agent.sh"), filepath.Join(filepath.Dir(e.Home), "agent.sh")} {
			st, b := e.Board.Do("PATCH", "/api/agents/"+lt, map[string]any{"adapterConfig": map[string]any{"command": cmd}})
			if st != 400 || !strings.Contains(string(b), "overlaps the Paperclip home") {
				t.Fatalf("agent command %s in a sandbox: %d %s", cmd, st, b)
			}
		}
		inHome, _ := json.Marshal(map[string]any{"command": filepath.Join(e.Home, "agent.sh")})
		if _, err := e.DB.ExecContext(context.Background(), `UPDATE agents SET adapter_config = $2 WHERE id = $1`, lt, string(inHome)); err != nil {
			t.Fatal(err)
		}
		if st, b := try(lt); st != 400 || !strings.Contains(b, "The agent's runs would fail in its sandbox") || !strings.Contains(b, "sandbox_command") {
			t.Fatalf("setup with an agent command inside the home: %d %s", st, b)
		}
		e.Board.JSON("PATCH", "/api/agents/"+lt, map[string]any{"adapterConfig": map[string]any{"command": "/bin/true"}}, 200)
		if st, b := try(lt); st != 201 || strings.Contains(b, "standardAgentWarning") {
			t.Fatalf("fully configured low-trust agent: %d %s", st, b)
		}
		// Custom domains must be verified; the flag gates every route.
		if st, b := e.Board.Do("POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": "x",
			"domain": "mail.example.com", "idempotencyKey": testkit.NewUUID()}); st != 400 || !strings.Contains(b2s(b), "Verify this custom domain") {
			t.Fatalf("unverified domain: %d %s", st, b)
		}
		e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": false}}, 200)
		if st, b := e.Board.Do("GET", inboxesPath(e), nil); st != 403 || !strings.Contains(string(b), "enableChatConnectors") {
			t.Fatalf("disabled flag: %d %s", st, b)
		}
	})
}

func b2s(b []byte) string { return string(b) }
