package conformance_test

import (
	"context"
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
		mustEqual(t, "tasks while paused", len(e.tasksTitled("While you slept")), 0)
		e.Control(t, e.ep, "resume")
		task := e.task("While you slept")
		testkit.Eventually(t, wait, "one wake", func() bool { return len(e.wakes(task)) == 1 })
		d, _ := e.deliveryOf(res.MessageID)
		mustEqual(t, "admitted by", d.Source, "catchup")
		e.waitReceiving()
		e.settled()
		mustEqual(t, "tasks after resume", len(e.tasksTitled("While you slept")), 1)
		mustEqual(t, "wakes after resume", len(e.wakes(task)), 1)
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
		mustEqual(t, "provider sends while paused", e.providerSends(), before)
		mustEqual(t, "first while paused", e.delivery(first["idempotencyKey"].(string))["outcome"], any("uncertain"))
		mustEqual(t, "second while paused", e.delivery(second["idempotencyKey"].(string))["outcome"], any("queued"))

		e.Control(t, e.ep, "resume")
		a := e.waitOutcome(first["idempotencyKey"].(string), "delivered")
		b := e.waitOutcome(second["idempotencyKey"].(string), "delivered")
		if !parseTime(t, a["sentAt"]).Before(parseTime(t, b["sentAt"])) && a["sentAt"] != b["sentAt"] {
			t.Fatalf("sends overtook each other: %v then %v", a["sentAt"], b["sentAt"])
		}
		mustEqual(t, "provider sends after resume", e.providerSends(), before+2)
	})
}

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("not a timestamp: %v", v)
	}
	return tm
}
