package conformance_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// An inbox-scoped key connects only its own inbox: it attaches that inbox
// (a requested username creates nothing) and serves as its runtime key (no
// second key is minted); naming another inbox is 403; and reconnecting an inbox with another inbox's key is 403 and changes
// nothing.
func TestInboxScopedKey(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		own, other := e.createInbox("own"), e.createInbox("other")
		ownKey, otherKey := e.inboxKey(own), e.inboxKey(other)
		setup := func(body map[string]any) (int, []byte) {
			body["assignedAgentId"], body["idempotencyKey"] = e.AgentID, testkit.NewUUID()
			return e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", body)
		}

		// 403: the key belongs to a different inbox.
		st, raw := setup(map[string]any{"apiKey": ownKey, "inboxId": other})
		if st != http.StatusForbidden || !strings.Contains(string(raw), "API key belongs to a different inbox") {
			t.Fatalf("other inbox: %d %s", st, raw)
		}
		// With an inbox key the target is always the key's own inbox (a
		// requested username does not create another one).
		st, raw = setup(map[string]any{"apiKey": ownKey, "username": "brand-new"})
		if st != http.StatusCreated {
			t.Fatalf("own inbox: %d %s", st, raw)
		}
		sum := errorOf(t, raw)
		e.ep, e.addr = sum["id"].(string), sum["address"].(string)
		testkit.MustEqual(t, "attached", e.addr, own)
		if _, err := e.provider(e.OrgKey).GetInbox(context.Background(), "brand-new@agentmail.to"); err == nil {
			t.Fatal("an inbox key created a provider inbox")
		}
		// A second connection of the same inbox is refused.
		st, raw = setup(map[string]any{"apiKey": ownKey})
		if st != http.StatusConflict {
			t.Fatalf("second connection of the inbox: %d %s", st, raw)
		}
		e.waitReceiving()
		var keys struct {
			APIKeys []struct {
				APIKeyID string `json:"api_key_id"`
			} `json:"api_keys"`
		}
		if err := e.provider(e.OrgKey).Do(context.Background(), "GET", "/inboxes/"+own+"/api-keys", nil, nil, &keys); err != nil {
			t.Fatal(err)
		}
		testkit.MustEqual(t, "inbox keys (the given key is the runtime key)", len(keys.APIKeys), 1)
		// It receives with that key.
		e.deliver(emulator.DeliverRequest{Subject: "Scoped hello", Text: "hi"})
		task := e.task("Scoped hello")
		testkit.Eventually(t, wait, "the wake", func() bool { return len(e.wakes(task)) == 1 })

		// 403: reconnecting with another inbox's key.
		st, raw = e.Board.Do("POST", "/api/email/inboxes/"+e.ep+"/reconnect", map[string]any{"apiKey": otherKey, "receiveMode": "websocket"})
		if st != http.StatusForbidden || !strings.Contains(string(raw), "API key belongs to a different inbox") {
			t.Fatalf("reconnect with another inbox's key: %d %s", st, raw)
		}
		after := e.inbox()
		if after["status"] != "active" || after["address"] != own {
			t.Fatalf("the refused reconnect changed the inbox: %v", after)
		}
		// Its own key reconnects.
		e.Reconnect(t, e.ep, email.ReconnectInput{APIKey: ownKey, ReceiveMode: "websocket"})
		e.waitReceiving()
		// The provider enforces the scope too: the key cannot read the other inbox.
		if _, err := e.provider(ownKey).GetInbox(context.Background(), other); err == nil {
			t.Fatal("an inbox key read another inbox")
		}
	})
}
