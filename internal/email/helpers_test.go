package email_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// inboxesPath is the setup route of the env's company.
func inboxesPath(e *testkit.EmailEnv) string {
	return "/api/companies/" + e.CompanyID + "/email/inboxes"
}

// fault installs a provider fault for one request of operation op.
func fault(e *testkit.EmailEnv, op string, status int, code string) {
	e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Status: status, Code: code, Times: 1})
}

// countRequests counts recorded provider requests with method and exact path.
func countRequests(e *testkit.EmailEnv, method, path string) int {
	n := 0
	for _, r := range e.Em.Requests(path) {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

// endpointCount counts non-archived endpoints for an address.
func endpointCount(t *testing.T, e *testkit.EmailEnv, address string) int {
	t.Helper()
	var n int
	if err := e.DB.QueryRowContext(context.Background(),
		`SELECT COUNT(*) FROM email_endpoints WHERE address = $1 AND status <> 'archived'`, address).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// failUpdates installs a trigger that makes updates matching cond fail, and
// returns a function that removes it. cond is a boolean SQL expression
// over NEW.
func failUpdates(t *testing.T, e *testkit.EmailEnv, name, cond string) func() {
	t.Helper()
	ctx := context.Background()
	var stmts []string
	var drop []string
	if e.DB.Dialect == db.Postgres {
		stmts = []string{
			fmt.Sprintf(`CREATE FUNCTION %s_fn() RETURNS trigger AS $$ BEGIN IF %s THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`, name, cond),
			fmt.Sprintf(`CREATE TRIGGER %s BEFORE UPDATE ON email_endpoints FOR EACH ROW EXECUTE FUNCTION %s_fn()`, name, name),
		}
		drop = []string{fmt.Sprintf(`DROP TRIGGER %s ON email_endpoints`, name), fmt.Sprintf(`DROP FUNCTION %s_fn()`, name)}
	} else {
		stmts = []string{fmt.Sprintf(`CREATE TRIGGER %s BEFORE UPDATE ON email_endpoints FOR EACH ROW WHEN %s BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, name, cond)}
		drop = []string{fmt.Sprintf(`DROP TRIGGER %s`, name)}
	}
	for _, s := range stmts {
		if _, err := e.DB.ExecContext(ctx, s); err != nil {
			t.Fatalf("install trigger: %v", err)
		}
	}
	return func() {
		for _, s := range drop {
			if _, err := e.DB.ExecContext(ctx, s); err != nil {
				t.Fatalf("drop trigger: %v", err)
			}
		}
	}
}

// noSecrets fails if any of the values appears in responses, logs or the
// activity log.
func noSecrets(t *testing.T, e *testkit.EmailEnv, values ...string) {
	t.Helper()
	var audit strings.Builder
	rows, err := e.DB.QueryContext(context.Background(), `SELECT CAST(details AS TEXT) FROM activity_log`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		audit.WriteString(s)
	}
	for _, v := range values {
		for where, text := range map[string]string{"responses": e.Board.Seen.String(), "logs": e.Logs.String(), "audit": audit.String()} {
			if strings.Contains(text, v) {
				t.Errorf("secret %q leaked into %s", v[:6]+"…", where)
			}
		}
	}
}

// provider returns a client on the emulator with the org key.
func provider(t *testing.T, e *testkit.EmailEnv) *agentmail.Client {
	t.Helper()
	c, err := agentmail.New(agentmail.Options{BaseURL: e.Em.APIURL(), APIKey: e.OrgKey})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// providerInboxes counts the organization's inboxes at the provider.
func providerInboxes(t *testing.T, e *testkit.EmailEnv) int {
	t.Helper()
	l, err := provider(t, e).ListInboxes(context.Background(), agentmail.ListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Inboxes)
}

// providerWebhooks counts an inbox's webhooks at the provider.
func providerWebhooks(t *testing.T, e *testkit.EmailEnv, inbox string) int {
	t.Helper()
	l, err := provider(t, e).ListInboxWebhooks(context.Background(), inbox, agentmail.ListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Webhooks)
}

// providerKeys lists an inbox's API keys at the provider.
func providerKeys(t *testing.T, e *testkit.EmailEnv, inbox string) []map[string]any {
	t.Helper()
	var out struct {
		APIKeys []map[string]any `json:"api_keys"`
	}
	if err := provider(t, e).Do(context.Background(), "GET", "/inboxes/"+url.PathEscape(inbox)+"/api-keys", nil, nil, &out); err != nil {
		t.Fatal(err)
	}
	return out.APIKeys
}

func agentmailCreate(username string) agentmail.CreateInboxRequest {
	return agentmail.CreateInboxRequest{Username: username}
}

// inboxScopedKey creates an inbox at the provider and returns a key scoped to it.
func inboxScopedKey(t *testing.T, e *testkit.EmailEnv, username string) string {
	t.Helper()
	c := provider(t, e)
	in, err := c.CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: username})
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.CreateInboxAPIKey(context.Background(), in.InboxID, agentmail.CreateAPIKeyRequest{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return k.APIKey
}

// actorFor builds a board actor for a user id.
func actorFor(t *testing.T, e *testkit.EmailEnv, userID string) authz.Actor {
	t.Helper()
	return authz.Actor{Kind: authz.KindBoard, UserID: userID}
}

// inboxKeyFor creates a full-permission key scoped to an existing inbox.
func inboxKeyFor(t *testing.T, e *testkit.EmailEnv, inbox string) string {
	t.Helper()
	k, err := provider(t, e).CreateInboxAPIKey(context.Background(), inbox, agentmail.CreateAPIKeyRequest{Name: "replacement"})
	if err != nil {
		t.Fatal(err)
	}
	return k.APIKey
}

// inboxKeyWithout creates an inbox key that may read and send mail but not
// manage webhooks (AgentMail's "Send & read mail" preset).
func inboxKeyWithout(t *testing.T, e *testkit.EmailEnv, inbox string) string {
	t.Helper()
	yes := true
	k, err := provider(t, e).CreateInboxAPIKey(context.Background(), inbox, agentmail.CreateAPIKeyRequest{Name: "mail only",
		Permissions: &agentmail.APIKeyPermissions{InboxRead: &yes, MessageRead: &yes, MessageSend: &yes}})
	if err != nil {
		t.Fatal(err)
	}
	return k.APIKey
}
