package conformance_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func (e *env) policy(body map[string]any) string {
	e.t.Helper()
	return testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/action-policies", body, 201))
}

// inboundTask delivers a message and returns its task id.
func (e *env) inboundTask(subject string) string {
	e.t.Helper()
	e.deliver(emulator.DeliverRequest{Subject: subject, Text: "question"})
	return e.task(subject)
}

// The per-thread send cap (email.thread_sends): 20 sends an hour into one
// conversation by default, then 429 with Retry-After; a company policy
// with a rate limit overrides the default; other conversations are not
// affected.
func TestThreadSendCap(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("capped", nil)
		busy := e.inboundTask("Busy thread")
		for i := range 20 {
			e.Board.JSON("POST", e.sendPath(), e.reply(busy, fmt.Sprintf("answer %d", i+1)), 202)
		}
		body, _ := encode(e.reply(busy, "one too many"))
		resp := e.rawPost(e.sendPath(), body)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("21st send into the thread: %d (Retry-After %q)", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		st, raw := e.Board.Do("POST", e.sendPath(), e.reply(busy, "still too many"))
		if st != http.StatusTooManyRequests || errorOf(t, raw)["code"] != "email_rate_limited" {
			t.Fatalf("capped answer: %d %s", st, raw)
		}
		// Another conversation still works, until a company policy caps it
		// lower.
		quiet := e.inboundTask("Quiet thread")
		e.policy(map[string]any{"action": "email.thread_sends", "effect": "allow", "rateLimitCount": 2, "rateLimitWindowSeconds": 3600})
		e.Board.JSON("POST", e.sendPath(), e.reply(quiet, "first"), 202)
		e.Board.JSON("POST", e.sendPath(), e.reply(quiet, "second"), 202)
		st, raw = e.Board.Do("POST", e.sendPath(), e.reply(quiet, "third"))
		if st != http.StatusTooManyRequests || !strings.Contains(string(raw), "Email send limit reached") {
			t.Fatalf("policy cap: %d %s", st, raw)
		}
	})
}

// A deny action policy refuses through the send route (403
// action_policy_denied, per action) and again at execution: sends accepted
// before the policy existed fail without reaching the provider, a retrying
// one and the one queued behind it alike.
func TestDenyPolicyAtRouteAndExecution(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("guarded", nil)
		task := e.inboundTask("Guarded thread")

		deny := e.policy(map[string]any{"action": "email.send", "effect": "deny", "reason": "No new conversations"})
		st, raw := e.Board.Do("POST", e.sendPath(), e.newEmail("x@example.com", "Denied"))
		if st != http.StatusForbidden || errorOf(t, raw)["code"] != "action_policy_denied" || !strings.Contains(string(raw), "No new conversations") {
			t.Fatalf("denied new email: %d %s", st, raw)
		}
		// The policy names one action: replies still pass.
		allowed := e.reply(task, "allowed reply")
		e.Board.JSON("POST", e.sendPath(), allowed, 202)
		e.waitOutcome(allowed["idempotencyKey"].(string), "delivered")
		e.Board.JSON("DELETE", "/api/companies/"+e.CompanyID+"/action-policies/"+deny, nil, 204)

		// A reply whose first attempt is rate limited for 30 s, and a
		// second reply queued behind it in the same conversation.
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "reply_message"}, Status: 429, Code: "rate_limit_exceeded",
			Headers: map[string]string{"Retry-After": "30"}, Times: 1})
		first := e.reply(task, "retrying")
		e.Board.JSON("POST", e.sendPath(), first, 202)
		e.waitOutcome(first["idempotencyKey"].(string), "uncertain")
		second := e.reply(task, "queued behind")
		e.Board.JSON("POST", e.sendPath(), second, 202)
		time.Sleep(300 * time.Millisecond)
		testkit.MustEqual(t, "queued behind the retrying send", e.delivery(second["idempotencyKey"].(string))["outcome"], any("queued"))

		e.policy(map[string]any{"action": "email.reply", "effect": "deny", "reason": "Replies stopped"})
		st, raw = e.Board.Do("POST", e.sendPath(), e.reply(task, "refused at once"))
		if st != http.StatusForbidden || errorOf(t, raw)["code"] != "action_policy_denied" {
			t.Fatalf("denied reply: %d %s", st, raw)
		}
		sendsBefore := e.providerSends()
		if _, err := e.DB.ExecContext(context.Background(), `UPDATE email_publications SET next_attempt_at = NULL WHERE id = $1`,
			first["idempotencyKey"]); err != nil {
			t.Fatal(err)
		}
		e.Outbound.Notify()
		for _, req := range []map[string]any{first, second} {
			d := e.waitOutcome(req["idempotencyKey"].(string), "failed", "sent", "delivered")
			if d["outcome"] != "failed" || d["error"] != "Action policy no longer allows this email" {
				t.Fatalf("send after the deny policy: %v", d)
			}
		}
		testkit.MustEqual(t, "provider sends after the deny policy", e.providerSends(), sendsBefore)
	})
}
