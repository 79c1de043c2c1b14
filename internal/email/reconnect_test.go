package email_test

import (
	"context"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Reconnect changes only what it is given: the receiving mode alone keeps
// the inbox's key (its saved credential, or the key it was set up with),
// a key alone keeps the mode, and a saved credential can replace a key.
func TestReconnectChangesOnlyWhatIsGiven(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url, func(c *config.Config) { c.PublicURL = "https://paperclip.example.test" })
		conn := testkit.ID(e.Board.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey,
			"agentIds": []string{e.AgentID}, "idempotencyKey": testkit.NewUUID()}, 201))
		ep := e.Board.JSON("POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "credentialConnectionId": conn,
			"username": "flex", "idempotencyKey": testkit.NewUUID()}, 201)
		id := testkit.ID(ep)
		reconnect := func(body map[string]any, want int) map[string]any {
			t.Helper()
			return e.Board.JSON("POST", "/api/email/inboxes/"+id+"/reconnect", body, want)
		}
		credential := func() string {
			t.Helper()
			row, err := e.Store.GetEndpoint(context.Background(), e.DB, id)
			if err != nil {
				t.Fatal(err)
			}
			return row.CredentialConnectionID
		}
		// Mode only: the saved credential is used again and stays bound.
		out := reconnect(map[string]any{"receiveMode": "webhook"}, 200)
		if out["status"] != "active" || out["receiveMode"] != "webhook" || credential() != conn || providerWebhooks(t, e, "flex@agentmail.to") != 1 {
			t.Fatalf("mode-only reconnect: %v, credential %q", out, credential())
		}
		out = reconnect(map[string]any{"receiveMode": "websocket"}, 200)
		if out["receiveMode"] != "websocket" || credential() != conn || providerWebhooks(t, e, "flex@agentmail.to") != 0 {
			t.Fatalf("back to websocket: %v", out)
		}
		// A key alone keeps the mode and replaces the saved credential.
		inboxKey := inboxKeyFor(t, e, "flex@agentmail.to")
		out = reconnect(map[string]any{"apiKey": inboxKey}, 200)
		if out["receiveMode"] != "websocket" || out["status"] != "active" || credential() != "" {
			t.Fatalf("key-only reconnect: %v, credential %q", out, credential())
		}
		// Mode only again: now the key given directly is reused.
		out = reconnect(map[string]any{"receiveMode": "webhook"}, 200)
		if out["receiveMode"] != "webhook" || credential() != "" {
			t.Fatalf("mode-only reconnect with a direct key: %v", out)
		}
		// A saved credential replaces the direct key.
		out = reconnect(map[string]any{"credentialConnectionId": conn, "receiveMode": "websocket"}, 200)
		if out["receiveMode"] != "websocket" || credential() != conn {
			t.Fatalf("credential reconnect: %v, credential %q", out, credential())
		}
		// Nothing to change, or two keys, is a clear 400 that changes nothing.
		for _, body := range []map[string]any{{}, {"apiKey": inboxKey, "credentialConnectionId": conn}, {"receiveMode": "smoke"}} {
			st, raw := e.Board.Do("POST", "/api/email/inboxes/"+id+"/reconnect", body)
			if st != 400 {
				t.Fatalf("reconnect %v: %d %s", body, st, raw)
			}
		}
		if st, raw := e.Board.Do("POST", "/api/email/inboxes/"+id+"/reconnect", map[string]any{"credentialConnectionId": testkit.NewUUID()}); st != 404 {
			t.Fatalf("unknown credential: %d %s", st, raw)
		}
		if now := e.Board.JSON("GET", "/api/email/inboxes/"+id, nil, 200); now["status"] != "active" || now["receiveMode"] != "websocket" {
			t.Fatalf("refused reconnects changed the inbox: %v", now)
		}
		// A user without access to the saved credential cannot reconnect
		// with it, even by giving only a mode.
		bob, _ := memberClient(t, e, "bob@example.com")
		if st, raw := bob.Do("POST", "/api/email/inboxes/"+id+"/reconnect", map[string]any{"receiveMode": "webhook"}); st != 403 || !strings.Contains(string(raw), "access") {
			t.Fatalf("reconnect without credential access: %d %s", st, raw)
		}
		noSecrets(t, e, e.OrgKey, inboxKey)
	})
}

// A user grant without userId is for the caller, who may find their id
// with GET /api/me; another user must be a member.
func TestUserGrantDefaultsToTheCaller(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		conn := testkit.ID(e.Board.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey,
			"grantKind": "organization", "idempotencyKey": testkit.NewUUID()}, 201))
		grants := connectionsPath(e) + "/" + conn + "/grants"
		me := e.Board.JSON("GET", "/api/me", nil, 200)["user"].(map[string]any)["id"]
		g := e.Board.JSON("POST", grants, map[string]any{"kind": "user"}, 201)
		if g["subjectUserId"] != me || me == nil {
			t.Fatalf("the local board's grant: %v (me %v)", g, me)
		}
		alice, aliceID := memberClient(t, e, "alice@example.com")
		if g := alice.JSON("POST", grants, map[string]any{"kind": "user"}, 201); g["subjectUserId"] != aliceID {
			t.Fatalf("a member's grant: %v", g)
		}
		if g := e.Board.JSON("POST", grants, map[string]any{"kind": "user", "userId": aliceID}, 201); g["subjectUserId"] != aliceID {
			t.Fatalf("a grant for a named member: %v", g)
		}
		if st, raw := e.Board.Do("POST", grants, map[string]any{"kind": "user", "userId": testkit.NewUUID()}); st != 400 || !strings.Contains(string(raw), "not a member") {
			t.Fatalf("a grant for a stranger: %d %s", st, raw)
		}
	})
}
