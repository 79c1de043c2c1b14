package inbound_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func publicURL(c *config.Config) { c.PublicURL = "https://paperclip.example" }

// webhookSecret reads the signing secret of the inbox's Paperclip webhook
// from the provider (as the provider would sign with it).
func webhookSecret(t *testing.T, e *env) string {
	t.Helper()
	c, err := agentmail.New(agentmail.Options{BaseURL: e.Em.APIURL(), APIKey: e.OrgKey})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListInboxWebhooks(context.Background(), e.Address, agentmail.ListParams{})
	if err != nil || len(list.Webhooks) != 1 {
		t.Fatalf("webhooks: %v %v", list, err)
	}
	return list.Webhooks[0].Secret
}

// providerEvent is the raw webhook body AgentMail sends for a received
// message: the full message as the provider serializes it.
func providerEvent(t *testing.T, e *env, messageID string) []byte {
	t.Helper()
	c, _ := agentmail.New(agentmail.Options{BaseURL: e.Em.APIURL(), APIKey: e.OrgKey})
	m, err := c.GetMessage(context.Background(), e.Address, messageID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"type": "event", "event_type": "message.received", "event_id": "evt_" + messageID, "message": m})
	return b
}

// Signed webhooks go through
// the durable queue (204 after admission), a duplicate gives one task and one
// wake, and a changed body, a stale timestamp, a signature by another key,
// another inbox's event and a WebSocket-mode inbox are all rejected with 403.
func TestWebhookReceiving(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "hooks", map[string]any{"receiveMode": "webhook"}, publicURL)
		secret := webhookSecret(t, e)
		ep := e.endpoint()
		res := e.deliver(emulator.DeliverRequest{Subject: "Via webhook", Text: "Signed body"})
		body := providerEvent(t, e, res.MessageID)
		now := time.Now()

		tampered := append([]byte(nil), body...)
		tampered = append(tampered, ' ')
		testkit.MustEqual(t, "changed body", tamperedPost(t, e.URL(), ep.PublicID, secret, body, tampered, now), http.StatusForbidden)
		testkit.MustEqual(t, "stale timestamp", signedPost(t, e.URL(), ep.PublicID, secret, body, now.Add(-10*time.Minute)), http.StatusForbidden)
		testkit.MustEqual(t, "other key", signedPost(t, e.URL(), ep.PublicID, "whsec_b3RoZXJzZWNyZXRvdGhlcnNlY3JldA==", body, now), http.StatusForbidden)
		// The refused deliveries show in the inbox's health, until one
		// verifies.
		sum := e.Board.JSON("GET", "/api/email/inboxes/"+e.EpID, nil, 200)
		testkit.MustEqual(t, "health after forged posts", sum["healthCode"], any("webhook_signature_failing"))
		if le, _ := sum["lastError"].(string); !strings.Contains(le, "signature does not verify") || sum["lastErrorAt"] == nil {
			t.Fatalf("forged posts: lastError %q at %v", le, sum["lastErrorAt"])
		}

		other := []byte(`{"type":"event","event_type":"message.received","event_id":"evt_x","message":{"inbox_id":"someone@agentmail.to","message_id":"<x@example.com>","thread_id":"thd_x"}}`)
		testkit.MustEqual(t, "another inbox", signedPost(t, e.URL(), ep.PublicID, secret, other, now), http.StatusForbidden)
		testkit.MustEqual(t, "unknown inbox", signedPost(t, e.URL(), "00000000-0000-0000-0000-000000000000", secret, body, now), http.StatusNotFound)
		for _, d := range e.deliveries() {
			// The activation catch-up may legitimately admit the message.
			if d.Source == queue.SourceWebhook {
				t.Fatalf("a rejected webhook was admitted: %+v", d)
			}
		}

		testkit.MustEqual(t, "signed", signedPost(t, e.URL(), ep.PublicID, secret, body, now), http.StatusNoContent)
		sum = e.Board.JSON("GET", "/api/email/inboxes/"+e.EpID, nil, 200)
		testkit.MustEqual(t, "health after a verified delivery", sum["healthCode"], any("connected"))
		testkit.MustEqual(t, "webhook socket owner", sum["socketOwner"], nil)
		testkit.MustEqual(t, "duplicate", signedPost(t, e.URL(), ep.PublicID, secret, body, now), http.StatusNoContent)
		e.settled(1)
		testkit.MustEqual(t, "tasks", len(e.tasks()), 1)
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
		testkit.MustEqual(t, "sockets in webhook mode", e.Em.WebSocketCount(), 0)

		// A WebSocket-mode inbox does not accept webhooks.
		e2 := newEnv(t, url, "sockets", nil)
		testkit.MustEqual(t, "websocket-mode inbox", signedPost(t, e2.URL(), e2.endpoint().PublicID, secret, body, now), http.StatusForbidden)
	})
}

// Field lesson 21: an event without the body (large or HTML-only mail)
// never starts work from the event; the worker fetches the message, so the
// task carries the real text.
func TestEventWithoutBodyFetchesTheMessage(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "bodyless", map[string]any{"receiveMode": "webhook"}, publicURL)
		secret := webhookSecret(t, e)
		res := e.deliver(emulator.DeliverRequest{Subject: "HTML only", HTML: "<p>Only <b>HTML</b> here</p><script>alert(1)</script>"})
		testkit.MustEqual(t, "post", signedPost(t, e.URL(), e.endpoint().PublicID, secret, receivedFrame(e.Address, res.MessageID, res.ThreadID), time.Now()), http.StatusNoContent)
		e.settled(1)
		task := e.tasks()[0]
		msgs := e.messages(task.ID)
		if len(msgs) != 1 || msgs[0].Text != "Only  HTML  here" {
			t.Fatalf("retained text: %q", msgs[0].Text)
		}
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
	})
}

// With --insecure-local-webhooks the emulator's own webhook deliveries
// reach a server on a plain-HTTP loopback public URL: setup registers the
// webhook there and mail arrives through it, with no WebSocket.
func TestInsecureLocalWebhooksWithTheEmulator(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		addr := freeAddr(t)
		e := newEnv(t, url, "localhooks", map[string]any{"receiveMode": "webhook"}, func(c *config.Config) {
			c.Listen, c.PublicURL, c.InsecureLocalWebhooks = addr, "http://"+addr, true
		})
		if n := e.Em.WebSocketCount(); n != 0 {
			t.Fatalf("a webhook inbox opened %d WebSockets", n)
		}
		e.deliver(emulator.DeliverRequest{Subject: "Over local webhook", Text: "Plain HTTP on loopback"})
		// The server took the signed event over plain HTTP (a 2xx to the
		// emulator's attempt), and the mail became the task.
		testkit.Eventually(t, wait, "the accepted webhook delivery", func() bool {
			for _, a := range e.Em.WebhookAttempts("") {
				if a.EventType == "message.received" && a.Succeeded && strings.HasPrefix(a.URL, "http://"+addr+"/api/chat-webhooks/agentmail/") {
					return true
				}
			}
			return false
		})
		testkit.Eventually(t, wait, "the email task", func() bool {
			tasks := e.tasks()
			return len(tasks) == 1 && tasks[0].Title == "Over local webhook"
		})
	})
}
