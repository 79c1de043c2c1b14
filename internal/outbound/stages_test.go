package outbound_test

import (
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The stage timestamps: a send's summary says when it was accepted, sent
// and delivered; a task's deliveries say when each event was admitted,
// by which transport, and when it woke the agent.
func TestStageTimestamps(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		key := testkit.NewUUID()
		acc := e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "When does it ship?"), 202)
		if acc["sentAt"] != nil || acc["deliveredAt"] != nil {
			t.Fatalf("accepted send already has stage times: %v", acc)
		}
		d := e.waitOutcome(key, "delivered")
		accepted, sent, delivered := testkit.ParseTime(t, d["createdAt"]), testkit.ParseTime(t, d["sentAt"]), testkit.ParseTime(t, d["deliveredAt"])
		if sent.Before(accepted) || delivered.Before(sent) {
			t.Fatalf("stage order: accepted %s, sent %s, delivered %s", accepted, sent, delivered)
		}

		path := func(issue string) string {
			return "/api/companies/" + e.CompanyID + "/email/tasks/" + issue + "/deliveries"
		}
		if got := e.Board.List(path(e.parent)); len(got) != 0 {
			t.Fatalf("a task without email has deliveries: %v", got)
		}
		// The send's receipts are bound to its conversation.
		testkit.Eventually(t, 30*time.Second, "the send's receipts on its task", func() bool {
			kinds := map[string]bool{}
			for _, r := range e.Board.List(path(acc["issueId"].(string))) {
				kinds[r["eventKind"].(string)] = r["state"] == "processed"
			}
			return kinds["message.sent"] && kinds["message.delivered"]
		})

		testkit.Eventually(t, 30*time.Second, "a subscribed socket", func() bool { return e.Em.SubscribedCount("sender@agentmail.to") == 1 })
		res, err := e.Em.Deliver("sender@agentmail.to", emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "Stage timing", Text: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		var task string
		testkit.Eventually(t, 30*time.Second, "the inbound task", func() bool {
			for _, is := range e.Board.List("/api/companies/" + e.CompanyID + "/issues?originKind=chat_channel") {
				if is["title"] == "Stage timing" {
					task = is["id"].(string)
				}
			}
			return task != ""
		})
		var got map[string]any
		testkit.Eventually(t, 30*time.Second, "the processed delivery", func() bool {
			list := e.Board.List(path(task))
			if len(list) != 1 || list[0]["state"] != "processed" {
				return false
			}
			got = list[0]
			return true
		})
		if got["eventKind"] != "message.received" || got["providerMessageId"] != res.MessageID || got["providerThreadId"] != res.ThreadID ||
			got["source"] != "websocket" || got["admissionToWakeMs"] == nil || got["error"] != nil {
			t.Fatalf("delivery: %v", got)
		}
		received, woke := testkit.ParseTime(t, got["receivedAt"]), testkit.ParseTime(t, got["wakeRequestedAt"])
		if woke.Before(received) || testkit.ParseTime(t, got["processedAt"]).Before(received) {
			t.Fatalf("stage order: received %s, wake %s", received, woke)
		}
	})
}
