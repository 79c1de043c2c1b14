package email_test

import (
	"strings"
	"testing"

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
