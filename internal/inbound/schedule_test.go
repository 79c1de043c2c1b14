package inbound_test

import (
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The worker caches the active inbox check per credential version; a
// lifecycle change still stops receiving at once: removing the agent's
// install or revoking the credential's grant closes the socket, and
// restoring the install opens it again.
func TestRevokedAccessClosesTheSocket(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "", nil)
		conns := "/api/companies/" + e.CompanyID + "/email/connections"
		connID := testkit.ID(e.Board.JSON("POST", conns, map[string]any{"apiKey": e.OrgKey, "idempotencyKey": testkit.NewUUID()}, 201))
		sum := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", map[string]any{"assignedAgentId": e.AgentID,
			"credentialConnectionId": connID, "username": "cached", "idempotencyKey": testkit.NewUUID()}, 201)
		e.EpID, e.Address = sum["id"].(string), sum["address"].(string)
		e.waitSocket()
		conn := e.Board.JSON("GET", conns+"/"+connID, nil, 200)
		inst := conn["installs"].([]any)[0].(map[string]any)["id"].(string)
		e.Board.JSON("DELETE", conns+"/"+connID+"/installs/"+inst, nil, 204)
		testkit.Eventually(t, wait, "the socket closed after the install was removed", func() bool {
			return e.Em.WebSocketCount() == 0 && !e.Inbound.SocketConnected(e.EpID)
		})
		e.Board.JSON("POST", conns+"/"+connID+"/installs", map[string]any{"targetType": "agent", "targetId": e.AgentID}, 201)
		e.waitSocket()
		e.deliver(emulator.DeliverRequest{Subject: "Back", Text: "access restored"})
		e.settled(1)
		grant := conn["grants"].([]any)[0].(map[string]any)["id"].(string)
		e.Board.JSON("DELETE", conns+"/"+connID+"/grants/"+grant, nil, 204)
		testkit.Eventually(t, wait, "the socket closed after the grant was revoked", func() bool {
			return e.Em.WebSocketCount() == 0 && !e.Inbound.SocketConnected(e.EpID)
		})
	})
}

// A mail to one of many idle inboxes visits only that inbox: the worker's
// statements for it do not grow with the number of inboxes.
func TestOneMailVisitsOneInbox(t *testing.T) {
	const inboxes = 30
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "", nil)
		var ids []string
		for i := range inboxes {
			e.connect("many"+string(rune('a'+i%26))+string(rune('a'+i/26)), nil)
			ids = append(ids, e.EpID)
		}
		testkit.Eventually(t, wait, "every socket subscribed and caught up", func() bool {
			for _, id := range ids {
				if !e.Inbound.SocketCaughtUp(id) {
					return false
				}
			}
			return e.Em.WebSocketCount() == inboxes
		})
		quiet(e)
		q0 := e.Inbound.Queries()
		e.deliver(emulator.DeliverRequest{Subject: "Just one", Text: "for the last inbox"})
		e.settled(1)
		quiet(e)
		if n := e.Inbound.Queries() - q0; n >= inboxes {
			t.Fatalf("one mail to one of %d inboxes took %d worker statements", inboxes, n)
		}
	})
}

// quiet waits until the worker's post-commit signals have drained.
func quiet(e *env) {
	e.t.Helper()
	testkit.Eventually(e.t, wait, "a quiet worker", func() bool {
		q := e.Inbound.Queries()
		time.Sleep(100 * time.Millisecond)
		return e.Inbound.Queries() == q
	})
}

// The activation catch-up runs even when the live connection never
// subscribes (the provider refuses the WebSocket handshake).
func TestActivationScanWithoutASocket(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "", nil)
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "websocket"}, Status: 503, Code: "service_unavailable"})
		e.connect("nosocket", nil)
		testkit.Eventually(t, wait, "the activation catch-up", func() bool { return e.endpoint().LastSyncAt != nil })
	})
}

// A rescan read in progress (at 10,000 inboxes about a tenth of a second
// of database time, every minute and on every lifecycle change) does not
// hold a known inbox's new mail: with the read held open, the mail is
// received and processed.
func TestRescanReadDoesNotHoldAMail(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "held", nil)
		e.waitSocket()
		entered := make(chan struct{}, 1)
		release := make(chan struct{})
		inbound.SetRescanHold(func() {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		})
		var once sync.Once
		done := func() {
			once.Do(func() {
				inbound.SetRescanHold(nil)
				close(release)
			})
		}
		t.Cleanup(done)
		e.Inbound.Notify()
		select {
		case <-entered:
		case <-time.After(wait):
			t.Fatal("no rescan read began after Notify")
		}
		e.deliver(emulator.DeliverRequest{Subject: "While reading", Text: "not held"})
		e.settled(1)
		done()
	})
}
