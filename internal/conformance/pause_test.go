package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Mail that arrives while an inbox is paused starts no work: no delivery,
// no task, no wake until the inbox resumes; then the catch-up admits it
// once.
func TestMailDuringPause(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("napper", nil)
		e.Control(t, e.ep, "pause")
		res := e.deliver(emulator.DeliverRequest{Subject: "While you slept", Text: "hello?"})
		time.Sleep(2 * time.Second)
		if _, ok := e.deliveryOf(res.MessageID); ok {
			t.Fatal("mail was admitted while the inbox was paused")
		}
		testkit.MustEqual(t, "tasks while paused", len(e.tasksTitled("While you slept")), 0)
		e.Control(t, e.ep, "resume")
		task := e.task("While you slept")
		testkit.Eventually(t, wait, "one wake", func() bool { return len(e.wakes(task)) == 1 })
		d, _ := e.deliveryOf(res.MessageID)
		testkit.MustEqual(t, "admitted by", d.Source, "catchup")
		e.waitReceiving()
		e.settled()
		testkit.MustEqual(t, "tasks after resume", len(e.tasksTitled("While you slept")), 1)
		testkit.MustEqual(t, "wakes after resume", len(e.wakes(task)), 1)
	})
}

// Sends waiting when an inbox is paused (one retrying after a refused
// attempt, one queued behind it in the same conversation) stay untouched
// while it is paused, even when due, and go out in order on resume.
func TestSendsWaitDuringPause(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("holder", nil)
		task := e.inboundTask("Hold my replies")
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "reply_message"}, Status: 429, Code: "rate_limit_exceeded",
			Headers: map[string]string{"Retry-After": "30"}, Times: 1})
		first, second := e.reply(task, "first"), e.reply(task, "second")
		e.Board.JSON("POST", e.sendPath(), first, 202)
		e.waitOutcome(first["idempotencyKey"].(string), "uncertain")
		e.Board.JSON("POST", e.sendPath(), second, 202)

		e.Control(t, e.ep, "pause")
		before := e.providerSends()
		// Make the retry due now: a paused inbox must still not send.
		if _, err := e.DB.ExecContext(context.Background(), `UPDATE email_publications SET next_attempt_at = NULL WHERE id = $1`,
			first["idempotencyKey"]); err != nil {
			t.Fatal(err)
		}
		e.Outbound.Notify()
		time.Sleep(time.Second)
		testkit.MustEqual(t, "provider sends while paused", e.providerSends(), before)
		testkit.MustEqual(t, "first while paused", e.delivery(first["idempotencyKey"].(string))["outcome"], any("uncertain"))
		testkit.MustEqual(t, "second while paused", e.delivery(second["idempotencyKey"].(string))["outcome"], any("queued"))

		e.Control(t, e.ep, "resume")
		a := e.waitOutcome(first["idempotencyKey"].(string), "delivered")
		b := e.waitOutcome(second["idempotencyKey"].(string), "delivered")
		if !testkit.ParseTime(t, a["sentAt"]).Before(testkit.ParseTime(t, b["sentAt"])) && a["sentAt"] != b["sentAt"] {
			t.Fatalf("sends overtook each other: %v then %v", a["sentAt"], b["sentAt"])
		}
		testkit.MustEqual(t, "provider sends after resume", e.providerSends(), before+2)
	})
}

// Sends of an inbox that is disconnected end truthfully, in the same
// transaction as the disconnect: a send never attempted fails ("before
// this email was sent"); a send whose attempt may have reached the
// provider becomes uncertain for a manager to resolve. Resolving works on
// the archived inbox: "failed" as before, "sent" on the manager's word
// (the inbox's keys are gone, so the provider cannot be asked), audited as
// unverified. A send still pending on an archived inbox (as an older
// version could leave one) is settled by the worker. Nothing is sent after
// the disconnect.
func TestSendsOfADisconnectedInbox(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		ctx := context.Background()
		e := newEnv(t, url)
		e.connect("leaver", nil)
		task := e.inboundTask("Before I go")
		// Refused attempts that the provider never processed, each answered
		// with a long Retry-After: the sends stay uncertain meanwhile.
		for _, op := range []string{"reply_message", "send_message"} {
			e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Status: 503, Code: "service_unavailable",
				Headers: map[string]string{"Retry-After": "60"}, Times: 1})
		}
		first, second := e.reply(task, "first"), e.reply(task, "second")
		fresh := e.newEmail("client@example.com", "A new thread")
		e.Board.JSON("POST", e.sendPath(), first, 202)
		e.Board.JSON("POST", e.sendPath(), fresh, 202)
		firstKey, secondKey, freshKey := first["idempotencyKey"].(string), second["idempotencyKey"].(string), fresh["idempotencyKey"].(string)
		e.waitOutcome(firstKey, "uncertain")
		e.waitOutcome(freshKey, "uncertain")
		// Queued behind the uncertain first reply: never attempted.
		e.Board.JSON("POST", e.sendPath(), second, 202)
		before := e.providerSends()

		e.Control(t, e.ep, "remove")
		state := func(id string) string {
			var s string
			if err := e.DB.QueryRowContext(ctx, `SELECT state FROM email_publications WHERE id = $1`, id).Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		for _, k := range []string{firstKey, freshKey} {
			d := e.delivery(k)
			if d["outcome"] != "uncertain" || !strings.Contains(fmt.Sprint(d["error"]), "disconnected while this email may have been sent") {
				t.Fatalf("attempted send %s after the disconnect: %v", k, d)
			}
			testkit.MustEqual(t, "attempted send state", state(k), "delivery_unknown")
			if d["retrying"] != false || d["confirmationExpired"] != false {
				t.Fatalf("a send parked by the disconnect is neither retrying nor past its window: %v", d)
			}
		}
		d := e.delivery(secondKey)
		if d["outcome"] != "failed" || !strings.Contains(fmt.Sprint(d["error"]), "disconnected before this email was sent") {
			t.Fatalf("queued send after the disconnect: %v", d)
		}
		testkit.MustEqual(t, "queued send state", state(secondKey), "failed")
		e.Em.ClearFaults()
		e.Outbound.Notify()
		time.Sleep(time.Second)
		testkit.MustEqual(t, "provider sends after the disconnect", e.providerSends(), before)

		resolve := func(k string, body map[string]any, want int) map[string]any {
			return e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/deliveries/"+k+"/resolve", body, want)
		}
		resolve(secondKey, map[string]any{"outcome": "failed"}, 409)
		const checked = "<checked-in-agentmail@agentmail.to>"
		out := resolve(firstKey, map[string]any{"outcome": "sent", "providerMessageId": checked}, 200)
		if out["outcome"] != "sent" || out["providerMessageId"] != checked || out["sentAt"] == nil {
			t.Fatalf("resolved as sent on the archived inbox: %v", out)
		}
		if st, body := e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/deliveries/"+freshKey+"/resolve",
			map[string]any{"outcome": "sent", "providerMessageId": checked}); st != 409 || !strings.Contains(string(body), "another send") {
			t.Fatalf("another send's message: %d %s", st, body)
		}
		out = resolve(freshKey, map[string]any{"outcome": "failed"}, 200)
		if out["outcome"] != "failed" || !strings.Contains(fmt.Sprint(out["error"]), "Operator confirmed") {
			t.Fatalf("resolved as failed on the archived inbox: %v", out)
		}
		var details string
		var audit struct{ Verified *bool }
		if err := e.DB.QueryRowContext(ctx, `SELECT details FROM activity_log WHERE action = 'email.resolved' AND entity_id = $1`,
			firstKey).Scan(&details); err != nil || json.Unmarshal([]byte(details), &audit) != nil || audit.Verified == nil || *audit.Verified {
			t.Fatalf("audit of the unverified resolution: %q %v", details, err)
		}

		// A send left pending on an archived inbox: the worker settles it.
		if _, err := e.DB.ExecContext(ctx, `UPDATE email_publications SET state = 'pending', redacted_error = NULL WHERE id = $1`, secondKey); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, `UPDATE email_sends SET outcome = 'queued' WHERE publication_id = $1`, secondKey); err != nil {
			t.Fatal(err)
		}
		e.Outbound.Notify()
		e.waitOutcome(secondKey, "failed")
		testkit.MustEqual(t, "settled by the worker", state(secondKey), "failed")
		testkit.MustEqual(t, "provider sends in the end", e.providerSends(), before)
	})
}
