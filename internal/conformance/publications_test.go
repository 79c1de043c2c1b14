package conformance_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// sendsPage reads one page of the company's sends listing.
func (e *env) sendsPage(query string) ([]map[string]any, string) {
	e.t.Helper()
	out := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/publications"+query, nil, 200)
	var items []map[string]any
	for _, it := range out["items"].([]any) {
		items = append(items, it.(map[string]any))
	}
	next, _ := out["nextCursor"].(string)
	return items, next
}

// The operator's listing of sends (GET …/email/publications): newest
// first, filtered by outcome, paged with an opaque cursor, each send with
// its task's title, its recipients (a reply's computed from the message
// it answers), attempts and last error. An uncertain send found there is
// resolved as not sent and then lists as failed.
func TestSendsListing(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := newEnv(t, dbURL)
		e.connect("lister", nil)
		task := e.inboundTask("Where is my order")

		delivered := e.newEmail("buyer@example.com", "Your order")
		e.Board.JSON("POST", e.sendPath(), delivered, 202)
		e.waitOutcome(delivered["idempotencyKey"].(string), "delivered")
		bounced := e.newEmail("bounce@example.com", "To nowhere")
		e.Board.JSON("POST", e.sendPath(), bounced, 202)
		e.waitOutcome(bounced["idempotencyKey"].(string), "failed")
		// Refused attempts with a long Retry-After: both stay uncertain.
		for _, op := range []string{"reply_message", "send_message"} {
			e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Status: 503, Code: "service_unavailable",
				Headers: map[string]string{"Retry-After": "60"}, Times: 1})
		}
		stuckReply := e.reply(task, "It ships tomorrow.")
		e.Board.JSON("POST", e.sendPath(), stuckReply, 202)
		e.waitOutcome(stuckReply["idempotencyKey"].(string), "uncertain")
		stuckNew := e.newEmail("ops@example.com", "Stuck new email")
		stuckNew["cc"], stuckNew["bcc"] = []string{"cc@example.com"}, []string{"audit@example.com"}
		e.Board.JSON("POST", e.sendPath(), stuckNew, 202)
		e.waitOutcome(stuckNew["idempotencyKey"].(string), "uncertain")
		order := []string{stuckNew["idempotencyKey"].(string), stuckReply["idempotencyKey"].(string),
			bounced["idempotencyKey"].(string), delivered["idempotencyKey"].(string)}

		all, next := e.sendsPage("")
		if len(all) != 4 || next != "" {
			t.Fatalf("listing: %d items, next %q", len(all), next)
		}
		for i, it := range all {
			testkit.MustEqual(t, "newest first", it["id"], any(order[i]))
		}

		uncertain, _ := e.sendsPage("?outcome=uncertain")
		if len(uncertain) != 2 {
			t.Fatalf("uncertain sends: %v", uncertain)
		}
		fresh, reply := uncertain[0], uncertain[1]
		testkit.MustEqual(t, "new email's task", fresh["taskTitle"], any("Stuck new email"))
		testkit.MustEqual(t, "reply's task", reply["taskTitle"], any("Where is my order"))
		testkit.MustEqual(t, "reply's task id", reply["issueId"], any(task))
		rcpt := func(it map[string]any, field string) string {
			var out []string
			for _, a := range it["recipients"].(map[string]any)[field].([]any) {
				out = append(out, a.(string))
			}
			return strings.Join(out, ",")
		}
		testkit.MustEqual(t, "new email to", rcpt(fresh, "to"), "ops@example.com")
		testkit.MustEqual(t, "new email cc", rcpt(fresh, "cc"), "cc@example.com")
		testkit.MustEqual(t, "new email bcc", rcpt(fresh, "bcc"), "audit@example.com")
		testkit.MustEqual(t, "reply to (from the message it answers)", rcpt(reply, "to"), "jane@example.com")
		for _, it := range uncertain {
			if it["attempts"].(float64) < 1 || it["error"] == nil || it["providerMessageId"] != nil || it["createdAt"] == nil {
				t.Fatalf("uncertain send: %v", it)
			}
		}
		failed, _ := e.sendsPage("?outcome=failed")
		if len(failed) != 1 || failed[0]["receipt"] != "bounced" || failed[0]["providerMessageId"] == nil {
			t.Fatalf("failed sends: %v", failed)
		}

		// Pages of one, in the same order, until nextCursor is null.
		var paged []string
		q := "?limit=1"
		for range 10 {
			items, next := e.sendsPage(q)
			for _, it := range items {
				paged = append(paged, it["id"].(string))
			}
			if next == "" {
				break
			}
			q = "?limit=1&cursor=" + url.QueryEscape(next)
		}
		testkit.MustEqual(t, "paged listing", strings.Join(paged, " "), strings.Join(order, " "))

		for _, bad := range []string{"?outcome=lost", "?limit=0", "?limit=201", "?limit=x", "?cursor=nope"} {
			if st, body := e.Board.Do("GET", "/api/companies/"+e.CompanyID+"/email/publications"+bad, nil); st != 400 {
				t.Fatalf("GET %s: %d %s", bad, st, body)
			}
		}

		// The procedure: AgentMail has no message for the stuck new email,
		// so it is resolved as not sent, and lists as failed.
		if n := len(e.Em.Outbox("ops@example.com", e.addr)); n != 0 {
			t.Fatalf("provider messages to the stuck send's recipient: %d", n)
		}
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/deliveries/"+order[0]+"/resolve", map[string]any{"outcome": "failed"}, 200)
		failed, _ = e.sendsPage("?outcome=failed")
		if len(failed) != 2 || failed[0]["id"] != order[0] || failed[0]["label"] != "Not sent" ||
			!strings.Contains(failed[0]["error"].(string), "Operator confirmed") {
			t.Fatalf("resolved send: %v", failed)
		}
	})
}
