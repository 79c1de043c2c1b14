package outbound_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func (e *sendEnv) policyPath() string { return "/api/email/inboxes/" + e.endpoint + "/send-policy" }

func (e *sendEnv) reviewPath(id string) string {
	return "/api/companies/" + e.CompanyID + "/email/deliveries/" + id + "/review"
}

// setPolicy replaces the inbox's send policy as the board.
func (e *sendEnv) setPolicy(p map[string]any) map[string]any {
	return e.Board.JSON("PUT", e.policyPath(), p, 200)
}

// member adds a company member with role and returns its client.
func (e *sendEnv) member(email, role string) *testkit.Client {
	m := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/members", map[string]any{"email": email, "role": role}, 201)
	k := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/board-keys", map[string]any{"userId": m["userId"]}, 201)
	return e.Board.As(k["token"].(string), "")
}

// held sends a new email to to and requires it held for review.
func (e *sendEnv) held(c *testkit.Client, key, to, text string) map[string]any {
	e.t.Helper()
	req := e.newEmail(key, text)
	req["to"] = []string{to}
	acc := c.JSON("POST", e.sendPath(), req, 202)
	if acc["outcome"] != "awaiting_review" || acc["retrying"] != false || !strings.Contains(acc["message"].(string), "do not send it again") {
		e.t.Fatalf("a held send's answer: %v", acc)
	}
	return acc
}

// Hold → approve → delivered once; a second approval sends nothing more
// (409 with the outcome); the approved recipient is remembered.
func TestHeldSendApprovedIsDeliveredOnce(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.setPolicy(map[string]any{"review": "new_recipients"})
		key := testkit.NewUUID()
		acc := e.held(e.Board, key, "stranger@example.com", "Hello, stranger.")
		rv := acc["review"].(map[string]any)
		if rv["status"] != "awaiting_review" || rv["reasons"].([]any)[0] != "new_recipient:stranger@example.com" || rv["expiresAt"] == nil {
			t.Fatalf("review of a held send: %v", rv)
		}
		// The queue lists it; no provider call is made while it waits.
		q := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/publications?outcome=awaiting_review", nil, 200)
		if items := q["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != key {
			t.Fatalf("review queue: %v", q)
		}
		e.Outbound.Notify()
		if n := e.sendRequests(key); n != 0 {
			t.Fatalf("a held send reached the provider %d times", n)
		}
		out := e.Board.JSON("POST", e.reviewPath(key), map[string]any{"action": "approve"}, 200)
		if out["outcome"] != "queued" && out["outcome"] != "sent" && out["outcome"] != "delivered" {
			t.Fatalf("approval: %v", out)
		}
		d := e.waitOutcome(key, "delivered")
		rv = d["review"].(map[string]any)
		if rv["status"] != "approved" || rv["decidedByUserId"] == nil || rv["changes"] != nil {
			t.Fatalf("approved review: %v", rv)
		}
		st, body := e.Board.Do("POST", e.reviewPath(key), map[string]any{"action": "approve"})
		if st != 409 || !strings.Contains(string(body), `"outcome":"delivered"`) {
			t.Fatalf("second approval: %d %s", st, body)
		}
		if n := e.sendRequests(key); n != 1 {
			t.Fatalf("provider send requests for the approved send: %d, want 1", n)
		}
		if n := e.count(`SELECT COUNT(*) FROM activity_log WHERE action = 'email.review_approved' AND entity_id = $1 AND actor_kind = 'board'`, key); n != 1 {
			t.Fatalf("approval audit entries: %d", n)
		}
		// The approved recipient is remembered: a new email goes out at once.
		again := testkit.NewUUID()
		req := e.newEmail(again, "Following up.")
		req["to"] = []string{"Stranger@Example.com"}
		if acc := e.Board.JSON("POST", e.sendPath(), req, 202); acc["outcome"] != "queued" {
			t.Fatalf("send to a remembered recipient: %v", acc)
		}
		e.waitOutcome(again, "sent", "delivered")
	})
}

// Edit then approve: the provider receives the edited text, subject and
// recipients; the original request and the changes are both kept.
func TestApproveWithEditsSendsTheEditedVersion(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.setPolicy(map[string]any{"review": "all"})
		key := testkit.NewUUID()
		e.held(e.Board, key, "lead@example.com", "Buy now!!!")
		// Validation of edits: a bad address, an empty text.
		if st, _ := e.Board.Do("POST", e.reviewPath(key), map[string]any{"action": "approve", "to": []string{"not an address"}}); st != 400 {
			t.Fatalf("bad edited recipient: %d", st)
		}
		if st, _ := e.Board.Do("POST", e.reviewPath(key), map[string]any{"action": "approve", "text": "  "}); st != 400 {
			t.Fatalf("empty edited text: %d", st)
		}
		e.Board.JSON("POST", e.reviewPath(key), map[string]any{"action": "approve", "text": "Would a short call next week suit you?",
			"subject": "A short call?", "to": []string{"lead@example.com", "boss@example.com"}, "cc": []string{"cc@example.com"}}, 200)
		d := e.waitOutcome(key, "sent", "delivered")
		m := e.outboxBy(key)
		if m.Text != "Would a short call next week suit you?" || m.Subject != "A short call?" || len(m.To) != 2 || len(m.Cc) != 1 {
			t.Fatalf("the provider received: %+v", m)
		}
		var orig map[string]any
		if err := json.Unmarshal(mustRaw(d["request"]), &orig); err != nil || orig["text"] != "Buy now!!!" {
			t.Fatalf("the original request was not kept: %v %v", d["request"], err)
		}
		ch := d["review"].(map[string]any)["changes"].(map[string]any)
		if ch["text"].(map[string]any)["from"] != "Buy now!!!" || ch["subject"].(map[string]any)["to"] != "A short call?" {
			t.Fatalf("changes: %v", ch)
		}
	})
}

func mustRaw(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Reject: terminal, nothing sent, the agent woken on the task with a
// comment quoting the reason; approving afterwards is a 409. Viewers and
// (below, in e2e) agents may not review; members may.
func TestRejectWakesTheAgentWithTheReason(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.setPolicy(map[string]any{"review": "all"})
		key := testkit.NewUUID()
		acc := e.held(e.Board, key, "lead@example.com", "Hi")
		viewer := e.member("viewer@example.com", "viewer")
		if st, body := viewer.Do("POST", e.reviewPath(key), map[string]any{"action": "approve"}); st != 403 {
			t.Fatalf("a viewer's approval: %d %s", st, body)
		}
		if st, _ := e.Board.Do("POST", e.reviewPath(key), map[string]any{"action": "reject"}); st != 400 {
			t.Fatalf("reject without a reason: %d", st)
		}
		if st, _ := e.Board.Do("POST", e.reviewPath(key), map[string]any{"action": "reject", "reason": "x", "extra": 1}); st != 400 {
			t.Fatalf("unknown field: %d", st)
		}
		member := e.member("member@example.com", "member")
		out := member.JSON("POST", e.reviewPath(key), map[string]any{"action": "reject", "reason": "Too pushy; ask about their timeline first."}, 200)
		if out["outcome"] != "rejected" || out["review"].(map[string]any)["reason"] != "Too pushy; ask about their timeline first." {
			t.Fatalf("rejection: %v", out)
		}
		st, body := e.Board.Do("POST", e.reviewPath(key), map[string]any{"action": "approve"})
		if st != 409 || !strings.Contains(string(body), `"outcome":"rejected"`) {
			t.Fatalf("approving a rejected send: %d %s", st, body)
		}
		task := acc["issueId"].(string)
		testkit.Eventually(t, 30*time.Second, "the agent woken on the task", func() bool { return e.runsFor(task) == 1 })
		if n := e.count(`SELECT COUNT(*) FROM issue_comments WHERE issue_id = $1 AND body LIKE '%Too pushy; ask about their timeline first.%'`, task); n != 1 {
			t.Fatalf("comments quoting the reason: %d", n)
		}
		if n := e.sendRequests(key); n != 0 {
			t.Fatalf("a rejected send reached the provider %d times", n)
		}
	})
}

// Expiry: a held send nobody reviews ends expired, and the agent learns.
func TestHeldSendExpires(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.setPolicy(map[string]any{"review": "all", "reviewExpiresHours": 1})
		key := testkit.NewUUID()
		acc := e.held(e.Board, key, "lead@example.com", "Hi")
		// Stand in for the hour passing.
		if _, err := e.DB.ExecContext(context.Background(), `UPDATE email_send_reviews SET expires_at = $2 WHERE publication_id = $1`,
			key, time.Now().UTC().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		e.Outbound.Notify()
		d := e.waitOutcome(key, "expired")
		if d["review"].(map[string]any)["status"] != "expired" || d["label"] != "Review expired: not sent" {
			t.Fatalf("expired send: %v", d)
		}
		task := acc["issueId"].(string)
		testkit.Eventually(t, 30*time.Second, "the agent woken on the task", func() bool { return e.runsFor(task) == 1 })
		if st, _ := e.Board.Do("POST", e.reviewPath(key), map[string]any{"action": "approve"}); st != 409 {
			t.Fatalf("approving an expired send: %d", st)
		}
		if n := e.sendRequests(key); n != 0 {
			t.Fatalf("an expired send reached the provider %d times", n)
		}
	})
}

// Blocked and allowed recipients, the policy's validation and access, and
// the "wrote in" rule of new_recipients.
func TestSendPolicyRecipients(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		if p := e.Board.JSON("GET", e.policyPath(), nil, 200); p["review"] != "off" || p["reviewExpiresHours"] != float64(72) {
			t.Fatalf("an existing inbox's default policy: %v", p)
		}
		for _, bad := range []map[string]any{{"review": "sometimes"}, {"review": "off", "blockedRecipients": []string{"not a domain"}},
			{"review": "off", "reviewExpiresHours": 10_000}, {"review": "off", "unknown": true}, {}} {
			if st, _ := e.Board.Do("PUT", e.policyPath(), bad); st != 400 {
				t.Fatalf("invalid policy %v: %d", bad, st)
			}
		}
		viewer := e.member("viewer@example.com", "viewer")
		member := e.member("member@example.com", "member")
		viewer.JSON("GET", e.policyPath(), nil, 200)
		if st, _ := member.Do("PUT", e.policyPath(), map[string]any{"review": "off"}); st != 403 {
			t.Fatalf("a member's policy change: %d", st)
		}
		p := e.setPolicy(map[string]any{"review": "off", "blockedRecipients": []string{"Competitor.COM", "spy@example.net"},
			"allowedRecipients": []string{"example.com", "ann@partner.org"}})
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(e.Logs.String())
			}
		})
		if p["blockedRecipients"].([]any)[0] != "competitor.com" {
			t.Fatalf("normalized policy: %v", p)
		}
		pubs := func() int {
			return e.count(`SELECT COUNT(*) FROM email_publications WHERE endpoint_id = $1`, e.endpoint)
		}
		send := func(to string) (int, string) {
			req := e.newEmail(testkit.NewUUID(), "hello")
			req["to"] = []string{"lead@example.com"}
			req["cc"] = []string{to}
			st, body := e.Board.Do("POST", e.sendPath(), req)
			return st, string(body)
		}
		before := pubs()
		for _, to := range []string{"x@competitor.com", "X@Mail.Competitor.Com", "spy@example.net"} {
			if st, body := send(to); st != 403 || !strings.Contains(body, "recipient_blocked") {
				t.Fatalf("blocked %s: %d %s", to, st, body)
			}
		}
		if st, body := send("bob@elsewhere.org"); st != 403 || !strings.Contains(body, "recipient_not_allowed") {
			t.Fatalf("outside the allow list with review off: %d %s", st, body)
		}
		if pubs() != before {
			t.Fatal("a refused send was queued")
		}
		if st, body := send("ann@partner.org"); st != 202 || !strings.Contains(body, `"outcome":"queued"`) {
			t.Fatalf("allowed recipient: %d %s", st, body)
		}
		// With review on, outside the allow list holds instead.
		e.setPolicy(map[string]any{"review": "new_recipients", "allowedRecipients": []string{"example.com", "ann@partner.org"}})
		if st, body := send("bob@elsewhere.org"); st != 202 || !strings.Contains(body, "not_allowed:bob@elsewhere.org") {
			t.Fatalf("outside the allow list with review: %d %s", st, body)
		}
		// Someone who wrote to the inbox may be mailed at once.
		e.setPolicy(map[string]any{"review": "new_recipients"})
		if _, err := e.Em.Deliver("sender@agentmail.to", emulator.DeliverRequest{From: "Carol <carol@customer.io>", Subject: "A question",
			Text: "Can you help?"}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "Carol's mail retained", func() bool {
			return e.count(`SELECT COUNT(*) FROM email_messages WHERE endpoint_id = $1 AND direction = 'inbound'`, e.endpoint) == 1
		})
		req := e.newEmail(testkit.NewUUID(), "Yes, happy to help.")
		req["to"] = []string{"CAROL@customer.io"}
		if acc := e.Board.JSON("POST", e.sendPath(), req, 202); acc["outcome"] != "queued" {
			t.Fatalf("mail to someone who wrote in: %v", acc)
		}
		req = e.newEmail(testkit.NewUUID(), "Cold outreach")
		req["to"] = []string{"dave@customer.io"}
		if acc := e.Board.JSON("POST", e.sendPath(), req, 202); acc["outcome"] != "awaiting_review" {
			t.Fatalf("mail to a stranger: %v", acc)
		}
	})
}

// The review metrics: paperclip_email_sends_held counts the sends waiting
// now, and paperclip_email_review_wait_seconds observes each decision's
// wait by decision.
func TestReviewMetrics(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.setPolicy(map[string]any{"review": "all"})
		metric := func(name string) string {
			t.Helper()
			_, body := testkit.NewClient(t, e.URL()).Do("GET", "/metrics", nil)
			for _, line := range strings.Split(string(body), "\n") {
				if rest, ok := strings.CutPrefix(line, name+" "); ok {
					return rest
				}
			}
			t.Fatalf("no metric %s in /metrics", name)
			return ""
		}
		approved := `paperclip_email_review_wait_seconds_count{decision="approved"}`
		rejected := `paperclip_email_review_wait_seconds_count{decision="rejected"}`
		if metric("paperclip_email_sends_held") != "0" || metric(approved) != "0" {
			t.Fatalf("before: held %s, approved %s", metric("paperclip_email_sends_held"), metric(approved))
		}
		a, b := testkit.NewUUID(), testkit.NewUUID()
		e.held(e.Board, a, "one@example.com", "First.")
		e.held(e.Board, b, "two@example.com", "Second.")
		if got := metric("paperclip_email_sends_held"); got != "2" {
			t.Fatalf("held after two holds: %s", got)
		}
		e.Board.JSON("POST", e.reviewPath(a), map[string]any{"action": "approve"}, 200)
		e.Board.JSON("POST", e.reviewPath(b), map[string]any{"action": "reject", "reason": "not now"}, 200)
		if metric("paperclip_email_sends_held") != "0" || metric(approved) != "1" || metric(rejected) != "1" {
			t.Fatalf("after the decisions: held %s, approved %s, rejected %s", metric("paperclip_email_sends_held"),
				metric(approved), metric(rejected))
		}
	})
}
