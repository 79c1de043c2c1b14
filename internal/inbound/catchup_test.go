package inbound_test

import (
	"encoding/json"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Mail that arrives after a catch-up scan has listed the inbox but before
// the live connection subscribes is seen by neither: the subscription must
// therefore trigger a fresh scan even when it happens while that earlier
// scan is still running. (A scan finishing after the subscription used to
// record itself as the forced one, and the message then waited for the next
// periodic scan, 60 s later.)
func TestSubscriptionDuringCatchupScansAgain(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "", nil)
		// The activation scan sees an empty inbox (its listing predates the
		// mail) and answers only after the socket has subscribed; the
		// handshake itself is held back until after the mail arrived.
		empty, _ := json.Marshal(map[string]any{"count": 0, "limit": 100, "messages": []any{}})
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "list_messages"}, Status: 200, Body: empty,
			DelayMS: 3000, Times: 1})
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "websocket"}, DelayMS: 1000, Times: 1})
		e.connect("latecomer", nil)
		if e.Em.WebSocketCount() != 0 {
			t.Log("the socket connected before the mail: this run does not exercise the race")
		}
		msg := e.deliver(emulator.DeliverRequest{Subject: "Between scan and socket", Text: "Anyone there?"})
		ds := e.settled(1)
		testkit.MustEqual(t, "delivery source", ds[0].Source, queue.SourceCatchup)
		testkit.MustEqual(t, "dedup key", ds[0].DeduplicationKey, "message.received:"+msg.MessageID)
		testkit.MustEqual(t, "tasks", len(e.tasks()), 1)
		testkit.Eventually(t, wait, "the live connection", func() bool { return e.Inbound.SocketConnected(e.EpID) })
	})
}
