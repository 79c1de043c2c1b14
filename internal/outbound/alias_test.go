package outbound_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestSendRoutesAnswerUnderBothNames: the routes of one send answer under
// …/email/sends/{sendId} as under …/email/deliveries/{publicationId}, the
// sends listing as the publications listing, and the thread summary holds
// its sends under both names.
func TestSendRoutesAnswerUnderBothNames(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		key := testkit.NewUUID()
		acc := e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "Both names"), 202)
		d := e.waitOutcome(key, "sent", "delivered")
		base := "/api/companies/" + e.CompanyID + "/email/"
		if s := e.Board.JSON("GET", base+"sends/"+key, nil, 200); s["id"] != key || s["issueId"] != d["issueId"] || s["providerMessageId"] != d["providerMessageId"] {
			t.Fatalf("GET sends/%s: %v, deliveries: %v", key, s, d)
		}
		for path, want := range map[string]string{
			base + "sends/not-a-uuid":           `{"error":"Send ID must be a UUID"}`,
			base + "deliveries/not-a-uuid":      `{"error":"Publication ID must be a UUID"}`,
			base + "sends/" + testkit.NewUUID(): `{"error":"Email delivery not found"}`,
		} {
			if _, body := e.Board.Do("GET", path, nil); strings.TrimSpace(string(body)) != want {
				t.Errorf("GET %s: %s, want %s", path, body, want)
			}
		}
		for _, list := range []string{"sends", "publications"} {
			l := e.Board.JSON("GET", base+list+"?limit=1", nil, 200)
			if items := l["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != key {
				t.Fatalf("GET %s: %v", list, l)
			}
			st, body := e.Board.Do("GET", base+list+"?cursor=bogus", nil)
			if want := `{"error":"invalid cursor: pass the nextCursor (or X-Next-Cursor) value of this listing unchanged"}`; st != 400 || strings.TrimSpace(string(body)) != want {
				t.Fatalf("GET %s with a bad cursor: %d %s", list, st, body)
			}
		}
		thread := e.Board.JSON("GET", base+"tasks/"+acc["issueId"].(string), nil, 200)
		pubs, sends := thread["publications"].([]any), thread["sends"].([]any)
		if len(pubs) != 1 || !reflect.DeepEqual(pubs, sends) {
			t.Fatalf("thread: publications %v, sends %v", pubs, sends)
		}
		// Resolution and review refuse under the new name as under the old.
		for _, prefix := range []string{base + "sends/", base + "deliveries/"} {
			st, body := e.Board.Do("POST", prefix+key+"/resolve", map[string]any{"outcome": "failed"})
			if st != 409 || strings.TrimSpace(string(body)) != `{"error":"This send is not uncertain"}` {
				t.Fatalf("resolve via %s: %d %s", prefix, st, body)
			}
			st, body = e.Board.Do("POST", prefix+key+"/review", map[string]any{"action": "approve"})
			var refusal struct {
				Error   string         `json:"error"`
				Code    string         `json:"code"`
				Details map[string]any `json:"details"`
			}
			if st != 409 || json.Unmarshal(body, &refusal) != nil || refusal.Code != "not_awaiting_review" || refusal.Details["outcome"] == nil ||
				!strings.HasPrefix(refusal.Error, "This email is no longer awaiting review (") {
				t.Fatalf("review via %s: %d %s", prefix, st, body)
			}
		}
	})
}

// TestSendRefusalBodies: the send side's refusals keep their status, code
// and Retry-After at the API edge now that the service returns them as
// domain values.
func TestSendRefusalBodies(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/action-policies", map[string]any{"action": "email.recipient_sends",
			"effect": "allow", "rateLimitCount": 1, "rateLimitWindowSeconds": 3600}, 201)
		e.Board.JSON("POST", e.sendPath(), e.newEmail(testkit.NewUUID(), "first"), 202)
		st, body, h := e.Board.DoHeader("POST", e.sendPath(), e.newEmail(testkit.NewUUID(), "second"))
		if st != 429 || h.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"email_rate_limited"`) {
			t.Fatalf("over the recipient cap: %d %s (Retry-After %q)", st, body, h.Get("Retry-After"))
		}
		e.setPolicy(map[string]any{"review": "off", "blockedRecipients": []string{"blocked.example"}})
		req := e.newEmail(testkit.NewUUID(), "to a blocked domain")
		req["to"] = []string{"someone@blocked.example"}
		st, body = e.Board.Do("POST", e.sendPath(), req)
		want := `{"error":"This inbox's send policy blocks the recipient someone@blocked.example; the email was not sent","code":"recipient_blocked"}`
		if st != 403 || strings.TrimSpace(string(body)) != want {
			t.Fatalf("blocked recipient: %d %s", st, body)
		}
		req = e.newEmail(testkit.NewUUID(), "no such inbox")
		req["endpointId"] = testkit.NewUUID()
		if st, body := e.Board.Do("POST", e.sendPath(), req); st != 404 || strings.TrimSpace(string(body)) != `{"error":"Email inbox not found"}` {
			t.Fatalf("unknown inbox: %d %s", st, body)
		}
		if st, body := e.Board.Do("GET", "/api/email/inboxes/not-a-uuid/send-policy", nil); st != 400 ||
			strings.TrimSpace(string(body)) != `{"error":"invalid endpointId: must be a UUID"}` {
			t.Fatalf("policy of a malformed inbox id: %d %s", st, body)
		}
	})
}
