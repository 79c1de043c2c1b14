package email_test

import (
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The inbox read models the web UI needs: the summary's credential and
// lifecycle times, disconnected inboxes on request, an inbox's
// conversations with their tasks, and its activity (deliveries and sends).
func TestInboxViews(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		conn := testkit.ID(e.Board.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "grantKind": "organization",
			"agentIds": []string{e.AgentID}, "idempotencyKey": testkit.NewUUID()}, 201))
		saved := e.Board.JSON("POST", inboxesPath(e), map[string]any{"assignedAgentId": e.AgentID, "credentialConnectionId": conn,
			"username": "views", "idempotencyKey": testkit.NewUUID()}, 201)
		ep := saved["id"].(string)
		if saved["credentialConnectionId"] != conn || saved["createdAt"] == nil || saved["activationAt"] == nil ||
			saved["archivedAt"] != nil || saved["lastEventAt"] != nil || saved["lastPublicationAt"] != nil {
			t.Fatalf("summary of an inbox set up from a saved credential: %v", saved)
		}
		pasted := e.Setup("pasted", nil)
		if v, ok := pasted["credentialConnectionId"]; !ok || v != nil {
			t.Fatalf("an inbox with its own key has credentialConnectionId %v (present %v)", v, ok)
		}

		// Disconnected inboxes only on request, and only for board actors.
		e.Control(t, pasted["id"].(string), "remove")
		list := e.Board.List(inboxesPath(e))
		if len(list) != 1 || list[0]["id"] != ep {
			t.Fatalf("default list: %v", list)
		}
		all := e.Board.List(inboxesPath(e) + "?includeArchived=true")
		if len(all) != 2 || all[0]["id"] != pasted["id"] || all[0]["status"] != "archived" || all[0]["archivedAt"] == nil {
			t.Fatalf("list with archived inboxes (newest first): %v", all)
		}
		if st, _ := e.Board.Do("GET", inboxesPath(e)+"?includeArchived=yes", nil); st != 400 {
			t.Fatalf("includeArchived=yes: %d", st)
		}

		// Conversations and activity: one received email becomes a task.
		testkit.Eventually(t, 30*time.Second, "a subscribed socket", func() bool { return e.Em.SubscribedCount("views@agentmail.to") == 1 })
		if _, err := e.Em.Deliver("views@agentmail.to", emulator.DeliverRequest{From: "Jane <jane@example.com>",
			Subject: "<b>Invoice</b> question", Text: "When is it due?"}); err != nil {
			t.Fatal(err)
		}
		convPath := "/api/email/inboxes/" + ep + "/conversations"
		var convs []map[string]any
		testkit.Eventually(t, 30*time.Second, "the conversation", func() bool {
			convs = e.Board.List(convPath)
			return len(convs) == 1
		})
		c := convs[0]
		if c["subject"] != "<b>Invoice</b> question" || c["issueTitle"] != "<b>Invoice</b> question" || c["issueId"] == "" ||
			c["state"] != "active" || c["lastActivityAt"] == nil || c["createdAt"] == nil || c["issueStatus"] == "" {
			t.Fatalf("conversation: %v", c)
		}
		task := c["issueId"].(string)

		// A board send from the inbox shows up next to the delivery.
		key := testkit.NewUUID()
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/send", map[string]any{"endpointId": ep, "parentIssueId": task,
			"to": []string{"client@example.com"}, "subject": "Follow-up", "text": "Hello", "idempotencyKey": key}, 202)
		actPath := "/api/email/inboxes/" + ep + "/activity"
		var act map[string]any
		testkit.Eventually(t, 30*time.Second, "activity with the delivery and the send", func() bool {
			act = e.Board.JSON("GET", actPath, nil, 200)
			var delivery, send bool
			for _, raw := range act["items"].([]any) {
				it := raw.(map[string]any)
				if it["kind"] == "delivery" && it["eventKind"] == "message.received" && it["state"] == "processed" && it["issueId"] == task {
					delivery = true
				}
				if it["kind"] == "send" && it["id"] == key && it["outcome"] != nil && it["at"] != nil {
					send = true
				}
			}
			return delivery && send
		})
		items := act["items"].([]any)
		for i := 1; i < len(items); i++ {
			prev, cur := items[i-1].(map[string]any)["at"].(string), items[i].(map[string]any)["at"].(string)
			p, _ := time.Parse(time.RFC3339Nano, prev)
			q, _ := time.Parse(time.RFC3339Nano, cur)
			if q.After(p) {
				t.Fatalf("activity is not newest first: %v", items)
			}
		}
		q := act["queue"].(map[string]any)
		for _, k := range []string{"received", "processing", "retry"} {
			if _, ok := q[k].(float64); !ok {
				t.Fatalf("queue lacks %s: %v", k, q)
			}
		}
		if got := e.Board.JSON("GET", actPath+"?limit=1", nil, 200)["items"].([]any); len(got) != 1 {
			t.Fatalf("limit=1: %d items", len(got))
		}
		for _, bad := range []string{"?limit=0", "?limit=201", "?limit=x"} {
			if st, _ := e.Board.Do("GET", actPath+bad, nil); st != 400 {
				t.Errorf("activity%s: %d", bad, st)
			}
		}
		got := e.Board.JSON("GET", "/api/email/inboxes/"+ep, nil, 200)
		if got["lastEventAt"] == nil {
			t.Errorf("lastEventAt after an email: %v", got)
		}

		// Another company's board sees neither view.
		other := testkit.ID(e.Board.JSON("POST", "/api/companies", map[string]any{"name": "Other Co"}, 201))
		m := e.Board.JSON("POST", "/api/companies/"+other+"/members", map[string]any{"email": "outsider@example.com", "role": "owner"}, 201)
		k := e.Board.JSON("POST", "/api/companies/"+other+"/board-keys", map[string]any{"userId": m["userId"]}, 201)
		outsider := e.Board.As(k["token"].(string), "")
		for _, p := range []string{convPath, actPath, "/api/email/inboxes/" + testkit.NewUUID() + "/activity"} {
			if st, _ := outsider.Do("GET", p, nil); st != 404 {
				t.Errorf("outsider GET %s: %d", p, st)
			}
		}
		if st, _ := outsider.Do("GET", inboxesPath(e)+"?includeArchived=true", nil); st != 403 && st != 404 {
			t.Errorf("outsider list: %d", st)
		}
	})
}
