package conformance_test

import (
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Complaint and rejection receipts fail the send with a clear error; a
// complaint also suppresses the recipient (the next send to it fails at
// acceptance and never reaches the provider), a rejection does not. A
// receipt emitted while no socket is connected is applied by the catch-up
// scan from the sent message's labels.
func TestComplainedAndRejectedReceipts(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("receipts", nil)

		complained := e.newEmail("complain@example.com", "Complained")
		e.Board.JSON("POST", e.sendPath(), complained, 202)
		d := e.waitOutcome(complained["idempotencyKey"].(string), "failed")
		testkit.MustEqual(t, "complaint error", d["error"], any("AgentMail reported message.complained"))
		// It went out: its label says so, not "Not sent".
		testkit.MustEqual(t, "complaint receipt", d["receipt"], any("complained"))
		testkit.MustEqual(t, "complaint label", d["label"], any("Delivered, then marked as spam by the recipient"))
		if d["providerMessageId"] == nil || d["sentAt"] == nil || d["deliveredAt"] != nil {
			t.Fatalf("complained send: %v", d)
		}
		before := e.providerSends()
		again := e.newEmail("Complain@Example.com", "To a complainer")
		acc := e.Board.JSON("POST", e.sendPath(), again, 202)
		if acc["outcome"] != "failed" || acc["error"] == nil || acc["label"] != "Not sent" || acc["receipt"] != nil {
			t.Fatalf("send to a suppressed recipient: %v", acc)
		}
		// The refusal names the address, why, since when, and where the
		// suppression list is (issue 30).
		if msg, _ := acc["error"].(string); acc["errorCode"] != "recipient_suppressed" || !strings.Contains(msg, "complain@example.com") ||
			!strings.Contains(msg, "complained") || !strings.Contains(msg, "suppressed since") ||
			acc["errorDetails"].(map[string]any)["suppressions"] != "/api/companies/"+e.CompanyID+"/email/suppressions" {
			t.Fatalf("suppressed send's refusal: %v", acc)
		}

		rejected := e.newEmail("reject@example.com", "Rejected")
		e.Board.JSON("POST", e.sendPath(), rejected, 202)
		d = e.waitOutcome(rejected["idempotencyKey"].(string), "failed")
		testkit.MustEqual(t, "rejection error", d["error"], any("AgentMail reported message.rejected"))
		testkit.MustEqual(t, "rejection receipt", d["receipt"], any("rejected"))
		retry := e.newEmail("reject@example.com", "Rejected again")
		if acc := e.Board.JSON("POST", e.sendPath(), retry, 202); acc["outcome"] != "queued" {
			t.Fatalf("a rejection must not suppress the recipient: %v", acc)
		}
		e.waitOutcome(retry["idempotencyKey"].(string), "failed")
		testkit.MustEqual(t, "provider sends (none to the suppressed recipient)", e.providerSends(), before+2)

		// No live connection while the complaint arrives: the catch-up
		// scan finds it on the sent message.
		fault := e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "websocket"}, Status: 503, Code: "service_unavailable"})
		e.Em.DropWebSockets()
		late := e.newEmail("complain@late.example", "Complained offline")
		e.Board.JSON("POST", e.sendPath(), late, 202)
		e.waitOutcome(late["idempotencyKey"].(string), "sent", "failed")
		if err := e.Em.RemoveFault(fault); err != nil {
			t.Fatal(err)
		}
		d = e.waitOutcome(late["idempotencyKey"].(string), "failed")
		testkit.MustEqual(t, "caught-up complaint", d["error"], any("AgentMail reported message.complained"))
		var source string
		testkit.Eventually(t, wait, "the complaint's delivery", func() bool {
			for _, dl := range e.deliveries() {
				if dl.DeduplicationKey == "message.complained:"+d["providerMessageId"].(string) {
					source = dl.Source
				}
			}
			return source != ""
		})
		testkit.MustEqual(t, "complaint admitted by", source, "catchup")
	})
}
