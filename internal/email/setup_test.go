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

func TestSetupWithOrganizationKeyCreatesInboxAndRuntimeKey(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		key := testkit.NewUUID()
		body := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": "mailbot", "idempotencyKey": key}
		sum := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", body, 201)
		if sum["id"] != key || sum["status"] != "active" || sum["address"] != "mailbot@agentmail.to" || sum["receiveMode"] != "websocket" {
			t.Fatalf("summary: %v", sum)
		}
		if sum["standardAgentWarning"] != true {
			t.Fatalf("a standard agent must carry the warning flag: %v", sum)
		}
		again := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", body, 201)
		if again["id"] != key || again["status"] != "active" {
			t.Fatalf("retry: %v", again)
		}
		if n := len(e.Em.Requests("/v0/inboxes/mailbot@agentmail.to/api-keys")); n != 1 {
			t.Fatalf("runtime key created %d times, want 1", n)
		}
		list := e.Board.List("/api/companies/" + e.CompanyID + "/email/inboxes")
		if len(list) != 1 || list[0]["id"] != key {
			t.Fatalf("inbox list: %v", list)
		}
		if strings.Contains(e.Board.Seen.String(), e.OrgKey) || strings.Contains(e.Logs.String(), e.OrgKey) {
			t.Fatal("the API key leaked into a response or a log line")
		}
	})
}

func TestSetupRetriedAfterFailureAtEachStepEndsWithOneOfEverything(t *testing.T) {
	steps := []struct {
		name   string
		inject func(t *testing.T, e *testkit.EmailEnv) (undo func())
	}{
		{"create inbox", func(t *testing.T, e *testkit.EmailEnv) func() { fault(e, "create_inbox", 503, ""); return func() {} }},
		{"create runtime key", func(t *testing.T, e *testkit.EmailEnv) func() {
			fault(e, "create_inbox_key", 503, "")
			return func() {}
		}},
		{"register webhook", func(t *testing.T, e *testkit.EmailEnv) func() { fault(e, "create_webhook", 503, ""); return func() {} }},
		{"persist webhook", func(t *testing.T, e *testkit.EmailEnv) func() {
			return failUpdates(t, e, "fail_webhook", "NEW.webhook_id IS NOT NULL")
		}},
		{"activate", func(t *testing.T, e *testkit.EmailEnv) func() {
			return failUpdates(t, e, "fail_activate", "NEW.status = 'active'")
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
				e := testkit.NewEmailEnv(t, url, func(c *config.Config) { c.PublicURL = "https://paperclip.example.test" })
				key := testkit.NewUUID()
				body := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": "retry",
					"receiveMode": "webhook", "idempotencyKey": key}
				undo := step.inject(t, e)
				if st, out := e.Board.Do("POST", inboxesPath(e), body); st < 400 {
					t.Fatalf("injected failure did not fail setup: %d %s", st, out)
				}
				ep := e.Board.JSON("GET", "/api/email/inboxes/"+key, nil, 200)
				if ep["status"] != "draft" {
					t.Fatalf("after the failure the endpoint must stay a draft: %v", ep)
				}
				undo()
				sum := e.Board.JSON("POST", inboxesPath(e), body, 201)
				if sum["status"] != "active" || sum["address"] != "retry@agentmail.to" {
					t.Fatalf("retry: %v", sum)
				}
				if n := countRequests(e, "POST", "/v0/inboxes"); n > 2 {
					t.Fatalf("create_inbox called %d times", n)
				}
				if list := e.Board.List(inboxesPath(e)); len(list) != 1 {
					t.Fatalf("want one endpoint, got %d", len(list))
				}
				var keys, hooks int
				ctx := context.Background()
				e.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM company_secret_bindings WHERE target_id = $1 AND config_path = 'credentials.apiKey'`, key).Scan(&keys)
				e.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM company_secret_bindings WHERE target_id = $1 AND config_path = 'credentials.webhookSecret'`, key).Scan(&hooks)
				if keys != 1 || hooks != 1 {
					t.Fatalf("bindings: runtime keys %d, webhook secrets %d", keys, hooks)
				}
				if n := len(providerKeys(t, e, "retry@agentmail.to")); n != 1 {
					t.Fatalf("provider holds %d runtime keys for the inbox, want 1", n)
				}
				if n := providerWebhooks(t, e, "retry@agentmail.to"); n != 1 {
					t.Fatalf("provider holds %d webhooks for the inbox, want 1", n)
				}
				if n := providerInboxes(t, e); n != 1 {
					t.Fatalf("provider holds %d inboxes, want 1", n)
				}
			})
		})
	}
}
