package email_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func connectionsPath(e *testkit.EmailEnv) string {
	return "/api/companies/" + e.CompanyID + "/email/connections"
}

// memberClient adds a member with tools:manage_connections and returns a
// client acting as that user.
func memberClient(t *testing.T, e *testkit.EmailEnv, email string, perms ...string) (*testkit.Client, string) {
	t.Helper()
	if perms == nil {
		perms = []string{"tools:manage_connections"}
	}
	m := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/members", map[string]any{"email": email, "role": "member", "permissions": perms}, 201)
	k := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/board-keys", map[string]any{"userId": m["userId"]}, 201)
	return e.Board.As(k["token"].(string), ""), m["userId"].(string)
}

// Saved credentials: grants, installs, concurrent use and the canary
// (no secret in any answer).
func TestSavedCredential(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		alice, aliceID := memberClient(t, e, "alice@example.com")
		bob, _ := memberClient(t, e, "bob@example.com")
		key := testkit.NewUUID()
		req := map[string]any{"apiKey": e.OrgKey, "idempotencyKey": key}
		// Concurrent identical requests return one connection.
		var wg sync.WaitGroup
		ids := make([]string, 4)
		for i := range ids {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ids[i] = testkit.ID(alice.JSON("POST", connectionsPath(e), req, 201))
			}(i)
		}
		wg.Wait()
		for _, id := range ids[1:] {
			if id != ids[0] {
				t.Fatalf("concurrent connects made several connections: %v", ids)
			}
		}
		conn := alice.JSON("GET", connectionsPath(e)+"/"+ids[0], nil, 200)
		grants := conn["grants"].([]any)
		if len(grants) != 1 || grants[0].(map[string]any)["kind"] != "user" || grants[0].(map[string]any)["subjectUserId"] != aliceID {
			t.Fatalf("one user grant for the creator: %v", grants)
		}
		if conn["installs"] != nil {
			t.Fatalf("credential permission alone installs nothing: %v", conn["installs"])
		}
		// Another user has no access; an unknown company is not found.
		if st, raw := bob.Do("GET", connectionsPath(e)+"/"+ids[0], nil); st != 403 || !strings.Contains(string(raw), "access") {
			t.Fatalf("other user: %d %s", st, raw)
		}
		if st, _ := alice.Do("GET", "/api/companies/"+testkit.NewUUID()+"/email/connections", nil); st != 404 {
			t.Fatalf("unknown company: %d", st)
		}
		if n := len(bob.List(connectionsPath(e))); n != 0 {
			t.Fatalf("bob sees %d credentials", n)
		}
		// The server resolves the value; setup from it activates and installs the agent.
		_, v, err := e.Email.ConnectionKey(context.Background(), actorFor(t, e, aliceID), e.CompanyID, ids[0])
		if err != nil || v != e.OrgKey {
			t.Fatalf("credential(): %v", err)
		}
		sum := alice.JSON("POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "credentialConnectionId": ids[0],
			"username": "saved", "idempotencyKey": testkit.NewUUID()}, 201)
		if sum["status"] != "active" {
			t.Fatalf("setup from saved credential: %v", sum)
		}
		conn = alice.JSON("GET", connectionsPath(e)+"/"+ids[0], nil, 200)
		inst := conn["installs"].([]any)
		if len(inst) != 1 || inst[0].(map[string]any)["targetId"] != e.AgentID {
			t.Fatalf("the agent install must be added: %v", inst)
		}
		// Deleting the install stops the endpoint; restoring restores; a revoked grant stops it.
		epID := sum["id"].(string)
		instID := inst[0].(map[string]any)["id"].(string)
		alice.JSON("DELETE", connectionsPath(e)+"/"+ids[0]+"/installs/"+instID, nil, 204)
		if _, _, err := e.Email.ActiveEndpoint(context.Background(), e.DB, epID); err == nil || !strings.Contains(err.Error(), "no longer has access") {
			t.Fatalf("after removing the install: %v", err)
		}
		if n := len(e.Board.List(inboxesPath(e))); n != 1 {
			t.Fatalf("the endpoint itself stays listed: %d", n)
		}
		alice.JSON("POST", connectionsPath(e)+"/"+ids[0]+"/installs", map[string]any{"targetType": "agent", "targetId": e.AgentID}, 201)
		if _, _, err := e.Email.ActiveEndpoint(context.Background(), e.DB, epID); err != nil {
			t.Fatalf("restored install: %v", err)
		}
		gid := grants[0].(map[string]any)["id"].(string)
		alice.JSON("DELETE", connectionsPath(e)+"/"+ids[0]+"/grants/"+gid, nil, 204)
		if _, _, err := e.Email.ActiveEndpoint(context.Background(), e.DB, epID); err == nil || !strings.Contains(err.Error(), "credential is unavailable") {
			t.Fatalf("after revoking the grant: %v", err)
		}
		if st, raw := alice.Do("GET", connectionsPath(e)+"/"+ids[0], nil); st != 403 || !strings.Contains(string(raw), "revoked") {
			t.Fatalf("revoked credential: %d %s", st, raw)
		}
		noSecrets(t, e, e.OrgKey)
	})
}

// Credential suggestions.
func TestCredentialSuggestions(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		alice, _ := memberClient(t, e, "alice@example.com")
		bob, _ := memberClient(t, e, "bob@example.com")
		// Alice's own user-grant key, an organization-grant key by Bob, and
		// Bob's private key, plus an inbox-scoped key.
		alice.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "idempotencyKey": testkit.NewUUID()}, 201)
		bob.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "grantKind": "organization", "idempotencyKey": testkit.NewUUID()}, 201)
		bob.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "idempotencyKey": testkit.NewUUID()}, 201)
		inboxKey := inboxScopedKey(t, e, "scoped")
		time.Sleep(2 * time.Millisecond)
		alice.JSON("POST", connectionsPath(e), map[string]any{"apiKey": inboxKey, "idempotencyKey": testkit.NewUUID()}, 201)
		opts := alice.List(connectionsPath(e))
		if len(opts) != 3 {
			t.Fatalf("alice sees %d options, want 3: %v", len(opts), opts)
		}
		if opts[2]["scope"] != "inbox" || opts[2]["inboxId"] != "scoped@agentmail.to" || !strings.Contains(opts[2]["label"].(string), "scoped@agentmail.to") {
			t.Fatalf("inbox key last with its inbox: %v", opts[2])
		}
		if opts[0]["scope"] != "organization" {
			t.Fatalf("organization keys first: %v", opts)
		}
		for _, o := range opts {
			if len(o) != 5 {
				t.Fatalf("option carries only id, scope, inboxId, createdAt, label: %v", o)
			}
		}
		// Another company sees nothing.
		other := testkit.ID(e.Board.JSON("POST", "/api/companies", map[string]any{"name": "Other"}, 201))
		if n := len(e.Board.List("/api/companies/" + other + "/email/connections")); n != 0 {
			t.Fatalf("other company sees %d", n)
		}
		noSecrets(t, e, e.OrgKey, inboxKey)
	})
}

// Credentials saved without a scope are resolved with
// /auth/me concurrently under one shared deadline.
func TestLegacyCredentialScopesShareOneDeadline(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		for range 6 {
			e.Board.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "grantKind": "organization", "idempotencyKey": testkit.NewUUID()}, 201)
		}
		if _, err := e.DB.ExecContext(context.Background(), `UPDATE email_connections SET scope = ''`); err != nil {
			t.Fatal(err)
		}
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "inspect_key"}, DelayMS: 10_000})
		start := time.Now()
		opts := e.Board.List(connectionsPath(e))
		if took := time.Since(start); took > 8*time.Second {
			t.Fatalf("the listing waited %v: the deadline must be shared", took)
		}
		for _, o := range opts {
			if o["scope"] != "unavailable" || o["label"] != "AgentMail key · unavailable" {
				t.Fatalf("stalled lookups must be listed as unavailable: %v", o)
			}
		}
		e.Em.ClearFaults()
		opts = e.Board.List(connectionsPath(e))
		if opts[0]["scope"] != "organization" {
			t.Fatalf("a working provider resolves the scope: %v", opts[0])
		}
	})
}
