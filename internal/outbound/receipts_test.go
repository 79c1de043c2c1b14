package outbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// AgentMail does not replay events a live connection missed, so a delivery
// receipt emitted while the socket was down would be lost if the catch-up
// scan only looked for messages: the scan also reads the sent message's
// receipt labels and admits the receipts the socket did not bring.
func TestReceiptMissedByTheSocketIsCaughtUp(t *testing.T) {
	t.Setenv("PAPERCLIP_EMAIL_RECONNECT_MIN", "200ms")
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		testkit.Eventually(t, 30*time.Second, "a subscribed WebSocket", func() bool {
			return e.Inbound.SocketConnected(e.endpoint) && e.Em.WebSocketCount() == 1
		})
		// The provider refuses the live connection until the receipt is out.
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "websocket"}, Status: 503})
		e.Em.DropWebSockets()
		testkit.Eventually(t, 30*time.Second, "the socket to drop", func() bool { return !e.Inbound.SocketConnected(e.endpoint) })
		key := testkit.NewUUID()
		e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "receipt while offline"), 202)
		e.waitOutcome(key, "sent", "delivered")
		m := e.outboxBy(key)
		client := e.Email.Client.WithAPIKey(e.OrgKey)
		testkit.Eventually(t, 30*time.Second, "the provider to label the message delivered", func() bool {
			msg, err := client.GetMessage(context.Background(), "sender@agentmail.to", m.MessageID)
			return err == nil && msg.HasLabel("delivered")
		})
		if d := e.delivery(key); d["outcome"] != "sent" {
			t.Fatalf("outcome %v before the socket came back: the receipt cannot have arrived", d["outcome"])
		}
		e.Em.ClearFaults()
		e.waitOutcome(key, "delivered")
		if n := e.count(`SELECT COUNT(*) FROM email_deliveries WHERE deduplication_key = $1 AND source = 'catchup'`,
			"message.delivered:"+m.MessageID); n != 1 {
			t.Fatalf("catch-up admitted %d delivered receipts, want 1", n)
		}
	})
}
