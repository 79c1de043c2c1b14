package emulator

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

type wsClient struct {
	conn   *websocket.Conn
	frames chan map[string]any
	done   chan struct{}
}

func dialWS(t testing.TB, s *Server, key string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, s.WebSocketURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatalf("dial websocket: %v", err)
	}
	conn.SetReadLimit(16 << 20)
	c := &wsClient{conn: conn, frames: make(chan map[string]any, 100000), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			_, data, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			var f map[string]any
			if json.Unmarshal(data, &f) == nil {
				c.frames <- f
			}
		}
	}()
	t.Cleanup(func() { conn.CloseNow() })
	return c
}

// next returns the next frame or fails after a deadline.
func (c *wsClient) next(t testing.TB) map[string]any {
	t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a websocket frame")
	case <-c.done:
		t.Fatal("websocket closed")
	}
	return nil
}

func (c *wsClient) send(t testing.TB, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatalf("write frame: %v", err)
	}
}

func (c *wsClient) subscribe(t testing.TB, frame map[string]any) map[string]any {
	t.Helper()
	c.send(t, frame)
	ack := c.next(t)
	if ack["type"] != "subscribed" {
		t.Fatalf("want subscribed, got %v", ack)
	}
	return ack
}

// until reads frames until done returns true.
func (c *wsClient) until(t testing.TB, done func(map[string]any) bool) {
	t.Helper()
	for !done(c.next(t)) {
	}
}

func TestWebSocket(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	a := createInbox(t, s, key, "wsa")
	b := createInbox(t, s, key, "wsb")

	// Bad credentials are refused at the handshake with 401.
	_, resp, err := websocket.Dial(context.Background(), s.WebSocketURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer am_nope"}}})
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("bad key handshake: %v %v", err, resp)
	}
	// The api_key query parameter works without a header.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qc, _, err := websocket.Dial(ctx, s.WebSocketURL()+"?api_key="+key, nil)
	if err != nil {
		t.Fatalf("query auth: %v", err)
	}
	qc.CloseNow()

	ws := dialWS(t, s, key)
	ws.send(t, map[string]any{"type": "hello"})
	if f := ws.next(t); f["type"] != "error" || f["name"] == "" || f["message"] == "" {
		t.Fatalf("unknown frame type: %v", f)
	}
	ack := ws.subscribe(t, map[string]any{"type": "subscribe", "inbox_ids": []string{a}})
	if ids, _ := ack["inbox_ids"].([]any); len(ids) != 1 || ids[0] != a {
		t.Fatalf("ack: %v", ack)
	}
	if _, has := ack["event_types"]; has {
		t.Fatalf("ack echoes absent event_types: %v", ack)
	}
	deliver(t, s, b, map[string]any{"from": "x@example.com", "subject": "for b", "text": "x"})
	deliver(t, s, a, map[string]any{"from": "x@example.com", "subject": "spam", "text": "x", "headers": map[string]string{"X-Spam-Flag": "YES"}})
	deliver(t, s, a, map[string]any{"from": "x@example.com", "subject": "for a", "text": "x"})
	ev := ws.next(t)
	msg, _ := ev["message"].(map[string]any)
	if ev["type"] != "event" || ev["event_type"] != "message.received" || msg["subject"] != "for a" || ev["thread"] == nil || !strings.HasPrefix(ev["event_id"].(string), "evt_") {
		t.Fatalf("event: %v", ev)
	}
	// Filtered variants only when listed; a new subscribe replaces the filter.
	ws.subscribe(t, map[string]any{"type": "subscribe", "event_types": []string{"message.received.spam"}})
	deliver(t, s, b, map[string]any{"from": "x@example.com", "subject": "ham", "text": "x"})
	deliver(t, s, b, map[string]any{"from": "x@example.com", "subject": "spam2", "text": "x", "headers": map[string]string{"X-Spam-Flag": "YES"}})
	if ev := ws.next(t); ev["event_type"] != "message.received.spam" {
		t.Fatalf("spam event: %v", ev)
	}
	// Forbidden filters and foreign inboxes get error frames.
	k := mustCall(t, s, key, "POST", "/inboxes/"+esc(a)+"/api-keys", map[string]any{"permissions": map[string]bool{"message_read": true}}, 200)
	ws2 := dialWS(t, s, k.str("api_key"))
	ws2.send(t, map[string]any{"type": "subscribe", "event_types": []string{"message.received.blocked"}})
	if f := ws2.next(t); f["type"] != "error" || f["message"] != "label_blocked_read is forbidden" {
		t.Fatalf("forbidden subscribe: %v", f)
	}
	ws2.send(t, map[string]any{"type": "subscribe", "inbox_ids": []string{b}})
	if f := ws2.next(t); f["type"] != "error" {
		t.Fatalf("foreign inbox: %v", f)
	}
	// An inbox key only ever sees its inbox.
	ws2.subscribe(t, map[string]any{"type": "subscribe"})
	deliver(t, s, b, map[string]any{"from": "x@example.com", "subject": "not yours", "text": "x"})
	deliver(t, s, a, map[string]any{"from": "x@example.com", "subject": "yours", "text": "x"})
	if ev := ws2.next(t); ev["message"].(map[string]any)["subject"] != "yours" {
		t.Fatalf("inbox-scoped event: %v", ev)
	}

	// Drop closes every live connection.
	if r := control(t, s, "POST", "/_emulator/websockets/drop", nil); r.status != 200 || r.body["dropped"].(float64) < 2 {
		t.Fatalf("drop: %s", r.raw)
	}
	select {
	case <-ws.done:
	case <-time.After(10 * time.Second):
		t.Fatal("connection survived the drop")
	}
	waitFor(t, "subscribers to be removed", func() bool { return s.WebSocketCount() == 0 })
}
