package emulator

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The test settings: a small page cap pages every listing, and a clock
// offset stamps received mail with an earlier created_at (a late receipt).
func TestPageCapAndClockOffset(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "pager")
	r := control(t, s, "PUT", "/_emulator/settings", map[string]any{"max_page_size": 2, "clock_offset_ms": -180000})
	if r.status != 200 || r.body["max_page_size"].(float64) != 2 || r.body["clock_offset_ms"].(float64) != -180000 {
		t.Fatalf("settings: %d %s", r.status, r.raw)
	}
	before := time.Now()
	for _, subj := range []string{"a", "b", "c"} {
		deliver(t, s, in, map[string]any{"from": "x@example.com", "subject": subj, "text": "t"})
	}
	page := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?limit=50", nil, 200)
	if page.body["count"].(float64) != 2 || page.str("next_page_token") == "" {
		t.Fatalf("capped page: %s", page.raw)
	}
	created, err := time.Parse(time.RFC3339, page.list("messages")[0].(map[string]any)["created_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Sub(created); d < 170*time.Second || d > 200*time.Second {
		t.Fatalf("created_at %s is %s before the delivery, want about 3 minutes", created, d)
	}
	control(t, s, "PUT", "/_emulator/settings", map[string]any{"max_page_size": 0, "clock_offset_ms": 0})
	page = mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages", nil, 200)
	if page.body["count"].(float64) != 3 {
		t.Fatalf("uncapped page: %s", page.raw)
	}
}

// SubscribedCount counts only subscriptions that would receive the inbox's
// mail: a connection that has not subscribed yet, or one filtered to
// another inbox, does not count.
func TestSubscribedCount(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	a := createInbox(t, s, key, "subs-a")
	b := createInbox(t, s, key, "subs-b")
	conn := dialWS(t, s, key)
	if n := s.SubscribedCount(a); n != 0 {
		t.Fatalf("before subscribe: subscribed %d", n)
	}
	conn.subscribe(t, map[string]any{"type": "subscribe", "inbox_ids": []string{b}})
	if s.SubscribedCount(a) != 0 || s.SubscribedCount(b) != 1 {
		t.Fatalf("filtered: a %d, b %d", s.SubscribedCount(a), s.SubscribedCount(b))
	}
	r := control(t, s, "GET", "/_emulator/websockets?inbox_id="+esc(b), nil)
	if r.body["subscribed"].(float64) != 1 || r.body["count"].(float64) != 1 {
		t.Fatalf("control: %s", r.raw)
	}
}

// Blocked, spam and unauthenticated inbound mail is emitted as the
// provider does: its own event variant, in that priority, only to
// subscriptions that list it, and never as message.received; the message
// keeps received and unread plus the classification label.
func TestFilteredReceivedVariants(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "variants")
	if err := s.SetBlockList(in, []string{"blocked.example"}); err != nil {
		t.Fatal(err)
	}
	all := dialWS(t, s, key)
	all.subscribe(t, map[string]any{"type": "subscribe", "event_types": []string{"message.received", "message.received.spam",
		"message.received.blocked", "message.received.unauthenticated"}})
	plain := dialWS(t, s, key)
	plain.subscribe(t, map[string]any{"type": "subscribe"})
	for _, m := range []map[string]any{
		{"from": "x@blocked.example", "subject": "blocked", "headers": map[string]string{"X-Spam-Flag": "YES"}},
		{"from": "x@example.com", "subject": "spam", "headers": map[string]string{"X-Spam-Flag": "YES", "X-Emulator-Auth": "fail"}},
		{"from": "x@example.com", "subject": "unauthenticated", "headers": map[string]string{"X-Emulator-Auth": "fail"}},
		{"from": "x@example.com", "subject": "normal"},
	} {
		m["text"] = "x"
		deliver(t, s, in, m)
	}
	for _, want := range []struct{ typ, subject, label string }{
		{"message.received.blocked", "blocked", "blocked"},
		{"message.received.spam", "spam", "spam"},
		{"message.received.unauthenticated", "unauthenticated", "unauthenticated"},
		{"message.received", "normal", "unread"},
	} {
		ev := all.next(t)
		msg := ev["message"].(map[string]any)
		labels := fmt.Sprint(msg["labels"])
		if ev["event_type"] != want.typ || msg["subject"] != want.subject || !strings.Contains(labels, "received") || !strings.Contains(labels, want.label) {
			t.Fatalf("want %s for %q, got %v %v %s", want.typ, want.subject, ev["event_type"], msg["subject"], labels)
		}
	}
	if ev := plain.next(t); ev["event_type"] != "message.received" || ev["message"].(map[string]any)["subject"] != "normal" {
		t.Fatalf("a default subscription got %v", ev)
	}
}
